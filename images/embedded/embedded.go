// Package embedded carries skiff's pause and netutil images inside the skiff binary, as k3s
// carries its airgap images: a node that reaches no registry and has no image directory
// still starts pods. The archives are generated (hack/genimages) and committed.
package embedded

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

//go:generate go run ../../hack/genimages -out .

//go:embed pause.tar netutil.tar
var archives embed.FS

// Archives lists the embedded image archives' names.
func Archives() []string {
	entries, _ := fs.ReadDir(archives, ".")
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// WriteTo writes every embedded archive into dir and returns their paths.
func WriteTo(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, name := range Archives() {
		b, err := archives.ReadFile(name)
		if err != nil {
			return nil, err
		}
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, b, 0o644); err != nil {
			return nil, fmt.Errorf("embedded image %s: %w", name, err)
		}
		files = append(files, f)
	}
	return files, nil
}
