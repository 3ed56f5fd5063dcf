package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCommandReferenceCurrent fails when docs/reference/commands no longer says what the
// CLI does (a flag added, a default or a usage line changed), or metrics.md what the agent
// serves: `make docs` rewrites them.
func TestCommandReferenceCurrent(t *testing.T) {
	committed := filepath.Join("..", "..", "docs", "reference", "commands")
	dir := filepath.Join(t.TempDir(), "commands")
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
	pairs := map[string]string{filepath.Join(filepath.Dir(dir), "metrics.md"): filepath.Join(filepath.Dir(committed), "metrics.md")}
	for _, w := range want {
		pairs[w] = filepath.Join(committed, filepath.Base(w))
	}
	for generated, file := range pairs {
		gen, _ := os.ReadFile(generated)
		got, err := os.ReadFile(file)
		if err != nil || len(gen) == 0 || !bytes.Equal(gen, got) {
			t.Errorf("%s is stale (%v): run make docs", file, err)
		}
	}
}
