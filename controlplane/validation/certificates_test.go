package validation

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func csrPEM(t *testing.T) []byte {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:n1"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestCertificateSigningRequest(t *testing.T) {
	good := csrPEM(t)
	tampered := []byte(strings.Replace(string(good), string(good[100:104]), "AAAA", 1))
	valid := func() *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "node-csr-1"},
			Spec: certificatesv1.CertificateSigningRequestSpec{Request: good, SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
				Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}}}
	}
	approved := certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}
	denied := certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue}
	for _, tc := range []struct {
		name   string
		mutate func(*certificatesv1.CertificateSigningRequest)
		field  string // "" means valid
	}{
		{"valid", func(*certificatesv1.CertificateSigningRequest) {}, ""},
		{"no request", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = nil }, "spec.request"},
		{"not PEM", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("hello") }, "spec.request"},
		{"bad signature", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = tampered }, "spec.request"},
		{"two blocks", func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = append(append([]byte{}, good...), good...)
		}, "spec.request"},
		{"no signer", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "" }, "spec.signerName"},
		{"signer without path", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "example.com" }, "spec.signerName"},
		{"signer with bad domain", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "Ex_ample/x" }, "spec.signerName"},
		{"no usages", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = nil }, "spec.usages"},
		{"unknown usage", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = []certificatesv1.KeyUsage{"flying"} }, "spec.usages[0]"},
		{"duplicate usage", func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth, certificatesv1.UsageClientAuth}
		}, "spec.usages[1]"},
		{"too short", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.ExpirationSeconds = ptr.To[int32](599) }, "spec.expirationSeconds"},
		{"ten minutes", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.ExpirationSeconds = ptr.To[int32](600) }, ""},
		{"approved and denied", func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{approved, denied}
		}, "status.conditions"},
		{"approved twice", func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{approved, approved}
		}, "status.conditions[1].type"},
		{"approved False", func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionFalse}}
		}, "status.conditions[0].status"},
		{"certificate not PEM", func(c *certificatesv1.CertificateSigningRequest) { c.Status.Certificate = []byte("nope") }, "status.certificate"},
		{"certificate is a CSR", func(c *certificatesv1.CertificateSigningRequest) { c.Status.Certificate = good }, "status.certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mutate(c)
			errs := CertificateSigningRequest(c)
			if tc.field == "" {
				if len(errs) != 0 {
					t.Fatalf("unexpected errors: %v", errs)
				}
				return
			}
			found := false
			for _, e := range errs {
				found = found || e.Field == tc.field
			}
			if !found {
				t.Errorf("errors %v, want one on %s", errs, tc.field)
			}
		})
	}
}
