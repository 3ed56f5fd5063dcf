package kubectl

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/controlplane/pki"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestCertificateRenewalAtStart moves a stopped server's certificates a year on: its leaf
// certificates and kubeconfigs are issued again as if 364 days ago, so they expire tomorrow.
// `skiff certificate check` says the next start renews them; the start does, with the CAs
// kept, and kubectl works with the renewed admin kubeconfig.
func TestCertificateRenewalAtStart(t *testing.T) {
	dir := t.TempDir()
	s := framework.NewServer(t, dir)
	s.Start()
	s.Stop()
	skiff := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(framework.Binary(t), append(args, "--data-dir", dir)...).CombinedOutput()
		if err != nil {
			t.Fatalf("skiff %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	l := pki.Layout{Dir: filepath.Join(dir, "pki")}
	caBefore, err := os.ReadFile(l.CA().Cert)
	if err != nil {
		t.Fatal(err)
	}
	skiff("certificate", "rotate")
	yearAgo := time.Now().Add(-364 * 24 * time.Hour)
	if _, err := pki.Ensure(pki.Options{Dir: l.Dir, APIServerIPs: nil, Now: yearAgo}); err != nil {
		t.Fatal(err)
	}
	ca, err := pki.LoadCA(l.CA())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct{ name, user, group string }{{"admin", "kubernetes-admin", "system:masters"}, {"scheduler", "system:kube-scheduler", ""},
		{"controller-manager", "system:kube-controller-manager", ""}} {
		var groups []string
		if k.group != "" {
			groups = []string{k.group}
		}
		kc := pki.Kubeconfig{Path: filepath.Join(dir, k.name+".kubeconfig"), Server: "https://127.0.0.1:1", User: k.user, Groups: groups}
		if k.name != "admin" {
			files := l.KubeconfigClient(k.name)
			kc.Files = &files
		}
		if _, err := kc.Write(ca, yearAgo); err != nil {
			t.Fatal(err)
		}
	}
	check := skiff("certificate", "check")
	for _, name := range []string{"apiserver ", "etcd/peer ", "admin.kubeconfig "} {
		line := lineWith(check, name)
		if !strings.Contains(line, "yes: expires") || !strings.Contains(line, "23h") {
			t.Errorf("certificate check, %s: %q, want it expiring within a day and renewed at the next start\n%s", name, line, check)
		}
	}

	s.Start()
	if log := s.Log(); !strings.Contains(log, `why="expires `) {
		t.Errorf("the start did not say it renewed expiring certificates:\n%s", log)
	}
	check = skiff("certificate", "check")
	if strings.Contains(check, "yes:") || strings.Contains(check, "23h") {
		t.Errorf("after the start, certificates still due:\n%s", check)
	}
	if caAfter, _ := os.ReadFile(l.CA().Cert); string(caAfter) != string(caBefore) {
		t.Error("the CA changed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := s.Run(ctx, framework.Kubectl(t, 33), "get", "namespaces"); err != nil || !strings.Contains(out, "kube-system") {
		t.Errorf("kubectl with the renewed admin kubeconfig: %v\n%s", err, out)
	}
}

func lineWith(text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
