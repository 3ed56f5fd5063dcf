package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/skiff-sh/skiff/controlplane/validation"
)

// Signers guards what a user may do in a signer's name, as upstream's CertificateApproval,
// CertificateSigning, CertificateSubjectRestriction and ClusterTrustBundleAttest plugins do:
// approving a CSR takes "approve" on the signer, issuing its certificate (or answering a
// PodCertificateRequest) "sign", and linking a ClusterTrustBundle to a signer "attest" —
// each the verb on certificates.k8s.io "signers" named after the signer or "<domain>/*". Without these, anyone who may update a CSR's
// approval could approve requests for any signer, and anyone who may write a trust bundle
// could plant anchors for one; RBAC alone cannot say which signer an object names.
type Signers struct {
	Authorizer authorizer.Authorizer
}

var (
	csrResource = certificatesv1.Resource("certificatesigningrequests")
	ctbResource = certificatesv1.Resource("clustertrustbundles")
	pcrResource = certificatesv1.Resource("podcertificaterequests")
)

// Handles implements admission.Interface.
func (Signers) Handles(op admission.Operation) bool {
	return op == admission.Create || op == admission.Update
}

// Validate implements admission.ValidationInterface.
func (s Signers) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	switch a.GetResource().GroupResource() {
	case csrResource:
		csr, ok := a.GetObject().(*certificatesv1.CertificateSigningRequest)
		if !ok {
			return nil
		}
		switch {
		case a.GetSubresource() == "" && a.GetOperation() == admission.Create:
			return subjectRestriction(a, csr)
		case a.GetSubresource() == "approval":
			return s.authorize(ctx, a, "approve", csr.Spec.SignerName, "approve requests")
		case a.GetSubresource() == "status":
			old, ok := a.GetOldObject().(*certificatesv1.CertificateSigningRequest)
			if !ok || slices.Equal(old.Status.Certificate, csr.Status.Certificate) {
				return nil
			}
			return s.authorize(ctx, a, "sign", old.Spec.SignerName, "sign requests")
		}
	case pcrResource:
		r, ok := a.GetObject().(*certificatesv1.PodCertificateRequest)
		old, oldOK := a.GetOldObject().(*certificatesv1.PodCertificateRequest)
		if !ok || !oldOK || a.GetSubresource() != "status" || apiequality.Semantic.DeepEqual(r.Status, old.Status) {
			return nil
		}
		return s.authorize(ctx, a, "sign", old.Spec.SignerName, "sign requests")
	case ctbResource:
		ctb, ok := a.GetObject().(*certificatesv1.ClusterTrustBundle)
		if !ok || a.GetSubresource() != "" || ctb.Spec.SignerName == "" {
			return nil
		}
		// An update that leaves the bundle as it was (labels, finalizers, a storage
		// migration's rewrite) attests nothing new.
		if old, ok := a.GetOldObject().(*certificatesv1.ClusterTrustBundle); ok && old.Spec == ctb.Spec {
			return nil
		}
		return s.authorize(ctx, a, "attest", ctb.Spec.SignerName, "attest")
	}
	return nil
}

// authorize allows the request if the user may verb the signer; upstream's message names
// what was refused ("user not permitted to approve requests with signerName ...").
func (s Signers) authorize(ctx context.Context, a admission.Attributes, verb, signer, what string) error {
	if signerAllows(ctx, s.Authorizer, a.GetUserInfo(), verb, signer) {
		return nil
	}
	if verb == "attest" {
		return admission.NewForbidden(a, fmt.Errorf("user not permitted to attest for signerName %q", signer))
	}
	return admission.NewForbidden(a, fmt.Errorf("user not permitted to %s with signerName %q", what, signer))
}

// signerAllows says whether u may verb the signer: the signer by name, else every signer of
// its domain ("example.com/*").
func signerAllows(ctx context.Context, az authorizer.Authorizer, u user.Info, verb, signer string) bool {
	if az == nil || u == nil {
		return false
	}
	domain, _, _ := strings.Cut(signer, "/")
	for _, name := range []string{signer, domain + "/*"} {
		d, _, err := az.Authorize(ctx, authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: certificatesv1.GroupName,
			APIVersion: "*", Resource: "signers", Name: name, ResourceRequest: true})
		if err == nil && d == authorizer.DecisionAllow {
			return true
		}
	}
	return false
}

// subjectRestriction refuses a CSR for the kube-apiserver-client signer that asks for the
// system:masters group: a certificate in that group passes every authorization check, so
// it is never issued through the API (upstream's CertificateSubjectRestriction).
func subjectRestriction(a admission.Attributes, csr *certificatesv1.CertificateSigningRequest) error {
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName {
		return nil
	}
	req, err := validation.ParseCSR(csr.Spec.Request)
	if err != nil {
		// Validation reports a request that does not parse.
		return nil
	}
	if slices.Contains(req.Subject.Organization, user.SystemPrivilegedGroup) {
		return admission.NewForbidden(a, fmt.Errorf("use of %s signer with %s group is not allowed", csr.Spec.SignerName, user.SystemPrivilegedGroup))
	}
	return nil
}
