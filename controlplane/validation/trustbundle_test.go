package validation

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// certPEM makes a self-signed certificate; isCA and constraints set its basic constraints.
func certPEM(t *testing.T, cn string, isCA, constraints bool, headers map[string]string) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, IsCA: isCA, BasicConstraintsValid: constraints}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: headers, Bytes: der}))
}

func TestClusterTrustBundle(t *testing.T) {
	ca1, ca2 := certPEM(t, "ca1", true, true, nil), certPEM(t, "ca2", true, true, nil)
	leaf := certPEM(t, "leaf", false, true, nil)
	noConstraints := certPEM(t, "nc", false, false, nil)
	withHeaders := certPEM(t, "h", true, true, map[string]string{"Proc-Type": "4,ENCRYPTED"})
	garbage := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not der")}))
	key := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("k")}))
	bundle := func(name, signer, pems string) *certificatesv1.ClusterTrustBundle {
		return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: pems}}
	}
	for _, tc := range []struct {
		name string
		ctb  *certificatesv1.ClusterTrustBundle
		want string // substring of the error; "" for valid
	}{
		{"unlinked", bundle("roots", "", ca1), ""},
		{"two anchors", bundle("roots", "", ca1+ca2), ""},
		{"linked", bundle("example.com:signer:roots", "example.com/signer", ca1), ""},
		{"linked with a path", bundle("example.com:a:b:roots", "example.com/a/b", ca1), ""},
		{"unlinked with a colon", bundle("a:b", "", ca1), `without signer name must not have ":"`},
		{"linked without the prefix", bundle("roots", "example.com/signer", ca1), `must begin with "example.com:signer:"`},
		{"linked with a bad rest", bundle("example.com:signer:Roots", "example.com/signer", ca1), "lowercase"},
		{"bad signer", bundle("example.com:roots", "example.com", ca1), "fully qualified domain and path"},
		{"empty", bundle("roots", "", ""), "at least one trust anchor must be provided"},
		{"text only", bundle("roots", "", "hello"), "at least one trust anchor must be provided"},
		{"not a certificate", bundle("roots", "", ca1+key), "entry 1 has bad block type: PRIVATE KEY"},
		{"headers", bundle("roots", "", withHeaders), "entry 0 has PEM block headers"},
		{"not X.509", bundle("roots", "", garbage), "entry 0 does not parse as X.509"},
		{"leaf", bundle("roots", "", ca1+leaf), "entry 1 does not have the CA bit set"},
		{"no basic constraints", bundle("roots", "", noConstraints), "entry 0 does not have the CA bit set"},
		{"duplicate", bundle("roots", "", ca1+ca2+ca1), "duplicate trust anchor (indices [0 2])"},
		{"too big", bundle("roots", "", strings.Repeat(ca1, maxTrustBundleSize/len(ca1)+1)), "may not be more than 1048576 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := ClusterTrustBundle(tc.ctb)
			if tc.want == "" {
				if len(errs) != 0 {
					t.Fatalf("want valid, got %v", errs)
				}
				return
			}
			if !strings.Contains(errs.ToAggregate().Error(), tc.want) {
				t.Fatalf("want %q, got %v", tc.want, errs)
			}
		})
	}
}

func TestClusterTrustBundleUpdate(t *testing.T) {
	ca1, ca2 := certPEM(t, "ca1", true, true, nil), certPEM(t, "ca2", true, true, nil)
	old := &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "example.com:s:roots", ResourceVersion: "1"},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "example.com/s", TrustBundle: ca1}}

	rotated := old.DeepCopy()
	rotated.Spec.TrustBundle = ca1 + ca2
	if errs := ClusterTrustBundleUpdate(rotated, old); len(errs) != 0 {
		t.Fatalf("adding an anchor: %v", errs)
	}

	resigned := old.DeepCopy()
	resigned.Spec.SignerName = "example.com/other"
	if errs := ClusterTrustBundleUpdate(resigned, old); !strings.Contains(errs.ToAggregate().Error(), "spec.signerName: Invalid value: \"example.com/other\": field is immutable") {
		t.Fatalf("changing the signer: %v", errs)
	}

	broken := old.DeepCopy()
	broken.Spec.TrustBundle = "x"
	if errs := ClusterTrustBundleUpdate(broken, old); !strings.Contains(errs.ToAggregate().Error(), "at least one trust anchor") {
		t.Fatalf("emptying the bundle: %v", errs)
	}

	// An unchanged bundle is not parsed again: an object stored before a stricter parser
	// stays writable (its labels can change).
	legacy := old.DeepCopy()
	legacy.Spec.TrustBundle = "stored before validation tightened"
	relabeled := legacy.DeepCopy()
	relabeled.Labels = map[string]string{"a": "b"}
	if errs := ClusterTrustBundleUpdate(relabeled, legacy); len(errs) != 0 {
		t.Fatalf("relabeling an old bundle: %v", errs)
	}
}
