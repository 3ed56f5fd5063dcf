package cgroups

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPrivilegedKillAll puts a process in a pod cgroup under a test root in every hierarchy,
// and checks KillAll kills it and leaves no cgroup behind.
func TestPrivilegedKillAll(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root, BPF and network namespaces: make unit (-short) skips it, make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (every machine here has it)")
	}
	root := fmt.Sprintf("/skiff-test-%d", os.Getpid())
	mounts := Mounts()
	sleeper := exec.Command("sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = KillAll(mounts, root) })
	placed := 0
	for _, m := range mounts {
		dir := filepath.Join(m, Parent(root, "u1"), "c1")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			continue // a hierarchy that refuses new groups (none here) is not this test's concern
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(sleeper.Process.Pid)), 0o644); err == nil {
			placed++
		}
	}
	if placed == 0 {
		t.Fatal("could not place the process in any hierarchy")
	}
	done := make(chan error, 1)
	go func() { done <- sleeper.Wait() }()
	if err := KillAll(mounts, root); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Error("the process exited cleanly instead of being killed")
	}
	for _, m := range mounts {
		if _, err := os.Stat(filepath.Join(m, root)); err == nil {
			t.Errorf("%s still has %s", m, root)
		}
	}
}

// TestPrivilegedEnforceLimits limits a test root on the machine's real hierarchies (v1, v2 or
// both) and checks the interface files say so, and that a shell in a pod cgroup under it
// cannot fork past the pids limit: the limit binds the pods, not only the files.
func TestPrivilegedEnforceLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root and cgroups: make unit (-short) skips it, make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (every machine here has it)")
	}
	root := fmt.Sprintf("/skiff-test-limits-%d", os.Getpid())
	mounts := Mounts()
	t.Cleanup(func() { _ = KillAll(mounts, root) })
	if err := EnforceLimits(mounts, root, Limits{MemoryBytes: 64 << 20, MilliCPU: 500, PIDs: 4}); err != nil {
		t.Fatal(err)
	}
	read := func(files ...string) string {
		for _, m := range mounts {
			for _, f := range files {
				if b, err := os.ReadFile(filepath.Join(m, root, f)); err == nil {
					return strings.TrimSpace(string(b))
				}
			}
		}
		return ""
	}
	if got := read("memory.max", "memory.limit_in_bytes"); got != strconv.Itoa(64<<20) {
		t.Errorf("memory limit %q, want %d", got, 64<<20)
	}
	if got := read("pids.max"); got != "4" {
		t.Errorf("pids.max %q, want 4", got)
	}
	if got := read("cpu.shares", "cpu.weight"); got != "512" && got != "20" {
		t.Errorf("cpu.shares or cpu.weight %q, want 512 or 20 (500m)", got)
	}

	sh := exec.Command("sh", "-c", "read go; for i in 1 2 3 4 5 6 7 8; do sleep 1 & done; wait")
	in, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sh.Stdout, sh.Stderr = &out, &out
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sh.Process.Kill() })
	for _, m := range mounts {
		if _, err := os.Stat(filepath.Join(m, root, "pids.max")); err != nil {
			continue
		}
		dir := filepath.Join(m, Parent(root, "u1"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(sh.Process.Pid)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := in.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	_ = sh.Wait()
	if !strings.Contains(strings.ToLower(out.String()), "fork") {
		t.Errorf("eight background sleeps under pids.max 4 all started: %q", out.String())
	}

	// Lifted again: no memory or pids cap.
	if err := EnforceLimits(mounts, root, Limits{}); err != nil {
		t.Fatal(err)
	}
	if got := read("pids.max"); got != "max" {
		t.Errorf("pids.max %q after lifting, want max", got)
	}
	if got := read("memory.max", "memory.limit_in_bytes"); got != "max" && got != "9223372036854771712" {
		t.Errorf("memory limit %q after lifting, want none", got)
	}
}
