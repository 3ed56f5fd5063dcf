package pki

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
)

func certsIn(t *testing.T, path string) []*x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := certutil.ParseCertsPEM(b)
	if err != nil {
		t.Fatal(err)
	}
	return certs
}

// verifies says whether the leaf file (with the chain it carries) verifies against roots.
func verifies(t *testing.T, leafFile string, roots ...*x509.Certificate) error {
	t.Helper()
	chain := certsIn(t, leafFile)
	pool, inter := x509.NewCertPool(), x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err
}

// TestRotateCA walks a rotation: during it, what the server issues verifies for peers trusting
// only the old CA and for those trusting only the new one, and the bundles trust both; once it
// is complete, only the new CA is trusted and nothing carries the cross-signed certificate.
func TestRotateCA(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir}
	l := ensure(t, o)
	oldCA := readCert(t, l.CA().Cert)
	oldEtcd := readCert(t, l.EtcdCA().Cert)
	admin := Kubeconfig{Path: filepath.Join(dir, "admin.kubeconfig"), Server: "https://127.0.0.1:6443", User: "admin", Groups: []string{"system:masters"}}
	ca, err := LoadCA(l.CA())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Write(ca, time.Now()); err != nil {
		t.Fatal(err)
	}

	if _, err := RotateCA(l, []string{"ca", "nope"}, time.Now()); err == nil || !strings.Contains(err.Error(), `no CA "nope"`) {
		t.Fatalf("RotateCA with an unknown name: %v, want a refusal naming it", err)
	}
	if got := RotationsUnderway(l); len(got) != 0 {
		t.Fatalf("a refused RotateCA left rotations under way: %v", got)
	}
	wrote, err := RotateCA(l, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(wrote) != 9 {
		t.Errorf("RotateCA wrote %v, want 3 files for each of 3 CAs", wrote)
	}
	if _, err := RotateCA(l, []string{"etcd/ca"}, time.Now()); err == nil || !strings.Contains(err.Error(), "not complete") {
		t.Fatalf("a second RotateCA before completing: %v, want a refusal", err)
	}
	bundle := certsIn(t, l.CA().Cert)
	if len(bundle) != 2 || !bundle[1].Equal(oldCA) || bundle[0].Equal(oldCA) {
		t.Fatalf("ca.crt during the rotation holds %d certificates, want the new CA then the old", len(bundle))
	}
	newCA := bundle[0]
	if !strings.HasPrefix(newCA.Subject.CommonName, oldCA.Subject.CommonName+"@") {
		t.Errorf("new CA named %q, want %q@<time>", newCA.Subject.CommonName, oldCA.Subject.CommonName)
	}
	cross := certsIn(t, l.CA().CrossSigned())[0]
	if cross.CheckSignatureFrom(oldCA) != nil || string(cross.RawSubjectPublicKeyInfo) != string(newCA.RawSubjectPublicKeyInfo) {
		t.Fatal("ca-cross.crt is not the new CA's key signed by the old CA")
	}

	// The next start issues every leaf again from the new CAs, each carrying the cross-signed one.
	issued := map[string]string{}
	o.Issued = func(cert, reason string) { issued[filepath.Base(cert)] = reason }
	ensure(t, o)
	if len(issued) != 7 {
		t.Errorf("after RotateCA the next Ensure issued %v, want all 7 leaves", issued)
	}
	if r := issued["apiserver.crt"]; r != "not signed by the current CA" {
		t.Errorf("apiserver.crt issued again because %q", r)
	}
	for _, leaf := range []string{l.APIServer().Cert, l.APIServerKubeletClient().Cert} {
		if err := verifies(t, leaf, oldCA); err != nil {
			t.Errorf("%s does not verify for a peer trusting only the old CA: %v", leaf, err)
		}
		if err := verifies(t, leaf, newCA); err != nil {
			t.Errorf("%s does not verify for a peer trusting only the new CA: %v", leaf, err)
		}
	}
	if err := verifies(t, l.EtcdPeer().Cert, oldEtcd); err != nil {
		t.Errorf("the etcd peer certificate does not verify for a member trusting only the old etcd CA: %v", err)
	}
	// Kubeconfigs take the bundle and a certificate from the new CA.
	ca, err = LoadCA(l.CA())
	if err != nil {
		t.Fatal(err)
	}
	if why, err := admin.Write(ca, time.Now()); err != nil || why == "" {
		t.Fatalf("admin kubeconfig after RotateCA written because %q (%v)", why, err)
	}
	cfg, err := clientcmd.LoadFromFile(admin.Path)
	if err != nil {
		t.Fatal(err)
	}
	if data := cfg.Clusters["skiff"].CertificateAuthorityData; string(data) != string(ca.CertPEM()) {
		t.Error("the admin kubeconfig does not carry the CA bundle")
	}
	issued = map[string]string{}
	ensure(t, o)
	if len(issued) != 0 {
		t.Errorf("a second Ensure during the rotation issued %v again", issued)
	}

	// Complete: the bundles hold the new CA alone and the leaves drop the cross-signed one.
	changed, err := CompleteCARotation(l)
	if err != nil {
		t.Fatal(err)
	}
	if len(changed) != 6 {
		t.Errorf("CompleteCARotation changed %v, want each CA file and its cross-signed file", changed)
	}
	if got := certsIn(t, l.CA().Cert); len(got) != 1 || !got[0].Equal(newCA) {
		t.Fatal("after completing, ca.crt is not the new CA alone")
	}
	ensure(t, o)
	if r := issued["apiserver.crt"]; r != "carries the cross-signed CA of a finished rotation" || len(issued) != 7 {
		t.Errorf("after completing, Ensure issued %v", issued)
	}
	if err := verifies(t, l.APIServer().Cert, oldCA); err == nil {
		t.Error("after completing, the API server's certificate still verifies against the old CA")
	}
	if err := verifies(t, l.APIServer().Cert, newCA); err != nil {
		t.Error(err)
	}
	ca, err = LoadCA(l.CA())
	if err != nil {
		t.Fatal(err)
	}
	if why, err := admin.Write(ca, time.Now()); err != nil || why == "" {
		t.Fatalf("admin kubeconfig after completing not written again (%q, %v)", why, err)
	}
	if changed, err := CompleteCARotation(l); err != nil || len(changed) != 0 {
		t.Errorf("CompleteCARotation with nothing under way: %v, %v", changed, err)
	}
	// And the CAs rotate again.
	if _, err := RotateCA(l, []string{"ca"}, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := certsIn(t, l.CA().Cert)[0].Subject.CommonName; strings.Count(got, "@") != 1 {
		t.Errorf("a CA rotated twice is named %q, want one @<time>", got)
	}
}

func caFilesOf(t *testing.T, p Pair) CAFiles {
	t.Helper()
	var f CAFiles
	var err error
	if f.Cert, err = os.ReadFile(p.Cert); err != nil {
		t.Fatal(err)
	}
	if f.Key, err = os.ReadFile(p.Key); err != nil {
		t.Fatal(err)
	}
	f.Cross, _ = os.ReadFile(p.CrossSigned())
	return f
}

// TestTornCAPairRefused: a CA certificate file and key that do not belong together (a
// rotation interrupted between its two writes) are refused by name, not used to issue.
func TestTornCAPairRefused(t *testing.T) {
	l := ensure(t, Options{Dir: t.TempDir()})
	oldKey, err := os.ReadFile(l.CA().Key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RotateCA(l, []string{"ca"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.CA().Key, oldKey, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(l.CA()); err == nil || !strings.Contains(err.Error(), "is not the key of the first certificate") {
		t.Fatalf("LoadCA of a torn pair: %v, want a refusal", err)
	}
	if _, err := Ensure(Options{Dir: l.Dir}); err == nil {
		t.Fatal("Ensure issued certificates from a torn CA pair")
	}
}

// TestSucceeds: a server takes another's CA files only when they are the next step of a
// rotation of its own CA.
func TestSucceeds(t *testing.T) {
	l := ensure(t, Options{Dir: t.TempDir()})
	before := caFilesOf(t, l.CA())
	if _, err := RotateCA(l, []string{"ca"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	during := caFilesOf(t, l.CA())
	if _, err := CompleteCARotation(l); err != nil {
		t.Fatal(err)
	}
	after := caFilesOf(t, l.CA())
	if _, err := RotateCA(l, []string{"ca"}, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	again := caFilesOf(t, l.CA())
	unrelated := caFilesOf(t, ensure(t, Options{Dir: t.TempDir()}).CA())
	// A rotation started elsewhere from an unrelated CA, carrying a cross certificate that
	// the unrelated CA signed.
	forged := during
	forged.Cross = caFilesOf(t, func() Pair {
		o := ensure(t, Options{Dir: t.TempDir()})
		if _, err := RotateCA(o, []string{"ca"}, time.Now()); err != nil {
			t.Fatal(err)
		}
		return o.CA()
	}()).Cross
	wrongKey := during
	wrongKey.Key = unrelated.Key

	for _, c := range []struct {
		name      string
		next, cur CAFiles
		want      bool
	}{
		{"start", during, before, true},
		{"completion", after, during, true},
		{"a second rotation's start", again, after, true},
		{"the same files", during, during, false},
		{"a step back: start undone", before, during, false},
		{"a step back: completion undone", during, after, false},
		{"two steps at once", after, before, false},
		{"an unrelated CA", unrelated, before, false},
		{"a cross certificate its CA did not sign", forged, before, false},
		{"a key that is not the new CA's", wrongKey, before, false},
		{"a second rotation onto the first's start", again, during, false},
	} {
		if got := Succeeds(c.next, c.cur); got != c.want {
			t.Errorf("%s: Succeeds = %v, want %v", c.name, got, c.want)
		}
	}
}
