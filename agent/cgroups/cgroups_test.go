package cgroups

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestRemove(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	// The pod's cgroup in one tier of one hierarchy and another of the other: a pod made
	// before the agent placed pods by class is found and removed too.
	for m, qos := range map[string]corev1.PodQOSClass{a: corev1.PodQOSBurstable, b: corev1.PodQOSGuaranteed} {
		if err := os.MkdirAll(filepath.Join(m, PodParent("/skiff", qos, "u1"), "c1"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := Find(a, "/skiff", "u1"), filepath.Join(a, "skiff/burstable/podu1"); got != want {
		t.Fatalf("Find: %q, want %q", got, want)
	}
	if !Exists([]string{a, b}, "/skiff", "u1") || Exists([]string{a}, "/skiff", "u2") {
		t.Fatal("Exists")
	}
	if err := Remove([]string{a, b}, "/skiff", "u1"); err != nil {
		t.Fatal(err)
	}
	if Exists([]string{a, b}, "/skiff", "u1") {
		t.Fatal("pod cgroup left")
	}
	if _, err := os.Stat(filepath.Join(a, "skiff/burstable")); err != nil {
		t.Fatal("the shared /skiff/burstable tier must stay")
	}
	if err := Remove([]string{a}, "/skiff", "absent"); err != nil {
		t.Fatalf("removing a missing pod cgroup: %v", err)
	}
}

func TestKillAllRefusesTheRoot(t *testing.T) {
	for _, root := range []string{"", "/", "//"} {
		if err := KillAll([]string{t.TempDir()}, root); err == nil {
			t.Errorf("KillAll(%q) accepted", root)
		}
	}
}

func TestCPUConversions(t *testing.T) {
	for _, c := range []struct {
		milli  int64
		shares uint64
		weight uint64
	}{{0, 2, 1}, {1, 2, 1}, {10, 10, 1}, {500, 512, 20}, {1000, 1024, 39}, {2000, 2048, 79}, {1 << 40, 262144, 10000}} {
		if got := SharesFromMilliCPU(c.milli); got != c.shares {
			t.Errorf("SharesFromMilliCPU(%d) = %d, want %d", c.milli, got, c.shares)
		}
		if got := WeightFromShares(c.shares); got != c.weight {
			t.Errorf("WeightFromShares(%d) = %d, want %d", c.shares, got, c.weight)
		}
	}
}
