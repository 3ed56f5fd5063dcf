// Package images names skiff's own images and assembles them from locally built static
// binaries: the pod sandbox image and the test image, which every node imports into
// containerd because no registry is reachable.
package images

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/skiff-sh/skiff/images/oci"
)

// Names of skiff's images, fully normalized as containerd's CRI needs them.
const (
	Pause   = "localhost/skiff/pause:1"
	Netutil = "localhost/skiff/netutil:1"
)

// Build writes pause.tar and netutil.tar into outDir from the two static binaries.
func Build(pauseBin, netutilBin, outDir string) ([]string, error) {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	specs := []struct {
		file, name, bin, path string
	}{
		{"pause.tar", Pause, pauseBin, "/pause"},
		{"netutil.tar", Netutil, netutilBin, "/bin/netutil"},
	}
	var out []string
	for _, s := range specs {
		data, err := os.ReadFile(s.bin)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", s.name, err)
		}
		img := oci.Image{Name: s.name, Entrypoint: []string{s.path}, Env: []string{"PATH=/bin"},
			Files: []oci.File{{Path: s.path, Mode: 0o755, Data: data}}}
		file := filepath.Join(outDir, s.file)
		if err := oci.WriteFile(file, img); err != nil {
			return nil, fmt.Errorf("image %s: %w", s.name, err)
		}
		out = append(out, file)
	}
	return out, nil
}
