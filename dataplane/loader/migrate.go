package loader

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
)

// An upgrade must not break the connections the maps track: a NodePort flow whose
// connection-tracking entry is lost has its next reply reset. So a map whose layout changed
// is not rebuilt but converted: each layout version lists the maps that changed since the one
// before and how an entry converts; maps it does not list kept their layout and are reused
// as they are. Maps of a version this build does not know (a newer build's, after a
// downgrade) are rebuilt: the proxy refills the service maps from the API, and NodePort
// flows start over.

// convert turns an entry of a map's previous layout into one of the next; key and value
// are sized for the previous layout, to the next layout's sizes.
type convert func(key, value []byte, keySize, valueSize uint32) (newKey, newValue []byte)

// conversions lists, for each layout version, the maps whose layout changed since the
// version before it.
var conversions = map[uint32]map[string]convert{
	// 2: connection-tracking values gained per-entry packet and byte counters, appended.
	2: {"skiff_ct": appendZeroes, "skiff_ct6": appendZeroes},
}

// appendZeroes keeps key and value, the value extended with zeroed fields to valueSize.
func appendZeroes(key, value []byte, keySize, valueSize uint32) ([]byte, []byte) {
	v := make([]byte, valueSize)
	copy(v, value)
	return key, v
}

// migrate brings the maps pinned in pinDir from the layout version recorded beside them to
// version to, before specs' programs load them: each changed map is made anew at its new
// layout, filled with its converted entries and pinned in place of the old one. The old
// maps stay open in the result, whose again copies what the still-attached old programs add
// to them until their links are updated.
func migrate(pinDir string, to uint32, specs ...*ebpf.CollectionSpec) (*carried, error) {
	c := &carried{}
	from, err := PinnedVersion(pinDir)
	if err != nil || from == 0 || from == to {
		return c, err
	}
	if from > to {
		return c, rebuild(pinDir, from, specs)
	}
	steps := map[string][]convert{}
	for v := from + 1; v <= to; v++ {
		changed, ok := conversions[v]
		if !ok {
			// A version without a conversion listed: nothing this build knows how to keep.
			return c, rebuild(pinDir, from, specs)
		}
		for name, conv := range changed {
			steps[name] = append(steps[name], conv)
		}
	}
	for name, convs := range steps {
		spec := mapSpec(name, specs)
		if spec == nil {
			continue
		}
		if err := c.convert(pinDir, name, spec, convs); err != nil {
			c.close()
			return &carried{}, fmt.Errorf("migrating map %s from layout %d to %d: %w", name, from, to, err)
		}
	}
	return c, nil
}

func mapSpec(name string, specs []*ebpf.CollectionSpec) *ebpf.MapSpec {
	for _, s := range specs {
		if m, ok := s.Maps[name]; ok {
			return m
		}
	}
	return nil
}

// rebuild unpins every map of specs (and the version record), so that they are made afresh.
func rebuild(pinDir string, from uint32, specs []*ebpf.CollectionSpec) error {
	for _, s := range specs {
		for name, m := range s.Maps {
			if m.Pinning != ebpf.PinByName {
				continue
			}
			if err := os.Remove(filepath.Join(pinDir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("rebuilding maps of layout %d: %w", from, err)
			}
		}
	}
	return nil
}

// carried holds the old maps a migration replaced, and where their entries went.
type carried struct {
	moves []move
}

type move struct {
	old, new *ebpf.Map
	convs    []convert
}

// convert replaces the map pinned as name by a new one of spec's layout with its entries.
func (c *carried) convert(pinDir, name string, spec *ebpf.MapSpec, convs []convert) error {
	path := filepath.Join(pinDir, name)
	old, err := ebpf.LoadPinnedMap(path, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	// Converted already (a start that stopped before recording the version): keep it.
	if old.KeySize() == spec.KeySize && old.ValueSize() == spec.ValueSize {
		old.Close()
		return nil
	}
	ms := spec.Copy()
	ms.Pinning = ebpf.PinNone
	m, err := ebpf.NewMap(ms)
	if err != nil {
		old.Close()
		return err
	}
	mv := move{old: old, new: m, convs: convs}
	if _, err := mv.copy(ebpf.UpdateAny); err != nil {
		old.Close()
		m.Close()
		return err
	}
	if err := os.Remove(path); err != nil {
		old.Close()
		m.Close()
		return err
	}
	if err := m.Pin(path); err != nil {
		old.Close()
		m.Close()
		return err
	}
	c.moves = append(c.moves, mv)
	return nil
}

// copy puts every entry of the old map, converted, into the new one with flags, and returns
// how many it put; entries the new map already has are kept when flags is UpdateNoExist.
func (mv move) copy(flags ebpf.MapUpdateFlags) (int, error) {
	key, value := make([]byte, mv.old.KeySize()), make([]byte, mv.old.ValueSize())
	n := 0
	it := mv.old.Iterate()
	for it.Next(&key, &value) {
		k, v := key, value
		for _, conv := range mv.convs {
			k, v = conv(k, v, mv.new.KeySize(), mv.new.ValueSize())
		}
		err := mv.new.Update(k, v, flags)
		if errors.Is(err, ebpf.ErrKeyExist) {
			continue
		}
		if err != nil {
			return n, err
		}
		n++
	}
	return n, it.Err()
}

// again copies what was added to the old maps since they were converted (flows the old
// programs began before their links moved to the new ones), then lets the old maps go.
func (c *carried) again() error {
	defer c.close()
	for _, mv := range c.moves {
		if _, err := mv.copy(ebpf.UpdateNoExist); err != nil {
			return fmt.Errorf("carrying entries over to the new %s: %w", mv.new.String(), err)
		}
	}
	return nil
}

func (c *carried) close() {
	for _, mv := range c.moves {
		mv.old.Close()
		mv.new.Close()
	}
	c.moves = nil
}
