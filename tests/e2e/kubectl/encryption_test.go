package kubectl

import (
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestSecretsEncryption runs the server with --secrets-encryption: Secrets are stored
// aescbc-encrypted (etcdctl sees k8s:enc:aescbc:v1:<key>:), read back in clear through the
// API, and `skiff secrets-encrypt rotate-keys` moves them to a new key while it serves.
func TestSecretsEncryption(t *testing.T) {
	s := framework.StartServer(t, "--secrets-encryption")
	kc := framework.Kubectl(t, 33)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := s.Run(ctx, kc, "create", "secret", "generic", "db", "--from-literal=password=hunter2"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	stored := func() string {
		return s.Etcdctl(t, "get", "/registry/secrets/default/db", "--print-value-only")
	}
	keyOf := func(v string) string {
		rest, ok := strings.CutPrefix(v, "k8s:enc:aescbc:v1:")
		if !ok {
			t.Fatalf("the Secret is not stored encrypted: %q", v[:min(len(v), 40)])
		}
		name, _, _ := strings.Cut(rest, ":")
		return name
	}
	v := stored()
	if strings.Contains(v, "hunter2") {
		t.Fatal("the password is in etcd in clear")
	}
	first := keyOf(v)
	read := func() string {
		out, err := s.Run(ctx, kc, "get", "secret", "db", "-o", "jsonpath={.data.password}")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		b, _ := base64.StdEncoding.DecodeString(out)
		return string(b)
	}
	if got := read(); got != "hunter2" {
		t.Fatalf("read back %q", got)
	}

	rotate := exec.CommandContext(ctx, framework.Binary(t), "secrets-encrypt", "rotate-keys", "--data-dir", s.Dir,
		"--etcd-endpoint", "https://127.0.0.1:"+strconv.Itoa(s.EtcdPort))
	out, err := rotate.CombinedOutput()
	if err != nil {
		t.Fatalf("rotate-keys: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Secrets rewritten with") || !strings.Contains(string(out), "old keys removed") {
		t.Errorf("rotate-keys said:\n%s", out)
	}
	second := keyOf(stored())
	if second == first {
		t.Fatalf("still stored with %s after rotate-keys:\n%s", first, out)
	}
	if got := read(); got != "hunter2" {
		t.Fatalf("read back after the rotation %q", got)
	}
	status, err := exec.CommandContext(ctx, framework.Binary(t), "secrets-encrypt", "status", "--data-dir", s.Dir,
		"--etcd-endpoint", "https://127.0.0.1:"+strconv.Itoa(s.EtcdPort)).CombinedOutput()
	if err != nil || !strings.Contains(string(status), "Active key: "+second) || strings.Contains(string(status), "Older keys") ||
		strings.Contains(string(status), "not encrypted") {
		t.Errorf("status: %v\n%s", err, status)
	}
	// The old key is gone from the configuration, and the server still reads everything.
	framework.Eventually(t, 30*time.Second, "the server reloaded the pruned configuration", func() (bool, string) {
		out, err := s.Run(ctx, kc, "create", "secret", "generic", "later-"+strconv.FormatInt(time.Now().UnixNano(), 36), "--from-literal=k=v")
		return err == nil, out
	})
	if got := read(); got != "hunter2" {
		t.Fatalf("read back after the prune %q", got)
	}
}

// TestStorageVersionMigration turns encryption on for a server that already holds a Secret
// in clear, then migrates Secrets with a StorageVersionMigration, as upstream's docs say to:
// the migration succeeds and etcd then holds the Secret encrypted.
func TestStorageVersionMigration(t *testing.T) {
	s := framework.StartServer(t)
	kc := framework.Kubectl(t, 33)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := runner(ctx, t, s, kc)
	run(false, "create", "secret", "generic", "old", "--from-literal=password=hunter2")
	stored := func() string { return s.Etcdctl(t, "get", "/registry/secrets/default/old", "--print-value-only") }
	if v := stored(); !strings.Contains(v, "hunter2") {
		t.Fatalf("without encryption the Secret should be in clear: %q", v[:min(len(v), 40)])
	}
	s.Stop()
	s.AddArgs("--secrets-encryption")
	s.Start()
	if v := stored(); !strings.Contains(v, "hunter2") {
		t.Fatal("turning encryption on rewrote the Secret by itself")
	}
	f := t.TempDir() + "/svm.yaml"
	if err := os.WriteFile(f, []byte("apiVersion: storagemigration.k8s.io/v1\nkind: StorageVersionMigration\nmetadata: {name: secrets}\nspec:\n  resource: {resource: secrets}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(false, "create", "-f", f)
	framework.Eventually(t, 60*time.Second, "the migration Succeeded", func() (bool, string) {
		out := run(false, "get", "storageversionmigration", "secrets", "-o", `jsonpath={.status.conditions[?(@.type=="Succeeded")].status}`)
		return out == "True", out
	})
	if v := stored(); !strings.HasPrefix(v, "k8s:enc:aescbc:v1:") || strings.Contains(v, "hunter2") {
		t.Errorf("after the migration the Secret is stored as %q", v[:min(len(v), 40)])
	}
	containsAll(t, run(false, "get", "storageversionmigrations"), "secrets", "RESOURCE")
}
