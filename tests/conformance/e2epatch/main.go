// Command e2epatch prepares the k8s.io/kubernetes sources upstream's e2e test binary is built
// from: the pinned module, hard-linked from the module cache (Go refuses to overlay files
// there), with fixes to bugs in the e2e framework itself that upstream has accepted or has
// under review, as exact edits. Nothing a spec checks of the cluster changes; each edit names
// its upstream issue. An edit that no longer matches exactly once fails the build, so a new
// e2e version is looked at again. It also writes a go.mod for the build (-modfile) that
// replaces k8s.io/kubernetes with the prepared tree.
//
// Usage: go run ./tests/conformance/e2epatch -e2e-dir tests/conformance/e2e -out DIR
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/skiff-sh/skiff/internal/srcedit"
)

// edits are exact replacements in files of the k8s.io/kubernetes module (srcedit.Apply).
var edits = []srcedit.Edit{{
	File: "test/e2e/framework/websocket/websocket_util.go",
	Why: "kubernetes#142284 (fix under review in #142285): OpenWebSocketForURL rewrote its caller's URL, " +
		"https to wss and on a second call wss to ws, so every retry of 'Pods should support retrieving logs " +
		"from the container over websockets' after a first read that came before the container's output " +
		"dialled plaintext to the TLS port and failed with 'bad status' until the spec timed out",
	Old: `	if url.Scheme == "https" {
		url.Scheme = "wss"
	} else {
		url.Scheme = "ws"
	}
`,
	New: `	// skiff (e2epatch): a copy of the caller's URL, so a retry with it dials TLS again.
	copied := *url
	url = &copied
	if url.Scheme == "https" || url.Scheme == "wss" {
		url.Scheme = "wss"
	} else {
		url.Scheme = "ws"
	}
`,
}}

func main() {
	e2eDir := flag.String("e2e-dir", "tests/conformance/e2e", "the throwaway module that builds e2e.test (its go.mod and go.sum)")
	src := flag.String("kube-src", "", "the k8s.io/kubernetes module directory (go list -m -f '{{.Dir}}' k8s.io/kubernetes)")
	out := flag.String("out", "", "directory for the prepared tree (out/kubernetes) and out/go.mod, out/go.sum")
	flag.Parse()
	if *src == "" || *out == "" {
		log.Fatal("e2epatch: -kube-src and -out are required")
	}
	if err := write(*src, *out); err != nil {
		log.Fatalf("e2epatch: %v", err)
	}
	if err := writeModfile(*e2eDir, *out); err != nil {
		log.Fatalf("e2epatch: %v", err)
	}
}

// write makes out/kubernetes a copy of src whose files are hard links where the file system
// allows, except the edited ones, which are new files.
func write(src, out string) error {
	tree := filepath.Join(out, "kubernetes")
	if err := writableDirs(tree); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.RemoveAll(tree); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := copyTree(src, tree); err != nil {
		return err
	}
	// The module cache's directories are read-only, and so are their copies. Only the
	// directories are made writable: a file's mode is its inode's, shared with the cache.
	if err := writableDirs(tree); err != nil {
		return err
	}
	return srcedit.Apply(tree, edits)
}

// copyCommands are tried in turn to copy the module: hard links first (no space, instant),
// a plain copy (124 MB for v1.37.2) when the module cache is on another file system.
var copyCommands = [][]string{{"cp", "-al"}, {"cp", "-a"}}

func copyTree(src, dst string) error {
	var errs []error
	for _, c := range copyCommands {
		cmd := exec.Command(c[0], append(c[1:], src, dst)...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %v: %s", cmd, err, bytes.TrimSpace(out)))
		_ = writableDirs(dst)
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

func writableDirs(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return os.Chmod(path, 0o755)
	})
}

// writeModfile writes out/go.mod (e2eDir's, replacing k8s.io/kubernetes with out/kubernetes)
// and out/go.sum (e2eDir's).
func writeModfile(e2eDir, out string) error {
	mod, err := os.ReadFile(filepath.Join(e2eDir, "go.mod"))
	if err != nil {
		return err
	}
	sum, err := os.ReadFile(filepath.Join(e2eDir, "go.sum"))
	if err != nil {
		return err
	}
	tree, err := filepath.Abs(filepath.Join(out, "kubernetes"))
	if err != nil {
		return err
	}
	mod = append(mod, fmt.Sprintf("\nreplace k8s.io/kubernetes => %s\n", tree)...)
	if err := os.WriteFile(filepath.Join(out, "go.mod"), mod, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "go.sum"), sum, 0o644)
}
