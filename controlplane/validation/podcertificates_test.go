package validation

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func stubRequest(t *testing.T) ([]byte, ed25519.PublicKey) {
	t.Helper()
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	return der, pub
}

func validPCR(t *testing.T) (*certificatesv1.PodCertificateRequest, ed25519.PublicKey) {
	stub, pub := stubRequest(t)
	return &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Name: "req-1", Namespace: "ns", ResourceVersion: "1"},
		Spec: certificatesv1.PodCertificateRequestSpec{SignerName: "example.com/s", PodName: "p", PodUID: "pu", ServiceAccountName: "default",
			ServiceAccountUID: "su", NodeName: "n1", NodeUID: "nu", MaxExpirationSeconds: ptr.To[int32](86400), StubPKCS10Request: stub}}, pub
}

func errText(errs field.ErrorList) string { return errs.ToAggregate().Error() }

func TestPodCertificateRequest(t *testing.T) {
	p256, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	p224, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, p256)
	for _, tc := range []struct {
		name   string
		mutate func(*certificatesv1.PodCertificateRequest)
		want   string
	}{
		{"valid", func(*certificatesv1.PodCertificateRequest) {}, ""},
		{"bad signer", func(r *certificatesv1.PodCertificateRequest) { r.Spec.SignerName = "nosigner" }, "spec.signerName"},
		{"no pod UID", func(r *certificatesv1.PodCertificateRequest) { r.Spec.PodUID = "" }, "spec.podUID: Invalid value: \"\": must not be empty"},
		{"bad pod name", func(r *certificatesv1.PodCertificateRequest) { r.Spec.PodName = "P!" }, "spec.podName"},
		{"no lifetime", func(r *certificatesv1.PodCertificateRequest) { r.Spec.MaxExpirationSeconds = nil }, "spec.maxExpirationSeconds: Required value"},
		{"too short", func(r *certificatesv1.PodCertificateRequest) { r.Spec.MaxExpirationSeconds = ptr.To[int32](3599) }, "must be in the range [3600, 7862400]"},
		{"kubernetes signer max", func(r *certificatesv1.PodCertificateRequest) {
			r.Spec.SignerName, r.Spec.MaxExpirationSeconds = "kubernetes.io/x", ptr.To[int32](86401)
		}, "must be in the range [3600, 86400]"},
		{"no key", func(r *certificatesv1.PodCertificateRequest) { r.Spec.StubPKCS10Request = nil }, "exactly one of (stubPKCS10Request)"},
		{"garbage request", func(r *certificatesv1.PodCertificateRequest) { r.Spec.StubPKCS10Request = []byte("x") }, "must be a valid PKCS#10 CSR"},
		{"weak curve", func(r *certificatesv1.PodCertificateRequest) { r.Spec.StubPKCS10Request = p224 }, "P256, P384, or P521"},
		{"bad signature", func(r *certificatesv1.PodCertificateRequest) {
			r.Spec.StubPKCS10Request[len(r.Spec.StubPKCS10Request)-1] ^= 1
		}, "invalid signature"},
		{"bad annotation", func(r *certificatesv1.PodCertificateRequest) {
			r.Spec.UnverifiedUserAnnotations = map[string]string{"nodomain": "x"}
		}, "spec.unverifiedUserAnnotations"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := validPCR(t)
			tc.mutate(r)
			errs := PodCertificateRequest(r)
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatal(errs)
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(errText(errs), tc.want) {
				t.Fatalf("want %q, got %v", tc.want, errs)
			}
		})
	}
	r, _ := validPCR(t)
	changed := r.DeepCopy()
	changed.Spec.PodName = "q"
	if errs := PodCertificateRequestUpdate(changed, r); len(errs) != 1 || errs[0].Field != "spec" || !strings.Contains(errs[0].Detail, "field is immutable") {
		t.Fatalf("spec change: %v", errs)
	}
	relabeled := r.DeepCopy()
	relabeled.Labels = map[string]string{"a": "b"}
	if errs := PodCertificateRequestUpdate(relabeled, r); len(errs) != 0 {
		t.Fatalf("label change: %v", errs)
	}
}

// leafFor issues a certificate for pub valid from notBefore for life.
func leafFor(t *testing.T, pub any, notBefore time.Time, life time.Duration) string {
	t.Helper()
	_, caKey, _ := ed25519.GenerateKey(rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), NotBefore: notBefore, NotAfter: notBefore.Add(life)}, ca, pub, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestPodCertificateRequestStatus(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	old, pub := validPCR(t)
	issued := func(chain string, notBefore time.Time, life, refreshAfter time.Duration) *certificatesv1.PodCertificateRequest {
		r := old.DeepCopy()
		r.Status = certificatesv1.PodCertificateRequestStatus{
			Conditions:       []metav1.Condition{{Type: "Issued", Status: metav1.ConditionTrue, Reason: "Signed", LastTransitionTime: metav1.NewTime(now)}},
			CertificateChain: chain, NotBefore: ptr.To(metav1.NewTime(notBefore)), NotAfter: ptr.To(metav1.NewTime(notBefore.Add(life))),
			BeginRefreshAt: ptr.To(metav1.NewTime(notBefore.Add(refreshAfter)))}
		return r
	}
	good := leafFor(t, pub, now, 24*time.Hour)
	otherPub, _, _ := ed25519.GenerateKey(rand.Reader)
	denied := old.DeepCopy()
	denied.Status.Conditions = []metav1.Condition{{Type: "Denied", Status: metav1.ConditionTrue, Reason: "Policy", LastTransitionTime: metav1.NewTime(now)}}
	deniedWithChain := denied.DeepCopy()
	deniedWithChain.Status.CertificateChain = good
	twoConds := issued(good, now, 24*time.Hour, time.Hour)
	twoConds.Status.Conditions = append(twoConds.Status.Conditions, metav1.Condition{Type: "Failed", Status: metav1.ConditionTrue, Reason: "X", LastTransitionTime: metav1.NewTime(now)})
	for _, tc := range []struct {
		name     string
		r, prior *certificatesv1.PodCertificateRequest
		want     string
	}{
		{"issued", issued(good, now, 24*time.Hour, time.Hour), old, ""},
		{"denied", denied, old, ""},
		{"denied with a chain", deniedWithChain, old, "non-condition status fields must be empty"},
		{"two answers", twoConds, old, "There may be at most one condition"},
		{"another key", issued(leafFor(t, otherPub, now, 24*time.Hour), now, 24*time.Hour, time.Hour), old, "not issued to the requested public key"},
		{"no chain", issued("", now, 24*time.Hour, time.Hour), old, "must contain at least one certificate"},
		{"notBefore disagrees", issued(good, now.Add(time.Second), 24*time.Hour, time.Hour), old, "NotBefore time encoded in the leaf"},
		{"stale", issued(leafFor(t, pub, now.Add(-time.Hour), 24*time.Hour), now.Add(-time.Hour), 24*time.Hour, time.Hour), old, "within 5 minutes"},
		{"longer than asked", issued(leafFor(t, pub, now, 25*time.Hour), now, 25*time.Hour, time.Hour), old, "lifetime must be <= spec.maxExpirationSeconds (86400)"},
		{"shorter than an hour", issued(leafFor(t, pub, now, 30*time.Minute), now, 30*time.Minute, 15*time.Minute), old, "lifetime must be >= 1 hour"},
		{"refresh too early", issued(good, now, 24*time.Hour, time.Minute), old, "at least 10 minutes after status.notBefore"},
		{"answered already", denied, issued(good, now, 24*time.Hour, time.Hour), "immutable after PodCertificateRequest is issued, denied, or failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := PodCertificateRequestStatus(tc.r, tc.prior, now)
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatal(errs)
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(errText(errs), tc.want) {
				t.Fatalf("want %q, got %v", tc.want, errs)
			}
		})
	}
}

func TestProjectedVolume(t *testing.T) {
	pc := func(mutate func(*corev1.PodCertificateProjection)) corev1.VolumeProjection {
		p := &corev1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ECDSAP256", CredentialBundlePath: "b.pem"}
		mutate(p)
		return corev1.VolumeProjection{PodCertificate: p}
	}
	ctb := func(p corev1.ClusterTrustBundleProjection) corev1.VolumeProjection {
		return corev1.VolumeProjection{ClusterTrustBundle: &p}
	}
	for _, tc := range []struct {
		name    string
		sources []corev1.VolumeProjection
		want    string
	}{
		{"pod certificate", []corev1.VolumeProjection{pc(func(*corev1.PodCertificateProjection) {})}, ""},
		{"longest", []corev1.VolumeProjection{pc(func(p *corev1.PodCertificateProjection) { p.MaxExpirationSeconds = ptr.To[int32](7862400) })}, ""},
		{"too long", []corev1.VolumeProjection{pc(func(p *corev1.PodCertificateProjection) { p.MaxExpirationSeconds = ptr.To[int32](7862401) })},
			"if provided, maxExpirationSeconds must be <= 7862400"},
		{"too short", []corev1.VolumeProjection{pc(func(p *corev1.PodCertificateProjection) { p.MaxExpirationSeconds = ptr.To[int32](3599) })},
			"if provided, maxExpirationSeconds must be >= 3600"},
		{"kubernetes signer", []corev1.VolumeProjection{pc(func(p *corev1.PodCertificateProjection) {
			p.SignerName, p.MaxExpirationSeconds = "kubernetes.io/x", ptr.To[int32](86401)
		})}, "if provided, maxExpirationSeconds must be <= 86400"},
		{"key type", []corev1.VolumeProjection{pc(func(p *corev1.PodCertificateProjection) { p.KeyType = "DSA" })}, `keyType: Unsupported value: "DSA"`},
		{"no path", []corev1.VolumeProjection{pc(func(p *corev1.PodCertificateProjection) { p.CredentialBundlePath = "" })}, "specify at least one of"},
		{"escaping path", []corev1.VolumeProjection{pc(func(p *corev1.PodCertificateProjection) { p.KeyPath = "../k" })}, "must not contain '..'"},
		{"duplicate paths", []corev1.VolumeProjection{pc(func(p *corev1.PodCertificateProjection) { p.KeyPath = "b.pem" })}, "conflicting duplicate paths"},
		{"bundle by name", []corev1.VolumeProjection{ctb(corev1.ClusterTrustBundleProjection{Name: ptr.To("example.com:s:roots"), Path: "ca.pem"})}, ""},
		{"bundle by signer", []corev1.VolumeProjection{ctb(corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/s"), Path: "ca.pem"})}, ""},
		{"bundle by both", []corev1.VolumeProjection{ctb(corev1.ClusterTrustBundleProjection{Name: ptr.To("r"), SignerName: ptr.To("example.com/s"), Path: "ca.pem"})},
			"only one of name and signerName may be used"},
		{"bundle by neither", []corev1.VolumeProjection{ctb(corev1.ClusterTrustBundleProjection{Path: "ca.pem"})}, "either name or signerName must be specified"},
		{"bundle name and selector", []corev1.VolumeProjection{ctb(corev1.ClusterTrustBundleProjection{Name: ptr.To("r"), LabelSelector: &metav1.LabelSelector{}, Path: "ca.pem"})},
			"labelSelector must be unset if name is specified"},
		{"bundle without path", []corev1.VolumeProjection{ctb(corev1.ClusterTrustBundleProjection{Name: ptr.To("r")})}, "path: Required value"},
		{"two kinds in a source", []corev1.VolumeProjection{{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: ptr.To("r"), Path: "a"},
			PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519", KeyPath: "k"}}}, "may not specify more than 1 volume type per source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{
				Containers:    []corev1.Container{{Name: "c", Image: "i", ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile}},
				Volumes:       []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: tc.sources}}}},
				RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst}}
			errs := projectedVolume(pod.Spec.Volumes[0].Projected, field.NewPath("spec", "volumes").Index(0).Child("projected"))
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatal(errs)
				}
				if all := Pod(pod); len(all) > 0 {
					t.Fatalf("the whole pod: %v", all)
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(errText(errs), tc.want) {
				t.Fatalf("want %q, got %v", tc.want, errs)
			}
			if all := Pod(pod); !strings.Contains(errText(all), tc.want) {
				t.Fatalf("Pod does not report it: %v", all)
			}
		})
	}
}
