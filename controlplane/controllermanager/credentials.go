package controllermanager

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// serviceAccountConfig returns a client config that authenticates as the service account
// kube-system/<name>, as kube-controller-manager does with --use-service-account-credentials:
// each controller's writes carry its own identity. The token is requested through the
// TokenRequest API and renewed before it expires.
func serviceAccountConfig(ctx context.Context, root kubernetes.Interface, base *rest.Config, name string) (*rest.Config, error) {
	_, err := root.CoreV1().ServiceAccounts("kube-system").Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("service account kube-system/%s: %w", name, err)
	}
	src := &tokenSource{client: root, name: name}
	if _, err := src.token(ctx); err != nil {
		return nil, err
	}
	cfg := rest.AnonymousClientConfig(base)
	cfg.UserAgent = name
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return &bearer{base: rt, src: src} }
	return cfg, nil
}

type tokenSource struct {
	client kubernetes.Interface
	name   string

	mu      sync.Mutex
	current string
	expires time.Time
}

// token returns a valid token, requesting a new one when less than a fifth of its life is left.
func (s *tokenSource) token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current != "" && time.Until(s.expires) > 12*time.Minute {
		return s.current, nil
	}
	tr, err := s.client.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, s.name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		if s.current != "" && time.Now().Before(s.expires) {
			return s.current, nil // keep using the old one while renewal fails
		}
		return "", fmt.Errorf("token for kube-system/%s: %w", s.name, err)
	}
	s.current, s.expires = tr.Status.Token, tr.Status.ExpirationTimestamp.Time
	return s.current, nil
}

type bearer struct {
	base http.RoundTripper
	src  *tokenSource
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := b.src.token(req.Context())
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+tok)
	return b.base.RoundTrip(req)
}
