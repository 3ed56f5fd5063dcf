package join

import (
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"github.com/skiff-sh/skiff/internal/bootstraptoken"
)

// TestEnsureCAFollowsRotation: an agent's CA bundle is trusted while it matches the token's
// pin, or was first trusted under that pin (ca.pin) and replaced since by TrustWatcher; a
// token with another pin fetches again and is refused by a server of another CA.
func TestEnsureCAFollowsRotation(t *testing.T) {
	old, rotated := newCA(t, "kubernetes"), newCA(t, "kubernetes@1")
	dir := t.TempDir()
	file, pinFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.pin")
	ctx := context.Background()
	// The join: fetched from a server of the old CA, the pin recorded.
	got, err := ensureCA(ctx, server(t, old.pem, old), bootstraptoken.CAHash(old.pem), file, pinFile)
	if err != nil || string(got) != string(old.pem) {
		t.Fatalf("first join: %v", err)
	}
	if b, _ := os.ReadFile(pinFile); strings.TrimSpace(string(b)) != bootstraptoken.CAHash(old.pem) {
		t.Fatalf("ca.pin holds %q, want the pin the bundle was trusted under", b)
	}
	// A rotation replaced the bundle: the same token still trusts it, without asking a server.
	bundle := append(append([]byte{}, rotated.pem...), old.pem...)
	if err := os.WriteFile(file, bundle, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = ensureCA(ctx, "https://127.0.0.1:1", bootstraptoken.CAHash(old.pem), file, pinFile)
	if err != nil || string(got) != string(bundle) {
		t.Fatalf("restart with the joining token after a rotation: %v", err)
	}
	// A token pinning another CA is not satisfied by the file: it fetches, and a server of
	// the rotated bundle does not match that pin.
	other := newCA(t, "other")
	if _, err := ensureCA(ctx, server(t, bundle, rotated), bootstraptoken.CAHash(other.pem), file, pinFile); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("a token of another CA: %v, want the pin refused", err)
	}
}

func TestFromOldCA(t *testing.T) {
	old, rotated := newCA(t, "kubernetes"), newCA(t, "kubernetes@1")
	dir := t.TempDir()
	leaf := func(ca testCA) *x509.Certificate {
		certPEM, _ := ca.issue(t, "system:node:n", time.Hour, x509.ExtKeyUsageClientAuth)
		c, err := certutil.ParseCertsPEM(certPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c[0]
	}
	write := func(name string, pems ...[]byte) string {
		p := filepath.Join(dir, name)
		var b []byte
		for _, p := range pems {
			b = append(b, p...)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	single, rotating := write("single.crt", old.pem), write("rotating.crt", rotated.pem, old.pem)
	for _, c := range []struct {
		name string
		cert *x509.Certificate
		file string
		want bool
	}{
		{"old CA alone", leaf(old), single, false},
		// The signer moved on before TrustWatcher brought the bundle: no reason to renew.
		{"new certificate, bundle not yet fetched", leaf(rotated), single, false},
		{"old certificate during a rotation", leaf(old), rotating, true},
		{"new certificate during a rotation", leaf(rotated), rotating, false},
	} {
		bundle, err := readBundle(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if got := fromOldCA(c.cert, bundle); got != c.want {
			t.Errorf("%s: %v; want %v", c.name, got, c.want)
		}
	}
	if _, err := readBundle(filepath.Join(dir, "missing.crt")); err == nil {
		t.Error("a missing bundle is not an error")
	}
}
