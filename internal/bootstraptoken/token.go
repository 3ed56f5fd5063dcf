// Package bootstraptoken implements node join tokens: the bootstrap tokens upstream keeps as
// kube-system Secrets of type bootstrap.kubernetes.io/token (so `kubectl -n kube-system get
// secrets` shows and revokes them), their authenticator, and skiff's join-token string that
// also pins the cluster CA, as k3s's "K10<ca-hash>::<credentials>" does.
//
// A joining agent knows only the server's address and the join token. It fetches the CA
// from the server's unauthenticated /cacerts, accepts it only if its SHA-256 equals the
// pinned hash, and from then on talks TLS verified against that CA, authenticated as
// system:bootstrap:<id> in group system:bootstrappers, which may do nothing but request and
// read CertificateSigningRequests.
package bootstraptoken

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// Token is a bootstrap token "<id>.<secret>": a public 6-character id and a 16-character secret.
type Token struct {
	ID, Secret string
}

var tokenRE = regexp.MustCompile(`^([a-z0-9]{6})\.([a-z0-9]{16})$`)

const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// Generate returns a random token.
func Generate() (Token, error) {
	id, err := randomString(6)
	if err != nil {
		return Token{}, err
	}
	secret, err := randomString(16)
	if err != nil {
		return Token{}, err
	}
	return Token{ID: id, Secret: secret}, nil
}

func randomString(n int) (string, error) {
	b := make([]byte, n)
	// 252 is the largest multiple of 36 below 256: rejecting bytes above it keeps the
	// characters uniformly distributed.
	out := make([]byte, 0, n)
	for len(out) < n {
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		for _, c := range b {
			if c < 252 && len(out) < n {
				out = append(out, alphabet[int(c)%len(alphabet)])
			}
		}
	}
	return string(out), nil
}

// Parse reads "<id>.<secret>".
func Parse(s string) (Token, error) {
	m := tokenRE.FindStringSubmatch(s)
	if m == nil {
		return Token{}, fmt.Errorf("bootstrap token %q is not of the form [a-z0-9]{6}.[a-z0-9]{16}", redact(s))
	}
	return Token{ID: m[1], Secret: m[2]}, nil
}

func (t Token) String() string { return t.ID + "." + t.Secret }

// JoinToken is what `skiff agent --token` takes: the CA pin and the bootstrap token.
type JoinToken struct {
	// CAHash is the hex SHA-256 of the CA bundle the server serves at /cacerts.
	CAHash string
	Token  Token
}

const joinPrefix = "K10"

func (j JoinToken) String() string { return joinPrefix + j.CAHash + "::" + j.Token.String() }

// ParseJoin reads "K10<sha256 hex>::<id>.<secret>", or a bare "<id>.<secret>" (no CA pin:
// the CA is trusted on first use, as k3s does with a short token).
func ParseJoin(s string) (JoinToken, error) {
	s = strings.TrimSpace(s)
	if t, err := Parse(s); err == nil {
		return JoinToken{Token: t}, nil
	}
	rest, ok := strings.CutPrefix(s, joinPrefix)
	if !ok {
		return JoinToken{}, fmt.Errorf("join token must start with %q (it is written to <server data dir>/token)", joinPrefix)
	}
	hash, cred, ok := strings.Cut(rest, "::")
	if !ok {
		return JoinToken{}, fmt.Errorf("join token has no '::' between the CA hash and the credentials")
	}
	if b, err := hex.DecodeString(hash); err != nil || len(b) != sha256.Size {
		return JoinToken{}, fmt.Errorf("join token's CA hash must be 64 hex digits (SHA-256)")
	}
	t, err := Parse(cred)
	if err != nil {
		return JoinToken{}, err
	}
	return JoinToken{CAHash: strings.ToLower(hash), Token: t}, nil
}

// CAHash is the pin of a CA bundle: the hex SHA-256 of its bytes as served.
func CAHash(caPEM []byte) string {
	sum := sha256.Sum256(caPEM)
	return hex.EncodeToString(sum[:])
}

// redact keeps a malformed token's shape in error messages without its secret part.
func redact(s string) string {
	if id, _, ok := strings.Cut(s, "."); ok {
		return id + ".<redacted>"
	}
	if len(s) > 6 {
		return s[:6] + "<redacted>"
	}
	return s
}
