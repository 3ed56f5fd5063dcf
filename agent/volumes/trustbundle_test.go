package volumes

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func caPEM(t *testing.T, cn string) string {
	t.Helper()
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestTrustAnchors(t *testing.T) {
	a, b, c := caPEM(t, "a"), caPEM(t, "b"), caPEM(t, "c")
	got := string(trustAnchors([]string{"# comment\n" + b + a, c + a}))
	for _, want := range []string{a, b, c} {
		if strings.Count(got, want) != 1 {
			t.Fatalf("want each anchor once, got:\n%s", got)
		}
	}
	if strings.Contains(got, "comment") {
		t.Fatalf("text between blocks is kept: %s", got)
	}
	if again := string(trustAnchors([]string{c, b, a})); again != got {
		t.Fatalf("the order depends on the bundles' order:\n%s\nvs\n%s", again, got)
	}
	if got := trustAnchors(nil); len(got) != 0 {
		t.Fatalf("no bundles: %q", got)
	}
}

func TestTrustBundleProjection(t *testing.T) {
	a, b, c, d := caPEM(t, "a"), caPEM(t, "b"), caPEM(t, "c"), caPEM(t, "d")
	ctb := func(name, signer, bundle string, labels map[string]string) *certificatesv1.ClusterTrustBundle {
		return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: bundle}}
	}
	m := New(fake.NewClientset(
		ctb("roots", "", a, nil),
		ctb("example.com:one:live", "example.com/one", b, map[string]string{"alive": "true"}),
		ctb("example.com:one:dead", "example.com/one", c, map[string]string{"alive": "false"}),
		ctb("example.com:two:live", "example.com/two", d, map[string]string{"alive": "true"}),
	), t.TempDir())
	alive := &metav1.LabelSelector{MatchLabels: map[string]string{"alive": "true"}}
	for _, tc := range []struct {
		name    string
		src     corev1.ClusterTrustBundleProjection
		want    []string // anchors in the file
		wantErr string
	}{
		{name: "by name", src: corev1.ClusterTrustBundleProjection{Name: ptr.To("roots")}, want: []string{a}},
		{name: "missing name, optional", src: corev1.ClusterTrustBundleProjection{Name: ptr.To("nope"), Optional: ptr.To(true)}},
		{name: "missing name", src: corev1.ClusterTrustBundleProjection{Name: ptr.To("nope")}, wantErr: `clustertrustbundle "nope"`},
		{name: "signer and labels", src: corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/one"), LabelSelector: alive}, want: []string{b}},
		{name: "signer, every bundle", src: corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/one"), LabelSelector: &metav1.LabelSelector{}}, want: []string{b, c}},
		{name: "nil selector matches nothing", src: corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/one"), Optional: ptr.To(true)}},
		{name: "nothing matches", src: corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/one"), LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"alive": "maybe"}}},
			wantErr: "matched zero ClusterTrustBundles"},
		{name: "neither", src: corev1.ClusterTrustBundleProjection{}, wantErr: "neither a bundle nor a signer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.src.Path = "ca.pem"
			got, err := m.trustBundleProjection(context.Background(), &tc.src, 0o644, ownership{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want error %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			f, ok := got["ca.pem"]
			if !ok || len(got) != 1 || f.mode != 0o644 {
				t.Fatalf("want one file ca.pem 0644, got %+v", got)
			}
			if string(f.data) != string(trustAnchors(tc.want)) {
				t.Fatalf("got\n%s\nwant the anchors of %d bundles", f.data, len(tc.want))
			}
		})
	}
}
