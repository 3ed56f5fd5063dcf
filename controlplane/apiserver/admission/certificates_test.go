package admission

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// signerGrants is an authorizer that allows the "verb signer" pairs on certificates.k8s.io
// signers it is given and nothing else.
func signerGrants(g map[string]bool) authorizer.Authorizer {
	return authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.GetAPIGroup() == "certificates.k8s.io" && a.GetResource() == "signers" && g[a.GetVerb()+" "+a.GetName()] {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "", nil
	})
}

func csrRequest(t *testing.T, org ...string) []byte {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "bob", Organization: org}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestSigners(t *testing.T) {
	csr := func(signer string, request []byte, cert string) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "c"},
			Spec:   certificatesv1.CertificateSigningRequestSpec{SignerName: signer, Request: request},
			Status: certificatesv1.CertificateSigningRequestStatus{Certificate: []byte(cert)}}
	}
	ctb := func(signer, bundle string, labels map[string]string) *certificatesv1.ClusterTrustBundle {
		return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: labels},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: bundle}}
	}
	pcr := func(signer, chain string) *certificatesv1.PodCertificateRequest {
		return &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"},
			Spec:   certificatesv1.PodCertificateRequestSpec{SignerName: signer},
			Status: certificatesv1.PodCertificateRequestStatus{CertificateChain: chain}}
	}
	plain, masters := csrRequest(t, "team"), csrRequest(t, "system:masters")
	csrs := certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests")
	ctbs := certificatesv1.SchemeGroupVersion.WithResource("clustertrustbundles")
	grants := signerGrants(map[string]bool{"approve example.com/a": true, "sign example.com/*": true, "attest example.com/a": true})
	for _, tc := range []struct {
		name     string
		obj, old runtime.Object
		gvr      string // "csr", "ctb" or "pcr"
		sub      string
		op       admission.Operation
		want     string // "" allowed, else a substring of the refusal
	}{
		{name: "approve a granted signer", obj: csr("example.com/a", plain, ""), old: csr("example.com/a", plain, ""), gvr: "csr", sub: "approval", op: admission.Update},
		{name: "approve another signer", obj: csr("example.com/b", plain, ""), old: csr("example.com/b", plain, ""), gvr: "csr", sub: "approval", op: admission.Update,
			want: `user not permitted to approve requests with signerName "example.com/b"`},
		{name: "sign through the domain wildcard", obj: csr("example.com/b", plain, "CERT"), old: csr("example.com/b", plain, ""), gvr: "csr", sub: "status", op: admission.Update},
		{name: "sign another domain", obj: csr("other.io/b", plain, "CERT"), old: csr("other.io/b", plain, ""), gvr: "csr", sub: "status", op: admission.Update,
			want: `user not permitted to sign requests with signerName "other.io/b"`},
		{name: "status without a new certificate", obj: csr("other.io/b", plain, ""), old: csr("other.io/b", plain, ""), gvr: "csr", sub: "status", op: admission.Update},
		{name: "system:masters client certificate", obj: csr(certificatesv1.KubeAPIServerClientSignerName, masters, ""), gvr: "csr", op: admission.Create,
			want: "use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"},
		{name: "system:masters for another signer", obj: csr("example.com/a", masters, ""), gvr: "csr", op: admission.Create},
		{name: "ordinary client certificate", obj: csr(certificatesv1.KubeAPIServerClientSignerName, plain, ""), gvr: "csr", op: admission.Create},
		{name: "answer a pod certificate request", obj: pcr("example.com/b", "CERT"), old: pcr("example.com/b", ""), gvr: "pcr", sub: "status", op: admission.Update},
		{name: "answer another domain's request", obj: pcr("other.io/b", "CERT"), old: pcr("other.io/b", ""), gvr: "pcr", sub: "status", op: admission.Update,
			want: `user not permitted to sign requests with signerName "other.io/b"`},
		{name: "status unchanged", obj: pcr("other.io/b", ""), old: pcr("other.io/b", ""), gvr: "pcr", sub: "status", op: admission.Update},
		{name: "attest a granted signer", obj: ctb("example.com/a", "x", nil), gvr: "ctb", op: admission.Create},
		{name: "attest another signer", obj: ctb("example.com/b", "x", nil), gvr: "ctb", op: admission.Create,
			want: `user not permitted to attest for signerName "example.com/b"`},
		{name: "unlinked bundle", obj: ctb("", "x", nil), gvr: "ctb", op: admission.Create},
		{name: "relabel another signer's bundle", obj: ctb("example.com/b", "x", map[string]string{"a": "b"}), old: ctb("example.com/b", "x", nil), gvr: "ctb", op: admission.Update},
		{name: "change another signer's anchors", obj: ctb("example.com/b", "y", nil), old: ctb("example.com/b", "x", nil), gvr: "ctb", op: admission.Update,
			want: "user not permitted to attest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gvr := map[string]schema.GroupVersionResource{"csr": csrs, "ctb": ctbs, "pcr": certificatesv1.SchemeGroupVersion.WithResource("podcertificaterequests")}[tc.gvr]
			a := admission.NewAttributesRecord(tc.obj, tc.old, gvr.GroupVersion().WithKind(""), "", "c", gvr, tc.sub, tc.op, nil, false, &user.DefaultInfo{Name: "bob"})
			err := Signers{Authorizer: grants}.Validate(context.Background(), a, nil)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want %q, got %v", tc.want, err)
			}
		})
	}
}
