package agent

import (
	"os"
	"path/filepath"
	"testing"
)

// TestInstallCNI: a separate skiff-cni is copied; without one, skiff-cni links to this
// binary (the multi-call plugin); loopback always links to skiff-cni; installing twice works.
func TestInstallCNI(t *testing.T) {
	dir := t.TempDir()
	plugin := filepath.Join(dir, "skiff-cni-src")
	if err := os.WriteFile(plugin, []byte("#!plugin"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin, conf := filepath.Join(dir, "bin"), filepath.Join(dir, "net.d", "10-skiff.conflist")
	for i := 0; i < 2; i++ {
		if err := installCNI(plugin, bin, conf, "/run/x.sock"); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(bin, "skiff-cni")); err != nil || string(b) != "#!plugin" {
		t.Fatalf("copied plugin: %q %v", b, err)
	}
	if l, err := os.Readlink(filepath.Join(bin, "loopback")); err != nil || l != "skiff-cni" {
		t.Fatalf("loopback -> %q %v", l, err)
	}
	if _, err := os.Stat(conf); err != nil {
		t.Fatal(err)
	}

	bin2 := filepath.Join(dir, "bin2")
	for i := 0; i < 2; i++ {
		if err := installCNI(filepath.Join(dir, "missing"), bin2, conf, "/run/x.sock"); err != nil {
			t.Fatal(err)
		}
	}
	self, _ := os.Executable()
	if l, err := os.Readlink(filepath.Join(bin2, "skiff-cni")); err != nil || l != self {
		t.Fatalf("skiff-cni -> %q %v, want this binary %s", l, err, self)
	}
}
