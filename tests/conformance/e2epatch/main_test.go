package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fakeSource writes each edited file with its old text n times, and one file no edit
// touches, into a tree of read-only directories as in the module cache.
func fakeSource(t *testing.T, n int) string {
	t.Helper()
	src := t.TempDir()
	for _, e := range edits {
		p := filepath.Join(src, e.File)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		body := "package x\n\nfunc f() {\n" + strings.Repeat(e.Old, n) + "}\n"
		if err := os.WriteFile(p, []byte(body), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module k8s.io/kubernetes\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = writableDirs(src) })
	_ = filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			err = os.Chmod(path, 0o555)
		}
		return err
	})
	return src
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func TestWriteTree(t *testing.T) {
	src, out := fakeSource(t, 1), t.TempDir()
	t.Cleanup(func() { _ = writableDirs(out) })
	for run := 0; run < 2; run++ { // a second build rewrites the tree
		if err := write(src, out); err != nil {
			t.Fatal(err)
		}
	}
	tree := filepath.Join(out, "kubernetes")
	for _, e := range edits {
		got, err := os.ReadFile(filepath.Join(tree, e.File))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(got), e.Old) || !strings.Contains(string(got), e.New) {
			t.Errorf("%s: the edit was not applied:\n%s", e.File, got)
		}
		orig, err := os.ReadFile(filepath.Join(src, e.File))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(orig), e.Old) {
			t.Errorf("%s: the source was changed through a hard link:\n%s", e.File, orig)
		}
	}
	if inode(t, filepath.Join(src, "go.mod")) != inode(t, filepath.Join(tree, "go.mod")) {
		t.Error("an unedited file is a copy, not a hard link")
	}
}

// Where hard links fail (the module cache on another file system), the tree is a copy.
func TestWriteCopiesWithoutHardLinks(t *testing.T) {
	saved := copyCommands
	defer func() { copyCommands = saved }()
	copyCommands = [][]string{{"false"}, {"cp", "-a"}}
	src, out := fakeSource(t, 1), t.TempDir()
	t.Cleanup(func() { _ = writableDirs(out) })
	if err := write(src, out); err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(out, "kubernetes")
	if inode(t, filepath.Join(src, "go.mod")) == inode(t, filepath.Join(tree, "go.mod")) {
		t.Error("the fallback made a hard link")
	}
	for _, e := range edits {
		if got, err := os.ReadFile(filepath.Join(tree, e.File)); err != nil || !strings.Contains(string(got), e.New) {
			t.Errorf("%s: %v, the edit not applied:\n%s", e.File, err, got)
		}
	}
	copyCommands = [][]string{{"false"}, {"false"}}
	if err := write(src, out); err == nil || !strings.Contains(err.Error(), "false") {
		t.Errorf("every copy failing: %v, want the commands' errors", err)
	}
}

func TestWriteRefusesAmbiguousOrMissingText(t *testing.T) {
	for _, n := range []int{0, 2} {
		out := t.TempDir()
		t.Cleanup(func() { _ = writableDirs(out) })
		err := write(fakeSource(t, n), out)
		if err == nil || !strings.Contains(err.Error(), "occurs") {
			t.Errorf("old text %d times: %v, want an error saying how often it occurs", n, err)
		}
	}
}

func TestWriteModfile(t *testing.T) {
	e2e, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(e2e, "go.mod"), []byte("module e2e\n\nrequire k8s.io/kubernetes v1.37.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e2e, "go.sum"), []byte("sums\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeModfile(e2e, out); err != nil {
		t.Fatal(err)
	}
	mod, _ := os.ReadFile(filepath.Join(out, "go.mod"))
	if want := "replace k8s.io/kubernetes => " + filepath.Join(out, "kubernetes"); !strings.Contains(string(mod), want) {
		t.Errorf("go.mod:\n%s\nwant a line %q", mod, want)
	}
	if sum, _ := os.ReadFile(filepath.Join(out, "go.sum")); string(sum) != "sums\n" {
		t.Errorf("go.sum: %q", sum)
	}
}
