package services

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/dataplane/internal/fakemap"
	"github.com/skiff-sh/skiff/dataplane/programs"
)

// fakeTables are the four service maps in memory.
type fakeTables struct{ services, backends, names, maglev *fakemap.Map }

func newFakeTables(sizes MapSizes) *fakeTables {
	sizes = sizes.WithDefaults()
	return &fakeTables{services: fakemap.New("service", sizes.Services), backends: fakemap.New("backend", sizes.Backends),
		names: fakemap.New("name", sizes.Services), maglev: fakemap.New("maglev", sizes.Maglev)}
}

func (f *fakeTables) tables() *tables {
	return &tables{services: f.services, backends: f.backends, names: f.names, maglev: f.maglev}
}

// render prints every entry as Maps.Contents prints real maps, sorted.
func (f *fakeTables) render() string {
	return fakemap.Render(f.services, f.backends, f.names, f.maglev)
}

func (f *fakeTables) writes() int {
	return f.services.Writes + f.backends.Writes + f.names.Writes + f.maglev.Writes
}

// TestApplyChangesOnFakes is TestPrivilegedApplyChanges without root: random Service,
// EndpointSlice and hostPort changes applied alone, checked entry for entry against the whole
// state after every step, and each change's writes bounded by that change.
func TestApplyChangesOnFakes(t *testing.T) {
	for seed := range uint64(20) {
		w := newWorld(seed)
		c := &Compiler{Node: w.node, IDs: map[string]uint32{}}
		fakes := newFakeTables(MapSizes{})
		p := &Programmer{kernel: fakes.tables()}
		if err := p.Apply(c.Compile(w.all()), true); err != nil {
			t.Fatal(err)
		}
		for step := range 60 {
			keys := w.changes()
			changes := w.recompile(c, keys)
			before := fakes.writes()
			applied, err := p.ApplyChanges(changes)
			if err != nil || !applied {
				t.Fatalf("seed %d step %d: applied %v, %v (the random world has no overlap and no full map)", seed, step, applied, err)
			}
			if got, want := fakes.render(), expectedMaps(groupsOf(c)); got != want {
				t.Fatalf("seed %d step %d (changed %v): the maps hold\n%s\nwant\n%s", seed, step, keys, got, want)
			}
			// A change writes at most its old and new entries.
			var olds, news []Service
			for _, ch := range changes {
				olds, news = append(olds, ch.Old...), append(news, ch.New...)
			}
			bound := 0
			for _, e := range []entries{encode(olds), encode(news)} {
				bound += len(e.services) + len(e.backends) + len(e.names) + len(e.maglev)
			}
			if n := fakes.writes() - before; n > bound {
				t.Fatalf("seed %d step %d: %d map writes for a change of %d entries", seed, step, n, bound)
			}
		}
	}
}

// TestResyncRepairsDrift: entries removed or changed behind the programmer's back (bpftool,
// a crashed write) are put back by the periodic full Apply, and strays are pruned.
func TestResyncRepairsDrift(t *testing.T) {
	w := newWorld(7)
	c := &Compiler{Node: w.node, IDs: map[string]uint32{}}
	for range 40 {
		w.changes()
	}
	fakes := newFakeTables(MapSizes{})
	p := &Programmer{kernel: fakes.tables()}
	services := c.Compile(w.all())
	if err := p.Apply(services, true); err != nil {
		t.Fatal(err)
	}
	want := fakes.render()
	var lost programs.SockBackendKey
	if err := fakes.backends.NextKey(nil, &lost); err != nil {
		t.Fatal(err)
	}
	_ = fakes.backends.Delete(lost)                                                 // one backend lost
	_ = fakes.names.Update(uint32(999_999), programs.SockSvcName{}, ebpf.UpdateAny) // a stray
	if err := p.Apply(services, false); err != nil {
		t.Fatal(err)
	}
	if fakes.render() == want {
		t.Fatal("an incremental Apply repaired drift it cannot see: the test is not testing")
	}
	if err := p.Apply(services, true); err != nil {
		t.Fatal(err)
	}
	if got := fakes.render(); got != want {
		t.Fatalf("after the resync the maps hold\n%s\nwant\n%s", got, want)
	}
}

// TestFullMapsOnFakes: with room for fewer frontends than the Services have, Apply programs
// the ones that fit whole, names the rest in Status, and changes are then declined (the
// proxy applies the whole state).
func TestFullMapsOnFakes(t *testing.T) {
	w := newWorld(3)
	c := &Compiler{Node: w.node, IDs: map[string]uint32{}}
	for range 40 {
		w.changes()
	}
	services := c.Compile(w.all())
	if len(services) < 4 {
		t.Fatalf("the world has %d frontends: too few to fill half a map", len(services))
	}
	fakes := newFakeTables(MapSizes{Services: len(services) / 2})
	p := &Programmer{kernel: fakes.tables()}
	if err := p.Apply(services, true); err != nil {
		t.Fatal(err)
	}
	if len(p.Status.Dropped) == 0 || fakes.services.Len() > len(services)/2 {
		t.Fatalf("%d frontends in a map of %d, dropped %v", fakes.services.Len(), len(services)/2, p.Status.Dropped)
	}
	applied, err := p.ApplyChanges(w.recompile(c, w.changes()))
	if applied || err != nil {
		t.Fatalf("a change was applied alone while frontends were left out: %v %v", applied, err)
	}
	// An update that does not fit is an error the kernel gives, not a silent loss.
	full := fakemap.New("service", 1)
	_ = full.Update(programs.SockSvcKey{Port: 1}, programs.SockSvcValue{}, ebpf.UpdateAny)
	if err := full.Update(programs.SockSvcKey{Port: 2}, programs.SockSvcValue{}, ebpf.UpdateAny); !errors.Is(err, unix.E2BIG) {
		t.Fatalf("the fake took a key beyond its size: %v", err)
	}
}
