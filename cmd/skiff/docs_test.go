package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCommandReferenceCurrent fails when docs/reference/commands no longer says what the
// CLI does (a flag added, a default or a usage line changed): `make docs` rewrites it.
func TestCommandReferenceCurrent(t *testing.T) {
	committed := filepath.Join("..", "..", "docs", "reference", "commands")
	dir := t.TempDir()
	cmd := genDocsCommand()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetArgs([]string{dir})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.Glob(filepath.Join(dir, "*.md"))
	have, _ := filepath.Glob(filepath.Join(committed, "*.md"))
	if len(want) == 0 || len(want) != len(have) {
		t.Fatalf("%d pages generated, %d committed in %s: run make docs", len(want), len(have), committed)
	}
	for _, w := range want {
		gen, _ := os.ReadFile(w)
		got, err := os.ReadFile(filepath.Join(committed, filepath.Base(w)))
		if err != nil || !bytes.Equal(gen, got) {
			t.Errorf("%s is stale (%v): run make docs", filepath.Join(committed, filepath.Base(w)), err)
		}
	}
}
