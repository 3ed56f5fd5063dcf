package services

import "github.com/cilium/ebpf"

// table is a BPF map as the service programmer writes it: an *ebpf.Map in the kernel; in
// unit tests a fake that keeps its entries in memory and renders them as text
// (tables_test.go), so the sync logic above the maps runs without root.
type table interface {
	Update(key, value any, flags ebpf.MapUpdateFlags) error
	Delete(key any) error
	// NextKey writes the key after key (the first one when key is nil) to nextKeyOut, or
	// returns ebpf.ErrKeyNotExist after the last.
	NextKey(key, nextKeyOut any) error
	MaxEntries() uint32
}

// tables are the service maps the Programmer writes (maglev nil when the programs have no
// Maglev map, services6 and backends6 when they have no IPv6 maps).
type tables struct{ services, backends, services6, backends6, names, maglev table }

// tables are the maps as tables. A missing map stays a nil table, never an interface holding
// a nil *ebpf.Map.
func (m Maps) tables() tables {
	var t tables
	for _, e := range []struct {
		m  *ebpf.Map
		to *table
	}{{m.Services, &t.services}, {m.Backends, &t.backends}, {m.Services6, &t.services6}, {m.Backends6, &t.backends6},
		{m.Names, &t.names}, {m.Maglev, &t.maglev}} {
		if e.m != nil {
			*e.to = e.m
		}
	}
	return t
}

// tables is what the programmer writes: its fakes, or its Maps.
func (p *Programmer) tables() tables {
	if p.kernel != nil {
		return *p.kernel
	}
	return p.Maps.tables()
}
