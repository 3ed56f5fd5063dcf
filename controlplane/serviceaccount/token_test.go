package serviceaccount

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/client-go/util/keyutil"

	"github.com/skiff-sh/skiff/controlplane/pki"
)

// keys lays out a PKI in a temporary directory and returns its service-account key pair.
func keys(t *testing.T) (key, pub string) {
	t.Helper()
	l, err := pki.Ensure(pki.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return l.SAKey(), l.SAPub()
}

func newIssuer(t *testing.T, key, iss string) *Issuer {
	t.Helper()
	i, err := NewIssuer(key, iss)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func newAuthenticator(t *testing.T, pub string, audiences []string, lookup Lookup) *Authenticator {
	t.Helper()
	a, err := NewAuthenticator(pub, DefaultIssuer, audiences, lookup)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func issue(t *testing.T, i *Issuer, r Request) string {
	t.Helper()
	tok, _, err := i.Issue(r)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestIssueAndAuthenticate(t *testing.T) {
	key, pub := keys(t)
	iss := newIssuer(t, key, DefaultIssuer)
	if iss.Issuer() != DefaultIssuer {
		t.Errorf("Issuer() = %q", iss.Issuer())
	}
	var looked []string
	lookup := func(_ context.Context, ns, name string) (string, error) {
		looked = append(looked, ns+"/"+name)
		return "sa-uid", nil
	}
	a := newAuthenticator(t, pub, []string{DefaultIssuer, "https://other"}, lookup)

	start := time.Now()
	tok, exp, err := iss.Issue(Request{Namespace: "ns", Name: "name", UID: "sa-uid", Pod: &Ref{Name: "web-0", UID: "pod-uid"}})
	if err != nil {
		t.Fatal(err)
	}
	if d := exp.Sub(start); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("default expiry in %v, want an hour", d)
	}

	resp, ok, err := a.AuthenticateToken(context.Background(), tok)
	if err != nil || !ok {
		t.Fatalf("AuthenticateToken = %v, %v", ok, err)
	}
	u := resp.User
	if u.GetName() != "system:serviceaccount:ns:name" {
		t.Errorf("name = %q", u.GetName())
	}
	if u.GetUID() != "sa-uid" {
		t.Errorf("uid = %q", u.GetUID())
	}
	if !slices.Equal(u.GetGroups(), []string{"system:serviceaccounts", "system:serviceaccounts:ns"}) {
		t.Errorf("groups = %v", u.GetGroups())
	}
	extra := u.GetExtra()
	if !slices.Equal(extra["authentication.kubernetes.io/pod-name"], []string{"web-0"}) ||
		!slices.Equal(extra["authentication.kubernetes.io/pod-uid"], []string{"pod-uid"}) {
		t.Errorf("extra = %v", extra)
	}
	if !slices.Equal([]string(resp.Audiences), []string{DefaultIssuer}) {
		t.Errorf("audiences = %v, want the issuer by default", resp.Audiences)
	}
	if !slices.Equal(looked, []string{"ns/name"}) {
		t.Errorf("lookups = %v", looked)
	}

	// The header names the key as upstream does, and the claims carry the kubernetes.io block.
	parsed, _, err := jwt.NewParser().ParseUnverified(tok, &claims{})
	if err != nil {
		t.Fatal(err)
	}
	pubKeys, err := keyutil.PublicKeysFromFile(pub)
	if err != nil {
		t.Fatal(err)
	}
	kid, _ := keyID(pubKeys[0])
	if parsed.Header["kid"] != kid || parsed.Header["alg"] != "ES256" {
		t.Errorf("header = %v, want kid %s", parsed.Header, kid)
	}
	c := parsed.Claims.(*claims)
	if c.Kubernetes.Namespace != "ns" || c.Kubernetes.ServiceAccount != (Ref{Name: "name", UID: "sa-uid"}) || c.Subject != "system:serviceaccount:ns:name" {
		t.Errorf("claims = %+v", c)
	}
}

func TestUnboundToken(t *testing.T) {
	key, pub := keys(t)
	iss := newIssuer(t, key, DefaultIssuer)
	tok, exp, err := iss.Issue(Request{Namespace: "kube-system", Name: "controller", UID: "u", Audiences: []string{"api", "vault"}, Expiration: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(exp); d > 10*time.Minute || d < 9*time.Minute {
		t.Errorf("expiry in %v, want 10m", d)
	}
	for _, auds := range [][]string{nil, {"vault"}, {"other", "api"}} {
		resp, ok, err := newAuthenticator(t, pub, auds, nil).AuthenticateToken(context.Background(), tok)
		if err != nil || !ok {
			t.Fatalf("audiences %v: %v %v", auds, ok, err)
		}
		if x := resp.User.GetExtra(); len(x) != 1 || len(x[CredentialIDKey]) != 1 {
			t.Errorf("unbound token has extra %v, want its credential-id alone", x)
		}
		if !slices.Equal([]string(resp.Audiences), []string{"api", "vault"}) {
			t.Errorf("audiences = %v", resp.Audiences)
		}
	}
}

func TestRejected(t *testing.T) {
	key, pub := keys(t)
	otherKey, _ := keys(t)
	iss := newIssuer(t, key, DefaultIssuer)
	base := Request{Namespace: "ns", Name: "name", UID: "sa-uid"}
	sameUID := func(context.Context, string, string) (string, error) { return "sa-uid", nil }

	past := newIssuer(t, key, DefaultIssuer)
	past.now = func() time.Time { return time.Now().Add(-2 * time.Hour) }
	future := newIssuer(t, key, DefaultIssuer)
	future.now = func() time.Time { return time.Now().Add(time.Hour) }

	tamper := func(tok string, part int) string {
		parts := strings.Split(tok, ".")
		b := []byte(parts[part])
		// Swap one character of the segment for another base64url character.
		if b[5] == 'A' {
			b[5] = 'B'
		} else {
			b[5] = 'A'
		}
		parts[part] = string(b)
		return strings.Join(parts, ".")
	}
	good := issue(t, iss, base)

	sign := func(c claims, method jwt.SigningMethod, k any) string {
		tok, err := jwt.NewWithClaims(method, c).SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	valid := func() claims {
		now := time.Now()
		return claims{
			RegisteredClaims: jwt.RegisteredClaims{Issuer: DefaultIssuer, Subject: "system:serviceaccount:ns:name",
				Audience: jwt.ClaimStrings{DefaultIssuer}, ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now)},
			Kubernetes: k8sClaims{Namespace: "ns", ServiceAccount: Ref{Name: "name", UID: "sa-uid"}},
		}
	}
	wrongSubject := valid()
	wrongSubject.Subject = "system:serviceaccount:kube-system:admin"
	noExpiry := valid()
	noExpiry.ExpiresAt = nil
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name      string
		token     string
		audiences []string
		lookup    Lookup
		// notOurs: the token is left to other authenticators (nil, false, nil).
		notOurs bool
		// errContains is part of the expected error's message.
		errContains string
	}{
		{name: "expired", token: issue(t, past, base), errContains: "expired"},
		{name: "not yet valid", token: issue(t, future, base), errContains: "not valid yet"},
		{name: "wrong audience", token: issue(t, iss, Request{Namespace: "ns", Name: "name", UID: "sa-uid", Audiences: []string{"vault"}}),
			audiences: []string{DefaultIssuer}, errContains: "audiences do not match"},
		{name: "tampered signature", token: tamper(good, 2), errContains: "signature is invalid"},
		{name: "tampered claims", token: forge(t, good, func(c *claims) { c.Kubernetes.ServiceAccount.UID = "other" })},
		{name: "claims moved to another account", token: forge(t, good, func(c *claims) {
			c.Subject = "system:serviceaccount:kube-system:admin"
			c.Kubernetes.Namespace, c.Kubernetes.ServiceAccount.Name = "kube-system", "admin"
		})},
		{name: "signed by another key", token: issue(t, newIssuer(t, otherKey, DefaultIssuer), base), errContains: "signature is invalid"},
		{name: "HMAC signed", token: sign(valid(), jwt.SigningMethodHS256, []byte("secret"))},
		{name: "RSA signed", token: sign(valid(), jwt.SigningMethodRS256, rsaKey)},
		{name: "unsigned", token: sign(valid(), jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType)},
		{name: "subject does not match claims", token: sign(wrongSubject, jwt.SigningMethodES256, iss.key), errContains: "subject does not match"},
		{name: "no expiry", token: sign(noExpiry, jwt.SigningMethodES256, iss.key), errContains: "exp claim is required"},
		{name: "account re-created", token: good,
			lookup: func(context.Context, string, string) (string, error) { return "new-uid", nil }, errContains: "does not match claim"},
		{name: "account deleted", token: good,
			lookup: func(context.Context, string, string) (string, error) { return "", errors.New("not found") }, errContains: "ns/name: not found"},
		{name: "other issuer", token: issue(t, newIssuer(t, key, "https://oidc.example.com"), base), notOurs: true},
		{name: "not a JWT", token: "abcdef.0123456789abcdef", notOurs: true},
		{name: "empty", token: "", notOurs: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lookup := tc.lookup
			if lookup == nil {
				lookup = sameUID
			}
			a := newAuthenticator(t, pub, tc.audiences, lookup)
			resp, ok, err := a.AuthenticateToken(context.Background(), tc.token)
			if ok || resp != nil {
				t.Fatalf("accepted: %+v", resp)
			}
			if tc.notOurs && err != nil {
				t.Errorf("err = %v, want none so other authenticators may try", err)
			}
			if !tc.notOurs && err == nil {
				t.Error("rejected without an error")
			}
			if tc.errContains != "" && (err == nil || !strings.Contains(err.Error(), tc.errContains)) {
				t.Errorf("err = %v, want it to mention %q", err, tc.errContains)
			}
		})
	}

	// The clock of the authenticator decides, not the issuer's.
	t.Run("authenticator clock", func(t *testing.T) {
		a := newAuthenticator(t, pub, nil, nil)
		a.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
		if _, ok, err := a.AuthenticateToken(context.Background(), good); ok || err == nil {
			t.Errorf("token valid two hours later: %v %v", ok, err)
		}
		a.now = time.Now
		if _, ok, err := a.AuthenticateToken(context.Background(), good); !ok || err != nil {
			t.Errorf("token invalid now: %v %v", ok, err)
		}
	})
}

// forge rewrites a token's claims and keeps its original signature.
func forge(t *testing.T, tok string, edit func(*claims)) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c claims
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	edit(&c)
	raw, err = json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	parts[1] = base64.RawURLEncoding.EncodeToString(raw)
	return strings.Join(parts, ".")
}

func TestNewIssuerErrors(t *testing.T) {
	if _, err := NewIssuer(filepath.Join(t.TempDir(), "missing.key"), DefaultIssuer); err == nil {
		t.Error("missing key accepted")
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, err := keyutil.MarshalPrivateKeyToPEM(rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rsa.key")
	if err := os.WriteFile(path, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewIssuer(path, DefaultIssuer); err == nil || !strings.Contains(err.Error(), "must be ECDSA") {
		t.Errorf("RSA key: %v", err)
	}
	if _, err := NewAuthenticator(filepath.Join(t.TempDir(), "missing.pub"), DefaultIssuer, nil, nil); err == nil {
		t.Error("missing public key accepted")
	}
}

var _ authenticator.Token = (*Authenticator)(nil)

func TestDiscovery(t *testing.T) {
	key, pub := keys(t)
	iss := newIssuer(t, key, DefaultIssuer)
	tok, _, err := iss.Issue(Request{Namespace: "ns", Name: "sa", UID: "u1", Audiences: []string{"aud"}, Expiration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cfg, jwks, err := Discovery(DefaultIssuer, "https://10.0.0.1:6443/openid/v1/jwks", pub)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(cfg, &doc); err != nil || doc.Issuer != DefaultIssuer || doc.JWKSURI != "https://10.0.0.1:6443/openid/v1/jwks" {
		t.Fatalf("config %s (%v)", cfg, err)
	}
	// The token verifies with the published key alone, as an OIDC client would do it.
	var set struct {
		Keys []struct{ Kty, Crv, X, Y, Kid, Alg string } `json:"keys"`
	}
	if err := json.Unmarshal(jwks, &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("jwks %s (%v)", jwks, err)
	}
	k := set.Keys[0]
	coord := func(s string) *big.Int {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) != 32 {
			t.Fatalf("coordinate %q: %d bytes, %v", s, len(b), err)
		}
		return new(big.Int).SetBytes(b)
	}
	published := &ecdsa.PublicKey{Curve: elliptic.P256(), X: coord(k.X), Y: coord(k.Y)}
	parsed, err := jwt.Parse(tok, func(tk *jwt.Token) (any, error) {
		if tk.Header["kid"] != k.Kid {
			return nil, fmt.Errorf("token kid %v, published %s", tk.Header["kid"], k.Kid)
		}
		return published, nil
	}, jwt.WithValidMethods([]string{k.Alg}))
	if err != nil || !parsed.Valid {
		t.Fatalf("token does not verify with the published key: %v", err)
	}
}

func TestCredentialID(t *testing.T) {
	key, pub := keys(t)
	iss := newIssuer(t, key, DefaultIssuer)
	a := newAuthenticator(t, pub, []string{DefaultIssuer}, nil)
	ids := map[string]bool{}
	for i := 0; i < 2; i++ {
		tok, _, err := iss.Issue(Request{Namespace: "ns", Name: "sa", UID: "u1"})
		if err != nil {
			t.Fatal(err)
		}
		resp, ok, err := a.AuthenticateToken(context.Background(), tok)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		cred := resp.User.GetExtra()[CredentialIDKey]
		if len(cred) != 1 || !strings.HasPrefix(cred[0], "JTI=") || len(cred[0]) < 10 {
			t.Fatalf("credential-id %v", cred)
		}
		ids[cred[0]] = true
	}
	if len(ids) != 2 {
		t.Error("two tokens share a jti")
	}
}

func TestPodBoundTokenNamesItsNode(t *testing.T) {
	key, pub := keys(t)
	tok, _, err := newIssuer(t, key, DefaultIssuer).Issue(Request{Namespace: "ns", Name: "sa", UID: "u1",
		Pod: &Ref{Name: "p", UID: "pu"}, Node: &Ref{Name: "n1", UID: "nu"}})
	if err != nil {
		t.Fatal(err)
	}
	resp, ok, err := newAuthenticator(t, pub, []string{DefaultIssuer}, nil).AuthenticateToken(context.Background(), tok)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	x := resp.User.GetExtra()
	if !slices.Equal(x["authentication.kubernetes.io/node-name"], []string{"n1"}) || !slices.Equal(x["authentication.kubernetes.io/node-uid"], []string{"nu"}) ||
		!slices.Equal(x["authentication.kubernetes.io/pod-name"], []string{"p"}) {
		t.Errorf("extra %v", x)
	}
}
