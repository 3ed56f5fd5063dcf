package volumes

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// issue answers the request as a signer would: a leaf for the request's key, signed by a
// throwaway CA, with the given refresh time.
func issue(t *testing.T, c *fake.Clientset, name string, refresh time.Time) *certificatesv1.PodCertificateRequest {
	t.Helper()
	ctx := context.Background()
	r, err := c.CertificatesV1().PodCertificateRequests("ns").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stub, err := x509.ParseCertificateRequest(r.Spec.StubPKCS10Request)
	if err != nil || stub.CheckSignature() != nil {
		t.Fatalf("stub request: %v", err)
	}
	_, caKey, _ := ed25519.GenerateKey(rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true, BasicConstraintsValid: true}
	notBefore := time.Now().Add(-time.Minute).Truncate(time.Second)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), NotBefore: notBefore, NotAfter: notBefore.Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, stub.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	r.Status = certificatesv1.PodCertificateRequestStatus{
		Conditions:       []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue, Reason: "Signed"}},
		CertificateChain: "issued by a test\n" + string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		NotBefore:        ptr.To(metav1.NewTime(notBefore)), NotAfter: ptr.To(metav1.NewTime(notBefore.Add(24 * time.Hour))),
		BeginRefreshAt: ptr.To(metav1.NewTime(refresh)),
	}
	if r, err = c.CertificatesV1().PodCertificateRequests("ns").UpdateStatus(ctx, r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return r
}

func requests(t *testing.T, c *fake.Clientset) []certificatesv1.PodCertificateRequest {
	t.Helper()
	l, err := c.CertificatesV1().PodCertificateRequests("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// certPod is a pod on node n1 with service account app, and a clientset holding both.
func certPod() (*corev1.Pod, *fake.Clientset) {
	pod := testPod()
	pod.Spec.NodeName, pod.Spec.ServiceAccountName = "n1", "app"
	return pod, fake.NewClientset(
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns", UID: "sa-uid"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}},
	)
}

func TestPodCertProjection(t *testing.T) {
	ctx := context.Background()
	pod, c := certPod()
	// The fake clientset does not generate names.
	n := 0
	c.PrependReactor("create", "podcertificaterequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.PodCertificateRequest)
		n++
		r.Name = fmt.Sprintf("%s%d", r.GenerateName, n)
		return false, nil, nil
	})
	m := New(c, t.TempDir())
	src := &corev1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519", CredentialBundlePath: "bundle.pem",
		KeyPath: "key.pem", CertificateChainPath: "chain.pem", MaxExpirationSeconds: ptr.To[int32](7200), UserAnnotations: map[string]string{"example.com/a": "b"}}

	// First: a request is sent, and the volume waits for it.
	if _, err := m.podCertProjection(ctx, pod, "tls", 0, src, 0o644, ownership{}); err == nil || !strings.Contains(err.Error(), "waiting for the signer to issue PodCertificateRequest req-1") {
		t.Fatalf("before issuance: %v", err)
	}
	rs := requests(t, c)
	if len(rs) != 1 {
		t.Fatalf("want one request, got %d", len(rs))
	}
	spec := rs[0].Spec
	if spec.PodName != "p" || spec.PodUID != "uid-1" || spec.ServiceAccountName != "app" || spec.ServiceAccountUID != "sa-uid" ||
		spec.NodeName != "n1" || spec.NodeUID != "node-uid" || *spec.MaxExpirationSeconds != 7200 || spec.UnverifiedUserAnnotations["example.com/a"] != "b" ||
		len(rs[0].OwnerReferences) != 1 || rs[0].OwnerReferences[0].UID != "uid-1" {
		t.Fatalf("request names the wrong things: %+v %+v", spec, rs[0].OwnerReferences)
	}
	// Asking again before the signer answers sends nothing new.
	if _, err := m.podCertProjection(ctx, pod, "tls", 0, src, 0o644, ownership{}); err == nil {
		t.Fatal("no certificate yet, but no error")
	}
	if len(requests(t, c)) != 1 {
		t.Fatal("a second request while the first is pending")
	}

	issue(t, c, "req-1", time.Now().Add(time.Hour))
	files, err := m.podCertProjection(ctx, pod, "tls", 0, src, 0o644, ownership{})
	if err != nil {
		t.Fatal(err)
	}
	key, chain, bundle := files["key.pem"].data, files["chain.pem"].data, files["bundle.pem"].data
	if string(bundle) != string(key)+string(chain) || strings.Contains(string(chain), "issued by a test") {
		t.Fatalf("bundle is not key then cleaned chain:\n%s", bundle)
	}
	kb, _ := pem.Decode(key)
	priv, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := pem.Decode(chain)
	leaf, err := x509.ParseCertificate(cb.Bytes)
	if err != nil || !leaf.PublicKey.(ed25519.PublicKey).Equal(priv.(ed25519.PrivateKey).Public()) {
		t.Fatalf("the key does not match the issued certificate: %v", err)
	}
	if files["key.pem"].mode != 0o644 {
		t.Fatalf("mode %o", files["key.pem"].mode)
	}

	// A pod with an fsGroup gets the key 0600, owned by its shared user.
	own := ownership{fsUser: ptr.To[int64](1000), fsGroup: ptr.To[int64](2000)}
	files, err = m.podCertProjection(ctx, pod, "tls", 0, src, 0o644, own)
	if err != nil || files["key.pem"].mode != 0o600 || *files["key.pem"].user != 1000 {
		t.Fatalf("with fsGroup: %+v %v", files["key.pem"], err)
	}

	// Past beginRefreshAt: the next request goes out and the current certificate stays.
	m.mu.Lock()
	st := m.certs["uid-1/tls/0"]
	st.refresh = time.Now().Add(-time.Second)
	m.certs["uid-1/tls/0"] = st
	m.mu.Unlock()
	files, err = m.podCertProjection(ctx, pod, "tls", 0, src, 0o644, ownership{})
	if err != nil || string(files["chain.pem"].data) != string(chain) {
		t.Fatalf("while refreshing: %v", err)
	}
	if len(requests(t, c)) != 2 {
		t.Fatal("no refresh request")
	}

	// A denied request is said, and not asked again at once.
	other := &corev1.PodCertificateProjection{SignerName: "example.com/t", KeyType: "ECDSAP256", KeyPath: "k"}
	if _, err := m.podCertProjection(ctx, pod, "tls", 1, other, 0o644, ownership{}); err == nil {
		t.Fatal("want waiting")
	}
	r, _ := c.CertificatesV1().PodCertificateRequests("ns").Get(ctx, "req-3", metav1.GetOptions{})
	r.Status.Conditions = []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeDenied, Status: metav1.ConditionTrue, Reason: "Policy", Message: "no"}}
	if _, err := c.CertificatesV1().PodCertificateRequests("ns").UpdateStatus(ctx, r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := m.podCertProjection(ctx, pod, "tls", 1, other, 0o644, ownership{}); err == nil || !strings.Contains(err.Error(), "PodCertificateRequest req-3 denied: Policy: no") {
			t.Fatalf("after denial: %v", err)
		}
	}
	if len(requests(t, c)) != 3 {
		t.Fatal("asked again right after a denial")
	}

	// Teardown forgets the pod's keys.
	if err := m.Teardown("uid-1"); err != nil {
		t.Fatal(err)
	}
	if len(m.certs) != 0 {
		t.Fatalf("keys kept after teardown: %d", len(m.certs))
	}
}

func TestNewKey(t *testing.T) {
	for _, kt := range []string{"RSA3072", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"} {
		k, err := newKey(kt)
		if err != nil {
			t.Fatal(kt, err)
		}
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, k)
		if err != nil {
			t.Fatal(kt, err)
		}
		if _, err := x509.ParseCertificateRequest(der); err != nil {
			t.Fatal(kt, err)
		}
	}
	if _, err := newKey("DSA"); err == nil {
		t.Fatal("unknown key type accepted")
	}
}

// A request that cannot be sent is said when there is no certificate, and does not take the
// current one away when it was only its refresh.
func TestPodCertRequestFailure(t *testing.T) {
	ctx := context.Background()
	pod, c := certPod()
	refuse := true
	c.PrependReactor("create", "podcertificaterequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if refuse {
			return true, nil, errors.New("admission says no")
		}
		a.(k8stesting.CreateAction).GetObject().(*certificatesv1.PodCertificateRequest).Name = "req-1"
		return false, nil, nil
	})
	m := New(c, t.TempDir())
	src := &corev1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519", KeyPath: "k", CertificateChainPath: "c"}
	if _, err := m.podCertProjection(ctx, pod, "tls", 0, src, 0o644, ownership{}); err == nil || !strings.Contains(err.Error(), "admission says no") {
		t.Fatalf("first request refused: %v", err)
	}
	refuse = false
	if _, err := m.podCertProjection(ctx, pod, "tls", 0, src, 0o644, ownership{}); err == nil {
		t.Fatal("want waiting")
	}
	issue(t, c, "req-1", time.Now().Add(-time.Second)) // due for refresh at once
	refuse = true
	files, err := m.podCertProjection(ctx, pod, "tls", 0, src, 0o644, ownership{})
	if err != nil || len(files["c"].data) == 0 {
		t.Fatalf("a refused refresh took the certificate away: %v", err)
	}
}
