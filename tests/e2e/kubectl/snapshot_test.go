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
