package cgroups

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
