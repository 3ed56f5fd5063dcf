package loader

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/dataplane/services"
)

// sizedMaps are the maps MapSizes sizes, and the size each takes.
var sizedMaps = map[string]func(services.MapSizes) int{
	"skiff_services":  func(s services.MapSizes) int { return s.Services },
	"skiff_services6": func(s services.MapSizes) int { return s.Services },
	"skiff_svc_names": func(s services.MapSizes) int { return s.Services },
	"skiff_backends":  func(s services.MapSizes) int { return s.Backends },
	"skiff_backends6": func(s services.MapSizes) int { return s.Backends },
	"skiff_maglev":    func(s services.MapSizes) int { return s.Maglev },
}

// size sets the sized maps of spec to sizes, allocated on demand.
func size(spec *ebpf.CollectionSpec, sizes services.MapSizes) {
	for name, of := range sizedMaps {
		if m, ok := spec.Maps[name]; ok {
			m.MaxEntries = uint32(of(sizes))
			m.Flags |= unix.BPF_F_NO_PREALLOC
		}
	}
}

// unpinResized removes the pins of sized maps whose capacity or flags differ from spec's
// (the operator changed a --bpf-map-* size, or the maps predate on-demand allocation), so
// Load creates them afresh; the proxy's first sync fills them from the API. Programs keep
// the old maps until their links are updated to the new programs a moment later.
func unpinResized(pinDir string, spec *ebpf.CollectionSpec) ([]string, error) {
	var resized []string
	for name := range sizedMaps {
		ms, ok := spec.Maps[name]
		if !ok {
			continue
		}
		path := filepath.Join(pinDir, name)
		m, err := ebpf.LoadPinnedMap(path, &ebpf.LoadPinOptions{ReadOnly: true})
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return resized, fmt.Errorf("checking pinned map %s: %w", name, err)
		}
		info, err := m.Info()
		m.Close()
		if err != nil {
			return resized, fmt.Errorf("checking pinned map %s: %w", name, err)
		}
		if info.MaxEntries == ms.MaxEntries && info.Flags == ms.Flags {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return resized, fmt.Errorf("replacing pinned map %s: %w", name, err)
		}
		resized = append(resized, fmt.Sprintf("%s: %d entries -> %d", name, info.MaxEntries, ms.MaxEntries))
	}
	sort.Strings(resized)
	return resized, nil
}
