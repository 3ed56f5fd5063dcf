// Package serviceaccount issues and verifies ServiceAccount tokens: JWTs signed with the
// cluster's sa.key, carrying upstream's claims (iss, sub system:serviceaccount:<ns>:<name>,
// aud, exp, and the private "kubernetes.io" claim naming the namespace, the account and, for
// bound tokens, the pod). Issuing backs the TokenRequest subresource; verifying backs the API
// server's bearer-token authentication.
package serviceaccount

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	sautil "k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/util/keyutil"
)

// CredentialIDKey is the user extra that names the token a request authenticated with
// ("JTI=<jti>"), as upstream's.
const CredentialIDKey = "authentication.kubernetes.io/credential-id"

// DefaultIssuer is the iss claim, as kubeadm configures it.
const DefaultIssuer = "https://kubernetes.default.svc.cluster.local"

// Ref names an object a token is bound to or issued for.
type Ref struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

type k8sClaims struct {
	Namespace      string `json:"namespace"`
	ServiceAccount Ref    `json:"serviceaccount"`
	Pod            *Ref   `json:"pod,omitempty"`
	Node           *Ref   `json:"node,omitempty"`
}

type claims struct {
	jwt.RegisteredClaims
	Kubernetes k8sClaims `json:"kubernetes.io"`
}

// Issuer signs tokens.
type Issuer struct {
	key    *ecdsa.PrivateKey
	issuer string
	keyID  string
	now    func() time.Time
}

// NewIssuer loads the signing key (an ECDSA P-256 PEM key, sa.key).
func NewIssuer(keyFile, issuer string) (*Issuer, error) {
	k, err := keyutil.PrivateKeyFromFile(keyFile)
	if err != nil {
		return nil, err
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: service-account key must be ECDSA, got %T", keyFile, k)
	}
	kid, err := keyID(ec.Public())
	if err != nil {
		return nil, err
	}
	return &Issuer{key: ec, issuer: issuer, keyID: kid, now: time.Now}, nil
}

// Request describes a token to issue.
type Request struct {
	Namespace, Name, UID string
	// Audiences default to the issuer.
	Audiences []string
	// Expiration defaults to one hour.
	Expiration time.Duration
	// Pod binds the token to a pod, if set; Node is that pod's node.
	Pod  *Ref
	Node *Ref
}

// Issue signs a token and returns it with its expiry.
func (i *Issuer) Issue(r Request) (string, time.Time, error) {
	if r.Expiration == 0 {
		r.Expiration = time.Hour
	}
	aud := r.Audiences
	if len(aud) == 0 {
		aud = []string{i.issuer}
	}
	now := i.now().Truncate(time.Second)
	exp := now.Add(r.Expiration)
	c := claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    i.issuer,
			Subject:   sautil.ServiceAccountUsernamePrefix + r.Namespace + ":" + r.Name,
			Audience:  aud,
			ExpiresAt: jwt.NewNumericDate(exp),
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			// The token's own ID, as upstream's: audit logs and credential-id name it.
			ID: uuid.NewString(),
		},
		Kubernetes: k8sClaims{Namespace: r.Namespace, ServiceAccount: Ref{Name: r.Name, UID: r.UID}, Pod: r.Pod, Node: r.Node},
	}
	t := jwt.NewWithClaims(jwt.SigningMethodES256, c)
	t.Header["kid"] = i.keyID
	s, err := t.SignedString(i.key)
	return s, exp, err
}

// Issuer returns the iss claim.
func (i *Issuer) Issuer() string { return i.issuer }

// Lookup returns the UID of a live service account, or an error if it is gone.
type Lookup func(ctx context.Context, namespace, name string) (uid string, err error)

// Authenticator verifies tokens issued by an Issuer with the same key.
type Authenticator struct {
	pub       crypto.PublicKey
	issuer    string
	audiences []string
	lookup    Lookup
	now       func() time.Time
}

// NewAuthenticator loads the public key (sa.pub). lookup, if set, rejects tokens of deleted or
// re-created service accounts.
func NewAuthenticator(pubFile, issuer string, audiences []string, lookup Lookup) (*Authenticator, error) {
	keys, err := keyutil.PublicKeysFromFile(pubFile)
	if err != nil {
		return nil, err
	}
	return &Authenticator{pub: keys[0], issuer: issuer, audiences: audiences, lookup: lookup, now: time.Now}, nil
}

// AuthenticateToken implements authenticator.Token. Tokens of other issuers are not ours to
// judge: they yield (nil, false, nil) so other authenticators may try.
func (a *Authenticator) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	var c claims
	unverified, _, err := jwt.NewParser().ParseUnverified(token, &c)
	if err != nil || unverified == nil || c.Issuer != a.issuer {
		return nil, false, nil
	}
	c = claims{}
	_, err = jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return a.pub, nil },
		jwt.WithValidMethods([]string{"ES256"}), jwt.WithIssuer(a.issuer), jwt.WithTimeFunc(a.now),
		jwt.WithExpirationRequired())
	if err != nil {
		return nil, false, fmt.Errorf("invalid service account token: %w", err)
	}
	if len(a.audiences) > 0 && !slices.ContainsFunc(c.Audience, func(s string) bool { return slices.Contains(a.audiences, s) }) {
		return nil, false, errors.New("invalid service account token: token audiences do not match")
	}
	k := c.Kubernetes
	if c.Subject != sautil.ServiceAccountUsernamePrefix+k.Namespace+":"+k.ServiceAccount.Name {
		return nil, false, errors.New("invalid service account token: subject does not match the kubernetes.io claim")
	}
	if a.lookup != nil {
		uid, err := a.lookup(ctx, k.Namespace, k.ServiceAccount.Name)
		if err != nil {
			return nil, false, fmt.Errorf("service account %s/%s: %w", k.Namespace, k.ServiceAccount.Name, err)
		}
		if uid != k.ServiceAccount.UID {
			return nil, false, fmt.Errorf("service account UID (%s) does not match claim (%s)", uid, k.ServiceAccount.UID)
		}
	}
	extra := map[string][]string{}
	if c.ID != "" {
		extra[CredentialIDKey] = []string{"JTI=" + c.ID}
	}
	if k.Pod != nil {
		extra["authentication.kubernetes.io/pod-name"] = []string{k.Pod.Name}
		extra["authentication.kubernetes.io/pod-uid"] = []string{k.Pod.UID}
	}
	if k.Node != nil {
		extra["authentication.kubernetes.io/node-name"] = []string{k.Node.Name}
		extra["authentication.kubernetes.io/node-uid"] = []string{k.Node.UID}
	}
	return &authenticator.Response{
		Audiences: authenticator.Audiences(c.Audience),
		User: &user.DefaultInfo{
			Name:   c.Subject,
			UID:    k.ServiceAccount.UID,
			Groups: []string{sautil.AllServiceAccountsGroup, sautil.ServiceAccountGroupPrefix + k.Namespace},
			Extra:  extra,
		},
	}, true, nil
}

// keyID is upstream's: the base64url SHA-256 of the DER public key.
func keyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return strings.TrimRight(base64.URLEncoding.EncodeToString(sum[:]), "="), nil
}
