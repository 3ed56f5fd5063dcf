package volumes

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
)

// podCert is what the agent holds for one podCertificate source of one pod: the issued key
// and chain it writes, and the request it is waiting on for the first or the next one.
type podCert struct {
	key, chain []byte    // PEM; nil until the first certificate is issued
	refresh    time.Time // the signer's beginRefreshAt: ask for the next one from then
	notAfter   time.Time

	pending    string // name of the request the signer has not answered yet
	pendingKey []byte // its private key, PEM
	// After a denial or failure the agent asks again only at retryAt, and says why until then.
	retryAt time.Time
	refusal string
}

// podCertRetry is how long the agent waits to ask again after a signer denied or failed a
// request (a signer that refused once will likely refuse again at once).
const podCertRetry = 5 * time.Minute

// podCertProjection writes a podCertificate source's files: the private key the agent made
// and the chain the signer issued for it, together at credentialBundlePath (key first) and/or
// apart at keyPath and certificateChainPath. The first time, it makes a key and sends a
// PodCertificateRequest, and fails until the signer issues it, so the pod waits; from the
// signer's beginRefreshAt on it asks for the next one and keeps writing the current one
// until that is issued. The key never leaves the node.
func (m *Manager) podCertProjection(ctx context.Context, pod *corev1.Pod, volume string, index int, p *corev1.PodCertificateProjection, mode int32, own ownership) (map[string]projection, error) {
	key := fmt.Sprintf("%s/%s/%d", pod.UID, volume, index)
	m.mu.Lock()
	st := m.certs[key]
	m.mu.Unlock()
	now := time.Now()

	if st.pending != "" {
		r, err := m.pendingRequest(ctx, pod, st.pending)
		switch {
		case apierrors.IsNotFound(err):
			st.pending, st.pendingKey = "", nil // deleted before it was answered: ask again
		case err != nil:
			return nil, fmt.Errorf("podCertificate for signer %q: %w", p.SignerName, err)
		default:
			if c, done := pcrAnswer(r); done {
				if c.Type == certificatesv1.PodCertificateRequestConditionTypeIssued {
					st.key, st.chain = st.pendingKey, encodeCertificates(certificateDERs(r.Status.CertificateChain))
					st.refresh, st.notAfter = timeOf(r.Status.BeginRefreshAt), timeOf(r.Status.NotAfter)
					st.refusal = ""
				} else {
					st.retryAt = now.Add(podCertRetry)
					st.refusal = fmt.Sprintf("PodCertificateRequest %s %s: %s: %s", r.Name, strings.ToLower(c.Type), c.Reason, c.Message)
				}
				st.pending, st.pendingKey = "", nil
			}
		}
	}
	var requestErr error
	if (st.chain == nil || !now.Before(st.refresh)) && st.pending == "" && !now.Before(st.retryAt) {
		if name, keyPEM, err := m.requestPodCert(ctx, pod, p); err != nil {
			// Tried again at the next call; a certificate still valid is written meanwhile.
			requestErr = fmt.Errorf("podCertificate for signer %q: %w", p.SignerName, err)
		} else {
			st.pending, st.pendingKey = name, keyPEM
		}
	}
	m.mu.Lock()
	m.certs[key] = st
	m.mu.Unlock()

	if st.chain == nil || !now.Before(st.notAfter) {
		if requestErr != nil {
			return nil, requestErr
		}
		if st.refusal != "" {
			return nil, fmt.Errorf("podCertificate for signer %q: %s", p.SignerName, st.refusal)
		}
		return nil, fmt.Errorf("podCertificate for signer %q: waiting for the signer to issue PodCertificateRequest %s", p.SignerName, st.pending)
	}
	f := func(data []byte) projection { return ownedProjection(data, mode, own) }
	out := map[string]projection{}
	if p.CredentialBundlePath != "" {
		out[p.CredentialBundlePath] = f(append(append([]byte{}, st.key...), st.chain...))
	}
	if p.KeyPath != "" {
		out[p.KeyPath] = f(st.key)
	}
	if p.CertificateChainPath != "" {
		out[p.CertificateChainPath] = f(st.chain)
	}
	return out, nil
}

// requestPodCert makes a key of the source's type and sends a PodCertificateRequest for
// it, owned by the pod (so it goes with the pod), naming the pod, its service account and
// this node with their UIDs; it returns the request's name and the key.
func (m *Manager) requestPodCert(ctx context.Context, pod *corev1.Pod, p *corev1.PodCertificateProjection) (string, []byte, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	account, err := m.client.CoreV1().ServiceAccounts(pod.Namespace).Get(ctx, sa, metav1.GetOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("service account %s/%s: %w", pod.Namespace, sa, err)
	}
	nodeUID, err := m.nodeUID(ctx, pod.Spec.NodeName)
	if err != nil {
		return "", nil, err
	}
	signer, err := newKey(p.KeyType)
	if err != nil {
		return "", nil, err
	}
	stub, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, signer)
	if err != nil {
		return "", nil, fmt.Errorf("stub PKCS#10 request: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(signer)
	if err != nil {
		return "", nil, err
	}
	r := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, GenerateName: "req-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: p.SignerName, PodName: pod.Name, PodUID: pod.UID,
			ServiceAccountName: sa, ServiceAccountUID: account.UID,
			NodeName: types.NodeName(pod.Spec.NodeName), NodeUID: nodeUID,
			MaxExpirationSeconds: p.MaxExpirationSeconds, StubPKCS10Request: stub,
			UnverifiedUserAnnotations: p.UserAnnotations,
		},
	}
	created, err := m.client.CertificatesV1().PodCertificateRequests(pod.Namespace).Create(ctx, r, metav1.CreateOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("creating a PodCertificateRequest: %w", err)
	}
	return created.Name, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// pendingRequest reads one of this node's requests. It lists by spec.nodeName, as the
// kubelet's informer does: that is what the Node authorizer lets a node read (it keeps no
// graph of requests to allow a GET by name).
func (m *Manager) pendingRequest(ctx context.Context, pod *corev1.Pod, name string) (*certificatesv1.PodCertificateRequest, error) {
	sel := fields.AndSelectors(fields.OneTermEqualSelector("spec.nodeName", pod.Spec.NodeName), fields.OneTermEqualSelector("metadata.name", name))
	l, err := m.client.CertificatesV1().PodCertificateRequests(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	for i := range l.Items {
		if l.Items[i].Name == name {
			return &l.Items[i], nil
		}
	}
	return nil, apierrors.NewNotFound(certificatesv1.Resource("podcertificaterequests"), name)
}

// nodeUID is the UID of this node's Node object, read once.
func (m *Manager) nodeUID(ctx context.Context, name string) (types.UID, error) {
	m.mu.Lock()
	uid := m.nodeUIDs[name]
	m.mu.Unlock()
	if uid != "" {
		return uid, nil
	}
	n, err := m.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("node %s: %w", name, err)
	}
	m.mu.Lock()
	m.nodeUIDs[name] = n.UID
	m.mu.Unlock()
	return n.UID, nil
}

// newKey makes a private key of a podCertificate keyType.
func newKey(keyType string) (crypto.Signer, error) {
	switch keyType {
	case "RSA3072":
		return rsa.GenerateKey(rand.Reader, 3072)
	case "RSA4096":
		return rsa.GenerateKey(rand.Reader, 4096)
	case "ECDSAP256":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ECDSAP384":
		return ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ECDSAP521":
		return ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "ED25519":
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	}
	return nil, fmt.Errorf("unknown key type %q", keyType)
}

// pcrAnswer is the signer's terminal condition on a request, if it has answered.
func pcrAnswer(r *certificatesv1.PodCertificateRequest) (metav1.Condition, bool) {
	for _, c := range r.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied,
			certificatesv1.PodCertificateRequestConditionTypeFailed:
			if c.Status == metav1.ConditionTrue {
				return c, true
			}
		}
	}
	return metav1.Condition{}, false
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}
