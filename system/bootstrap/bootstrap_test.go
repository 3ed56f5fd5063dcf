package bootstrap

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/internal/bootstraptoken"
	"github.com/skiff-sh/skiff/internal/layout"
)

func TestEnsureJoinToken(t *testing.T) {
	dir := t.TempDir()
	caFile, tokenFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
	if err := os.WriteFile(caFile, []byte("ca one"), 0o644); err != nil {
		t.Fatal(err)
	}
	first, err := EnsureJoinToken(tokenFile, caFile, "")
	if err != nil {
		t.Fatal(err)
	}
	if first.CAHash != bootstraptoken.CAHash([]byte("ca one")) {
		t.Errorf("hash %s", first.CAHash)
	}
	if st, _ := os.Stat(tokenFile); st == nil || st.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v", st)
	}
	again, err := EnsureJoinToken(tokenFile, caFile, "")
	if err != nil || again != first {
		t.Fatalf("second call changed the token: %v, %v", again, err)
	}
	if err := os.WriteFile(caFile, []byte("ca two"), 0o644); err != nil {
		t.Fatal(err)
	}
	rotated, err := EnsureJoinToken(tokenFile, caFile, "")
	if err != nil || rotated.Token != first.Token || rotated.CAHash != bootstraptoken.CAHash([]byte("ca two")) {
		t.Fatalf("after a CA change: %v, %v", rotated, err)
	}
	preset, err := EnsureJoinToken(tokenFile, caFile, "abcdef.0123456789abcdef")
	if err != nil || preset.Token.String() != "abcdef.0123456789abcdef" || preset.CAHash != rotated.CAHash {
		t.Fatalf("preset token: %v, %v", preset, err)
	}
	// A full token pinning the CA bundle before a rotation: accepted by the data directory
	// that holds the token already, refused by any other.
	pinnedEarlier := bootstraptoken.JoinToken{CAHash: bootstraptoken.CAHash([]byte("ca one")), Token: preset.Token}.String()
	if j, err := EnsureJoinToken(tokenFile, caFile, pinnedEarlier); err != nil || j.CAHash != rotated.CAHash {
		t.Errorf("a full token of an earlier CA bundle on its own data directory: %v, %v", j, err)
	}
	if _, err := EnsureJoinToken(filepath.Join(dir, "other-token"), caFile, pinnedEarlier); err == nil || !strings.Contains(err.Error(), "pins the CA") {
		t.Errorf("a full token pinning another CA on a new data directory: %v, want a refusal", err)
	}
	if _, err := EnsureJoinToken(tokenFile, caFile, "short"); err == nil {
		t.Error("a malformed --token was accepted")
	}
	if err := os.WriteFile(tokenFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureJoinToken(tokenFile, caFile, ""); err == nil {
		t.Error("a malformed token file was accepted")
	}
}

// TestPrepareServer: every file the server's parts read is there after the step, a second
// run keeps every file as it was, and only an embedded etcd gets a data directory.
func TestPrepareServer(t *testing.T) {
	dirs := layout.Server{Dir: t.TempDir()}
	o := Server{Dirs: dirs, APIServerURL: "https://127.0.0.1:6443", APIServerIPs: []net.IP{net.ParseIP("192.0.2.1")},
		ServiceIP: net.ParseIP("10.96.0.1"), NodeName: "n1", NodeIPs: []net.IP{net.ParseIP("192.0.2.1")},
		SecretsEncryption: true, EmbeddedEtcd: true}
	files, err := PrepareServer(o, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if files.Join.Token.ID == "" || files.EncryptionConfig != dirs.EncryptionConfig() || files.PKI.Dir != dirs.PKI().Dir {
		t.Errorf("files %+v", files)
	}
	want := []string{dirs.Token(), dirs.EncryptionConfig(), files.PKI.CA().Cert, files.PKI.AgentServing().Cert}
	for _, name := range []string{"admin", "scheduler", "controller-manager", "node"} {
		want = append(want, dirs.Kubeconfig(name))
	}
	before := map[string][]byte{}
	for _, f := range want {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("missing after bootstrap: %v", err)
		}
		before[f] = b
	}
	if st, err := os.Stat(dirs.Etcd()); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("etcd data directory: %v %v", st, err)
	}
	kc, err := clientcmd.LoadFromFile(dirs.Kubeconfig("node"))
	if err != nil {
		t.Fatal(err)
	}
	// The node's kubeconfig names its client pair's files (client-go reloads them when the
	// running server renews them); the admin's embeds its own.
	user := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]
	if user.ClientCertificate != files.PKI.KubeconfigClient("node").Cert || user.ClientKey != files.PKI.KubeconfigClient("node").Key {
		t.Fatalf("node kubeconfig's client pair: %q %q, want %v", user.ClientCertificate, user.ClientKey, files.PKI.KubeconfigClient("node"))
	}
	certPEM, err := os.ReadFile(user.ClientCertificate)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatalf("%s: no certificate", user.ClientCertificate)
	}
	admin, err := clientcmd.LoadFromFile(dirs.Kubeconfig("admin"))
	if err != nil {
		t.Fatal(err)
	}
	if a := admin.AuthInfos[admin.Contexts[admin.CurrentContext].AuthInfo]; len(a.ClientCertificateData) == 0 || a.ClientCertificate != "" {
		t.Errorf("admin kubeconfig: want its certificate embedded, got %+v", a)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil || cert.Subject.CommonName != "system:node:n1" || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "system:nodes" {
		t.Errorf("node kubeconfig's user: %v %v", cert.Subject, err)
	}
	again, err := PrepareServer(o, time.Now())
	if err != nil || again.Join != files.Join {
		t.Fatalf("second run: %v %v", again.Join, err)
	}
	for _, f := range []string{dirs.Token(), dirs.EncryptionConfig(), files.PKI.CA().Cert, files.PKI.AgentServing().Cert} {
		if b, _ := os.ReadFile(f); string(b) != string(before[f]) {
			t.Errorf("%s changed on a second run", f)
		}
	}

	external := layout.Server{Dir: t.TempDir()}
	if _, err := PrepareServer(Server{Dirs: external, APIServerURL: o.APIServerURL, ServiceIP: o.ServiceIP}, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{external.Etcd(), external.EncryptionConfig(), external.Kubeconfig("node")} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s made for a server that did not ask for it", f)
		}
	}
}
