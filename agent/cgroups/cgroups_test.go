package cgroups

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRemove(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, m := range []string{a, b} {
		if err := os.MkdirAll(filepath.Join(m, Parent("u1"), "c1"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if !Exists([]string{a, b}, "u1") || Exists([]string{a}, "u2") {
		t.Fatal("Exists")
	}
	if err := Remove([]string{a, b}, "u1"); err != nil {
		t.Fatal(err)
	}
	if Exists([]string{a, b}, "u1") {
		t.Fatal("pod cgroup left")
	}
	if _, err := os.Stat(filepath.Join(a, "skiff")); err != nil {
		t.Fatal("the shared /skiff parent must stay")
	}
	if err := Remove([]string{a}, "absent"); err != nil {
		t.Fatalf("removing a missing pod cgroup: %v", err)
	}
}
