package join

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/bootstraptoken"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, cn string) testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour * 365), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf pair signed by the CA, valid for d.
func (ca testCA) issue(t *testing.T, cn string, d time.Duration, ext x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(d), ExtKeyUsage: []x509.ExtKeyUsage{ext},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// server serves caPEM at /cacerts with a serving certificate from signer.
func server(t *testing.T, caPEM []byte, signer testCA) string {
	t.Helper()
	certPEM, keyPEM := signer.issue(t, "apiserver", time.Hour, x509.ExtKeyUsageServerAuth)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cacerts" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(caPEM)
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s.URL
}

func TestFetchCA(t *testing.T) {
	ca, other := newCA(t, "cluster"), newCA(t, "impostor")
	ctx := context.Background()

	got, err := FetchCA(ctx, server(t, ca.pem, ca), bootstraptoken.CAHash(ca.pem))
	if err != nil || string(got) != string(ca.pem) {
		t.Fatalf("genuine server: %v", err)
	}
	if _, err := FetchCA(ctx, server(t, other.pem, other), bootstraptoken.CAHash(ca.pem)); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("a server with another CA was accepted: %v", err)
	}
	// Serves the genuine CA bundle (so the pin matches) but cannot prove it holds a
	// certificate from it: a man in the middle replaying /cacerts.
	if _, err := FetchCA(ctx, server(t, ca.pem, other), bootstraptoken.CAHash(ca.pem)); err == nil || !strings.Contains(err.Error(), "not from the pinned CA") {
		t.Errorf("a replaying server was accepted: %v", err)
	}
}

func TestUsable(t *testing.T) {
	ca, other := newCA(t, "cluster"), newCA(t, "other")
	dir := t.TempDir()
	write := func(name string, certPEM, keyPEM []byte) (string, string) {
		c, k := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		if err := os.WriteFile(c, certPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(k, keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	isNode := func(c *x509.Certificate) bool { return c.Subject.CommonName == "system:node:n1" }
	gc, gk := ca.issue(t, "system:node:n1", 48*time.Hour, x509.ExtKeyUsageClientAuth)
	good, goodKey := write("good", gc, gk)
	// Issued an hour ago for 70 minutes in all: 10 left, within its last quarter (certrenew).
	sc, sk := ca.issue(t, "system:node:n1", 10*time.Minute, x509.ExtKeyUsageClientAuth)
	soon, soonKey := write("soon", sc, sk)
	oc, ok := other.issue(t, "system:node:n1", 48*time.Hour, x509.ExtKeyUsageClientAuth)
	foreign, foreignKey := write("foreign", oc, ok)
	_, mismatchedKey := write("mismatch", gc, sk)
	for _, tc := range []struct {
		name      string
		cert, key string
		want      bool
	}{
		{"valid pair from the CA", good, goodKey, true},
		{"due for renewal", soon, soonKey, false},
		{"from another CA", foreign, foreignKey, false},
		{"key does not match", good, mismatchedKey, false},
		{"missing", filepath.Join(dir, "none.crt"), filepath.Join(dir, "none.key"), false},
	} {
		if got := usable(tc.cert, tc.key, ca.pem, isNode); got != tc.want {
			t.Errorf("%s: usable = %v, want %v", tc.name, got, tc.want)
		}
	}
	if usable(good, goodKey, ca.pem, func(c *x509.Certificate) bool { return c.Subject.CommonName == "system:node:n2" }) {
		t.Error("a certificate for another node was reused")
	}
}

func TestCSRName(t *testing.T) {
	k1, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	a := csrName(k1.Public(), certificatesv1.KubeAPIServerClientKubeletSignerName)
	if a != csrName(k1.Public(), certificatesv1.KubeAPIServerClientKubeletSignerName) {
		t.Error("name not deterministic")
	}
	if a == csrName(k2.Public(), certificatesv1.KubeAPIServerClientKubeletSignerName) || a == csrName(k1.Public(), certificatesv1.KubeletServingSignerName) {
		t.Error("different keys or signers share a name")
	}
	if !regexp.MustCompile(`^node-csr-[0-9a-f]{32}$`).MatchString(a) { // a valid DNS-subdomain name
		t.Errorf("name %q", a)
	}
}

func TestEnsureRejectsBadToken(t *testing.T) {
	_, err := Ensure(context.Background(), Options{Server: "https://127.0.0.1:1", Token: "server:password", Dir: t.TempDir(), NodeName: "n"}, nil)
	if err == nil || !strings.Contains(err.Error(), "K10") {
		t.Errorf("a malformed token was accepted: %v", err)
	}
}

func TestFetchCAWithoutPin(t *testing.T) {
	ca := newCA(t, "cluster")
	got, err := FetchCA(context.Background(), server(t, ca.pem, ca), "")
	if err != nil || string(got) != string(ca.pem) {
		t.Fatalf("trust on first use: %v", err)
	}
	// Even unpinned, the server must hold a certificate from the CA it serves.
	if _, err := FetchCA(context.Background(), server(t, ca.pem, newCA(t, "other")), ""); err == nil {
		t.Error("a server whose certificate is not from its own /cacerts was accepted")
	}
}

// TestRetryTransient: a server not yet listening, not yet knowing the token (401) or not yet
// having loaded its RBAC policy (403) is retried until it answers; a CA that does not match
// the pin, or an invalid request, fails at once.
func TestRetryTransient(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	unauthorized := apierrors.NewUnauthorized("token not yet known")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "certificatesigningrequests"}, "x", errors.New("no"))
	calls := 0
	err := retryTransient(context.Background(), time.Minute, log, "test", func() error {
		calls++
		switch calls {
		case 1:
			return unauthorized
		case 2:
			return forbidden
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("transient: err %v after %d calls", err, calls)
	}
	for _, perm := range []error{
		permanent{errors.New("the server's CA does not match the join token's pin")},
		fmt.Errorf("wrapped: %w", permanent{errors.New("no certificate")}),
		apierrors.NewInvalid(schema.GroupKind{Kind: "CertificateSigningRequest"}, "x", nil),
	} {
		calls = 0
		if err := retryTransient(context.Background(), time.Minute, log, "test", func() error { calls++; return perm }); err != perm || calls != 1 {
			t.Errorf("%v: err %v after %d calls, want it at once", perm, err, calls)
		}
	}
	// The deadline bounds the retries: one try, a 1 s wait, a second try; a 2 s wait would pass it.
	calls = 0
	start := time.Now()
	if err := retryTransient(context.Background(), 1500*time.Millisecond, log, "test", func() error { calls++; return unauthorized }); err != unauthorized || calls != 2 || time.Since(start) > 5*time.Second {
		t.Fatalf("deadline: err %v, %d calls", err, calls)
	}
}
