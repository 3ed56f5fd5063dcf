package kubectl

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestEtcdSnapshot saves a snapshot of a running server's embedded etcd, changes the
// cluster, restores the snapshot into the stopped server and starts it again: what the
// snapshot held is back, what came after is not, and clients carry on.
func TestEtcdSnapshot(t *testing.T) {
	dir := t.TempDir()
	s := framework.NewServer(t, dir)
	s.Start()
	kc := framework.Kubectl(t, 33)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(wantErr bool, args ...string) string {
		t.Helper()
		out, err := s.Run(ctx, kc, args...)
		if (err != nil) != wantErr {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return out
	}
	skiff := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, framework.Binary(t), append(args, "--data-dir", dir,
			"--etcd-client-port", strconv.Itoa(s.EtcdPort))...).CombinedOutput()
		if err != nil {
			t.Fatalf("skiff %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run(false, "create", "configmap", "before", "--from-literal=k=v")
	out := skiff("etcd-snapshot", "save")
	path := regexp.MustCompile(`Snapshot (\S+) saved`).FindStringSubmatch(out)
	if path == nil {
		t.Fatalf("save said:\n%s", out)
	}
	if ls := skiff("etcd-snapshot", "ls"); !strings.Contains(ls, path[1]) {
		t.Errorf("ls:\n%s", ls)
	}
	run(false, "create", "configmap", "after", "--from-literal=k=v")
	run(false, "delete", "configmap", "before")

	// A running server's data is not replaced.
	if out, err := exec.CommandContext(ctx, framework.Binary(t), "etcd-snapshot", "restore", path[1], "--data-dir", dir,
		"--etcd-client-port", strconv.Itoa(s.EtcdPort)).CombinedOutput(); err == nil || !strings.Contains(string(out), "stop skiff server before restoring") {
		t.Errorf("restore into a running server: %v\n%s", err, out)
	}
	s.Stop()
	if out := skiff("etcd-snapshot", "restore", path[1]); !strings.Contains(out, "the previous data is in") {
		t.Errorf("restore said:\n%s", out)
	}
	s.Start()
	run(false, "get", "configmap", "before")
	if out := run(true, "get", "configmap", "after"); !strings.Contains(out, "NotFound") {
		t.Errorf("a configmap made after the snapshot survived the restore:\n%s", out)
	}
	// The restored cluster takes writes, at resourceVersions past everything before.
	run(false, "create", "configmap", "later", "--from-literal=k=v")
	rv := run(false, "get", "configmap", "later", "-o", "jsonpath={.metadata.resourceVersion}")
	if n, err := strconv.ParseInt(rv, 10, 64); err != nil || n < 1_000_000_000 {
		t.Errorf("resourceVersion after the restore %q, want past the revision bump", rv)
	}
}

// TestScheduledSnapshots runs a server whose embedded etcd is snapshotted every second and
// keeps two: the schedule saves, prunes the oldest of its own beyond two and leaves a
// snapshot taken by hand, and a scheduled snapshot restores like any other.
func TestScheduledSnapshots(t *testing.T) {
	dir := t.TempDir()
	s := framework.NewServer(t, dir, "--etcd-snapshot-schedule-cron", "* * * * * *", "--etcd-snapshot-retention", "2", "--node-name", "snapper")
	s.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := s.Run(ctx, framework.Kubectl(t, 33), "create", "configmap", "kept", "--from-literal=k=v"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	snapshots := filepath.Join(dir, "db", "snapshots")
	if err := os.MkdirAll(snapshots, 0o700); err != nil {
		t.Fatal(err)
	}
	byHand := filepath.Join(snapshots, "on-demand-snapper-1")
	if err := os.WriteFile(byHand, []byte("taken by hand"), 0o600); err != nil {
		t.Fatal(err)
	}
	scheduled := func() []string {
		m, _ := filepath.Glob(filepath.Join(snapshots, "etcd-snapshot-snapper-*"))
		return m
	}
	framework.Eventually(t, 30*time.Second, "three snapshots pruned to two", func() (bool, string) {
		return strings.Count(s.Log(), "etcd snapshot pruned") >= 2 && len(scheduled()) == 2, fmt.Sprint(scheduled())
	})
	if _, err := os.Stat(byHand); err != nil {
		t.Errorf("the schedule pruned a snapshot taken by hand: %v", err)
	}
	newest := scheduled()[1]
	s.Stop()
	out, err := exec.CommandContext(ctx, framework.Binary(t), "etcd-snapshot", "restore", newest, "--data-dir", dir, "--etcd-name", "snapper",
		"--etcd-client-port", strconv.Itoa(s.EtcdPort)).CombinedOutput()
	if err != nil {
		t.Fatalf("restore %s: %v\n%s", newest, err, out)
	}
	s.Start()
	if out, err := s.Run(ctx, framework.Kubectl(t, 33), "get", "configmap", "kept"); err != nil {
		t.Errorf("after restoring a scheduled snapshot: %v\n%s", err, out)
	}
}

// TestRestoreOnNewMachine restores a snapshot onto a machine that has nothing of the cluster
// but the snapshot and its join token, as after losing every server: the snapshot carries the
// cluster's CAs, keys and encryption configuration sealed with the token, so the restored
// server keeps the CAs (the old admin kubeconfig works against it) and reads the Secrets that
// were encrypted at rest. Without the token, or with another secret, it refuses and says why.
func TestRestoreOnNewMachine(t *testing.T) {
	dirA := t.TempDir()
	a := framework.NewServer(t, dirA, "--secrets-encryption")
	a.Start()
	kc := framework.Kubectl(t, 33)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kubectl := func(s *framework.Server, args ...string) string {
		t.Helper()
		out, err := s.Run(ctx, kc, args...)
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return out
	}
	kubectl(a, "create", "secret", "generic", "kept", "--from-literal=k=restored-secret")
	kubectl(a, "create", "configmap", "kept", "--from-literal=k=v")
	framework.Eventually(t, time.Minute, "the shared files kept in etcd", func() (bool, string) {
		return strings.Contains(a.Log(), "the shared files are kept in etcd"), ""
	})
	out, err := exec.CommandContext(ctx, framework.Binary(t), "etcd-snapshot", "save", "--data-dir", dirA,
		"--etcd-client-port", strconv.Itoa(a.EtcdPort)).CombinedOutput()
	snap := regexp.MustCompile(`Snapshot (\S+) saved`).FindStringSubmatch(string(out))
	if err != nil || snap == nil {
		t.Fatalf("etcd-snapshot save: %v\n%s", err, out)
	}
	tokenBytes, err := os.ReadFile(filepath.Join(dirA, "token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenBytes))
	a.Stop()

	// The new machine: an empty data directory, the snapshot, the token.
	dirB := t.TempDir()
	b := framework.NewServer(t, dirB, "--secrets-encryption")
	reset := func(extra ...string) (string, error) {
		args := append(append(b.Args(), "--cluster-reset", "--cluster-reset-restore-path", snap[1]), extra...)
		out, err := exec.CommandContext(ctx, framework.Binary(t), args...).CombinedOutput()
		return string(out), err
	}
	if out, err := reset(); err == nil || !strings.Contains(out, "needs --token") {
		t.Errorf("restore onto a new machine without --token: %v\n%s", err, out)
	}
	i := strings.LastIndex(token, ".")
	wrong := token[:i+1] + strings.Repeat("x", len(token)-i-1)
	if out, err := reset("--token", wrong); err == nil || !strings.Contains(out, "not the token they were sealed with") {
		t.Errorf("restore with another secret: %v\n%s", err, out)
	}
	if out, err := reset("--token", token); err != nil || !strings.Contains(out, "CAs, keys and encryption configuration restored") {
		t.Fatalf("restore with the cluster's token: %v\n%s", err, out)
	}
	for _, f := range []string{"pki/ca.crt", "pki/ca.key", "pki/etcd/ca.crt", "pki/sa.key", "cred/encryption-config.json", "token"} {
		ab, _ := os.ReadFile(filepath.Join(dirA, f))
		bb, err := os.ReadFile(filepath.Join(dirB, f))
		if err != nil || string(ab) != string(bb) {
			t.Errorf("%s on the new machine: %v, same as the old one's: %t", f, err, string(ab) == string(bb))
		}
	}
	b.Start()
	if got := kubectl(b, "get", "secret", "kept", "-o", "jsonpath={.data.k}"); got != "cmVzdG9yZWQtc2VjcmV0" { // base64 of restored-secret
		t.Errorf("the Secret encrypted at rest, after the restore: %q", got)
	}
	// The old cluster's admin kubeconfig is trusted by the restored server (same CA).
	if out, err := exec.CommandContext(ctx, kc, "--kubeconfig", a.Kubeconfig, "--server", fmt.Sprintf("https://127.0.0.1:%d", b.Port),
		"get", "configmap", "kept", "-o", "name").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "configmap/kept" {
		t.Errorf("the old admin kubeconfig against the restored server: %v\n%s", err, out)
	}
}
