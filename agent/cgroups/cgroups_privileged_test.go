package cgroups

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
		dir := filepath.Join(m, PodParent(root, corev1.PodQOSGuaranteed, "u1"), "c1")
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
	read := func(files ...string) string { return readFirst(mounts, root, files...) }
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
		dir := filepath.Join(m, PodParent(root, corev1.PodQOSGuaranteed, "u1"))
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

// TestPrivilegedApplyPod makes the QoS tiers and a Burstable pod's cgroup on the machine's
// real hierarchies, checks the files, and that the pod's CPU quota binds: a busy loop in it
// is throttled.
func TestPrivilegedApplyPod(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root and cgroups: make unit (-short) skips it, make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (every machine here has it)")
	}
	root := fmt.Sprintf("/skiff-test-pod-%d", os.Getpid())
	mounts := Mounts()
	t.Cleanup(func() { _ = KillAll(mounts, root) })
	if err := EnsureQOS(mounts, root, 768); err != nil {
		t.Fatal(err)
	}
	parent := PodParent(root, corev1.PodQOSBurstable, "u1")
	if err := ApplyPod(mounts, parent, PodResources{CPUShares: 256, CPUQuota: 10000, Memory: 64 << 20, PIDs: 50}, false); err != nil {
		t.Fatal(err)
	}
	read := func(dir string, files ...string) string { return readFirst(mounts, dir, files...) }
	for _, c := range []struct{ dir, want string }{
		{filepath.Join(root, BestEffortTier), "2|1"}, {filepath.Join(root, BurstableTier), "768|30"}, {parent, "256|10"},
	} {
		if got := read(c.dir, "cpu.shares", "cpu.weight"); !strings.Contains("|"+c.want+"|", "|"+got+"|") {
			t.Errorf("%s weight %q, want %s", c.dir, got, c.want)
		}
	}
	if got := read(parent, "memory.max", "memory.limit_in_bytes"); got != strconv.Itoa(64<<20) {
		t.Errorf("memory limit %q", got)
	}
	if got := read(parent, "pids.max"); got != "50" {
		t.Errorf("pids.max %q", got)
	}
	if got := read(parent, "cpu.max", "cpu.cfs_quota_us"); got != "10000 100000" && got != "10000" {
		t.Errorf("quota %q", got)
	}

	// 10 ms of CPU per 100 ms: a loop that spins for half a second of wall time is throttled.
	sh := exec.Command("sh", "-c", "read go; end=$(($(date +%s%N) + 500000000)); while [ $(date +%s%N) -lt $end ]; do :; done")
	in, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sh.Process.Kill() })
	for _, m := range mounts {
		if _, err := os.Stat(filepath.Join(m, parent, "cpu.stat")); err != nil {
			continue // the hierarchy that throttles is enough (cpuset's would want its cpus set first)
		}
		if err := os.WriteFile(filepath.Join(m, parent, "cgroup.procs"), []byte(strconv.Itoa(sh.Process.Pid)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := in.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	_ = sh.Wait()
	stat := read(parent, "cpu.stat")
	throttled := -1
	for _, l := range strings.Split(stat, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "nr_throttled" {
			throttled, _ = strconv.Atoi(f[1])
		}
	}
	if throttled <= 0 {
		t.Errorf("a busy loop under a 10ms/100ms quota was not throttled: cpu.stat %q", stat)
	}
}

// readFirst is the first of a cgroup's files found in any of the hierarchies: "" when none is.
func readFirst(mounts []string, dir string, files ...string) string {
	for _, m := range mounts {
		for _, f := range files {
			if b, err := os.ReadFile(filepath.Join(m, dir, f)); err == nil {
				return strings.TrimSpace(string(b))
			}
		}
	}
	return ""
}
