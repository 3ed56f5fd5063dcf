package certfile_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/controlplane/pki"
	"github.com/skiff-sh/skiff/internal/certfile"
)

func testCA(t *testing.T) *pki.Authority {
	t.Helper()
	l, err := pki.Ensure(pki.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.LoadCA(l.CA())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestWriteWholeReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "f")
	for _, content := range []string{"first", "second, longer"} {
		if err := certfile.WriteWhole(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil || string(b) != content {
			t.Fatalf("read %q, %v; want %q", b, err, content)
		}
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func issue(t *testing.T, ca *pki.Authority, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	c, k, err := ca.Issue(x509.Certificate{Subject: pkix.Name{CommonName: cn}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

func TestPairFollowsFiles(t *testing.T) {
	ca := testCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.crt"), filepath.Join(dir, "c.key")
	write := func(cn string) {
		c, k := issue(t, ca, cn)
		if err := certfile.WriteWhole(keyFile, k, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := certfile.WriteWhole(certFile, c, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("one")
	p, err := certfile.NewPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	cn := func() string {
		c, err := p.Current()
		if err != nil {
			t.Fatal(err)
		}
		x, _ := x509.ParseCertificate(c.Certificate[0])
		return x.Subject.CommonName
	}
	if got := cn(); got != "one" {
		t.Fatalf("CN %q", got)
	}
	time.Sleep(10 * time.Millisecond) // a new modification time
	write("two")
	if got := cn(); got != "two" {
		t.Fatalf("after the renewal, CN %q, want two", got)
	}
	// Caught between the key's replacement and the certificate's: the pair loaded before stays.
	time.Sleep(10 * time.Millisecond)
	_, k := issue(t, ca, "three")
	if err := certfile.WriteWhole(keyFile, k, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := cn(); got != "two" {
		t.Fatalf("with a key that does not match, CN %q, want two kept", got)
	}
	if _, err := certfile.NewPair(filepath.Join(dir, "missing.crt"), keyFile); err == nil {
		t.Error("NewPair of a missing file: no error")
	}
}
