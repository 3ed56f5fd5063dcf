package bootstraptoken

import (
	"context"
	"crypto/subtle"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

// The Secret format upstream defines (k8s.io/cluster-bootstrap/token/api).
const (
	SecretType             corev1.SecretType = "bootstrap.kubernetes.io/token"
	SecretNamespace                          = "kube-system"
	SecretPrefix                             = "bootstrap-token-"
	keyID                                    = "token-id"
	keySecret                                = "token-secret"
	keyExpiration                            = "expiration"
	keyDescription                           = "description"
	keyExtraGroups                           = "auth-extra-groups"
	keyUsageAuthentication                   = "usage-bootstrap-authentication"
	// Group is every bootstrap token's group; extra groups must start with "Group:".
	Group = "system:bootstrappers"
	// UserPrefix prefixes a token's user name: system:bootstrap:<id>.
	UserPrefix = "system:bootstrap:"
	// NodeGroup is the extra group of skiff's node-join token.
	NodeGroup = "system:bootstrappers:skiff:default-node-token"
)

// Secret is the kube-system Secret that makes t valid for authentication; a zero expiry
// never expires.
func Secret(t Token, description string, expires time.Time, extraGroups ...string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: SecretPrefix + t.ID, Namespace: SecretNamespace},
		Type:       SecretType,
		Data: map[string][]byte{
			keyID: []byte(t.ID), keySecret: []byte(t.Secret), keyDescription: []byte(description),
			keyUsageAuthentication: []byte("true"),
		},
	}
	if len(extraGroups) > 0 {
		s.Data[keyExtraGroups] = []byte(strings.Join(extraGroups, ","))
	}
	if !expires.IsZero() {
		s.Data[keyExpiration] = []byte(expires.UTC().Format(time.RFC3339))
	}
	return s
}

// SecretGetter reads a kube-system Secret by name.
type SecretGetter func(ctx context.Context, name string) (*corev1.Secret, error)

// Authenticator accepts bearer tokens "<id>.<secret>" backed by a valid bootstrap Secret.
type Authenticator struct {
	Get SecretGetter
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

var _ authenticator.Token = Authenticator{}

// AuthenticateToken implements authenticator.Token. A string that is not shaped like a
// bootstrap token is not this authenticator's (false, nil), so other authenticators try it;
// a bootstrap-shaped token that fails is rejected with the reason (never the secret).
func (a Authenticator) AuthenticateToken(ctx context.Context, raw string) (*authenticator.Response, bool, error) {
	t, err := Parse(raw)
	if err != nil {
		return nil, false, nil
	}
	s, err := a.Get(ctx, SecretPrefix+t.ID)
	if err != nil || s == nil {
		return nil, false, nil
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	groups, err := Validate(s, t, now())
	if err != nil {
		return nil, false, err
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: UserPrefix + t.ID, Groups: groups}}, true, nil
}

// Validate checks that s backs t at time now and returns the token's groups.
func Validate(s *corev1.Secret, t Token, now time.Time) ([]string, error) {
	switch {
	case s.DeletionTimestamp != nil:
		return nil, fmt.Errorf("bootstrap token %s is being deleted", t.ID)
	case s.Type != SecretType:
		return nil, fmt.Errorf("secret %s has type %q, not %q", s.Name, s.Type, SecretType)
	case string(s.Data[keyID]) != t.ID:
		return nil, fmt.Errorf("secret %s has token-id %q", s.Name, s.Data[keyID])
	case subtle.ConstantTimeCompare(s.Data[keySecret], []byte(t.Secret)) != 1:
		return nil, fmt.Errorf("bootstrap token %s: wrong secret", t.ID)
	case string(s.Data[keyUsageAuthentication]) != "true":
		return nil, fmt.Errorf("bootstrap token %s is not for authentication", t.ID)
	}
	if exp := string(s.Data[keyExpiration]); exp != "" {
		when, err := time.Parse(time.RFC3339, exp)
		if err != nil {
			return nil, fmt.Errorf("bootstrap token %s: expiration %q: %w", t.ID, exp, err)
		}
		if !now.Before(when) {
			return nil, fmt.Errorf("bootstrap token %s expired at %s", t.ID, exp)
		}
	}
	groups := []string{Group}
	if extra := string(s.Data[keyExtraGroups]); extra != "" {
		for _, g := range strings.Split(extra, ",") {
			g = strings.TrimSpace(g)
			if !strings.HasPrefix(g, Group+":") {
				return nil, fmt.Errorf("bootstrap token %s: extra group %q does not start with %q", t.ID, g, Group+":")
			}
			groups = append(groups, g)
		}
	}
	return groups, nil
}
