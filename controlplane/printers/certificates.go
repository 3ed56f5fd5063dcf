package printers

import (
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// CertificateSigningRequests prints NAME AGE SIGNERNAME REQUESTOR REQUESTEDDURATION CONDITION,
// as upstream's printer does for `kubectl get csr`.
var CertificateSigningRequests = New(func(o runtime.Object) []any {
	csr := o.(*certificatesv1.CertificateSigningRequest)
	requested := "<none>"
	if s := csr.Spec.ExpirationSeconds; s != nil {
		requested = duration.HumanDuration(time.Duration(*s) * time.Second)
	}
	return []any{Age(csr.CreationTimestamp), csr.Spec.SignerName, csr.Spec.Username, requested, CSRCondition(csr)}
},
	AgeColumn,
	Column{Name: "SignerName", Description: "The signer that is asked to sign the request."},
	Column{Name: "Requestor", Description: "The user that created the request."},
	Column{Name: "RequestedDuration", Description: "The requested validity of the certificate."},
	Column{Name: "Condition", Description: "The request's true conditions, Issued once signed, or Pending."},
)

// ClusterTrustBundles prints NAME SIGNERNAME, as upstream's printer does for
// `kubectl get clustertrustbundles` (a bundle's age says nothing about its anchors).
var ClusterTrustBundles = New(func(o runtime.Object) []any {
	return []any{o.(*certificatesv1.ClusterTrustBundle).Spec.SignerName}
},
	Column{Name: "SignerName", Description: "The signer the trust bundle's anchors belong to, if any."},
)

// PodCertificateRequests prints NAME AGE SIGNERNAME POD SERVICEACCOUNT STATE, the state
// being the terminal condition (Issued, Denied, Failed) or Pending.
var PodCertificateRequests = New(func(o runtime.Object) []any {
	r := o.(*certificatesv1.PodCertificateRequest)
	state := "Pending"
	for _, c := range r.Status.Conditions {
		if c.Status == metav1.ConditionTrue {
			state = c.Type
		}
	}
	return []any{Age(r.CreationTimestamp), r.Spec.SignerName, r.Spec.PodName, r.Spec.ServiceAccountName, state}
},
	AgeColumn,
	Column{Name: "SignerName", Description: "The signer asked for the certificate."},
	Column{Name: "Pod", Description: "The pod the certificate is for."},
	Column{Name: "ServiceAccount", Description: "The pod's service account."},
	Column{Name: "State", Description: "Issued, Denied or Failed once the signer answered, else Pending."},
)

// CSRCondition is the CONDITION cell: "Approved,Issued", "Denied", "Pending".
func CSRCondition(csr *certificatesv1.CertificateSigningRequest) string {
	var parts []string
	for _, c := range csr.Status.Conditions {
		if c.Status == corev1.ConditionTrue || c.Status == "" {
			parts = append(parts, string(c.Type))
		}
	}
	if len(csr.Status.Certificate) > 0 {
		parts = append(parts, "Issued")
	}
	if len(parts) == 0 {
		return "Pending"
	}
	return strings.Join(parts, ",")
}
