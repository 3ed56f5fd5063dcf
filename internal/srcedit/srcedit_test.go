package srcedit

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestApply(t *testing.T) {
	dir := t.TempDir()
	orig := filepath.Join(dir, "orig.go")
	if err := os.WriteFile(orig, []byte("a\nold\nb\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "tree")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(orig, filepath.Join(root, "f.go")); err != nil {
		t.Fatal(err)
	}
	if err := Apply(root, []Edit{{File: "f.go", Old: "old\n", New: "new\n"}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "f.go")); string(got) != "a\nnew\nb\n" {
		t.Errorf("edited file: %q", got)
	}
	if got, _ := os.ReadFile(orig); string(got) != "a\nold\nb\n" {
		t.Errorf("the hard-linked original was written through: %q", got)
	}
	fi, _ := os.Stat(orig)
	if n := fi.Sys().(*syscall.Stat_t).Nlink; n != 1 {
		t.Errorf("the original still has %d links", n)
	}
}

func TestApplyRefuses(t *testing.T) {
	for _, body := range []string{"none here\n", "old\nold\n"} {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "f.go"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		err := Apply(root, []Edit{{File: "f.go", Why: "because", Old: "old\n", New: "new\n"}})
		if err == nil || !strings.Contains(err.Error(), "occurs") || !strings.Contains(err.Error(), "because") {
			t.Errorf("%q: %v, want an error saying how often it occurs and why the edit exists", body, err)
		}
		if got, _ := os.ReadFile(filepath.Join(root, "f.go")); string(got) != body {
			t.Errorf("%q: the file was changed to %q", body, got)
		}
	}
}
