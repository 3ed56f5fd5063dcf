package services

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/dataplane/programs"
)

// expectedMaps is what Maps.Contents prints for maps holding exactly services.
func expectedMaps(svcs []Service) string {
	e := encode(svcs)
	var lines []string
	for k, v := range e.services {
		lines = append(lines, mapLine("service", k, v))
	}
	for k, v := range e.backends {
		lines = append(lines, mapLine("backend", k, v))
	}
	for k, v := range e.names {
		lines = append(lines, mapLine("name", k, v))
	}
	for k, v := range e.maglev {
		lines = append(lines, mapLine("maglev", k, v))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestPrivilegedApplyChanges drives real maps through random changes the way the proxy does
// (the changed Services alone when ApplyChanges can, the whole state when it says it
// cannot) and checks after every step that the maps hold exactly what writing the whole state
// into empty maps would, entry for entry — and that the change path was the one taken.
func TestPrivilegedApplyChanges(t *testing.T) {
	m := kernelMaps(t)
	var alone, whole int
	for seed := range uint64(5) {
		w := newWorld(seed)
		c := &Compiler{Node: w.node, IDs: map[string]uint32{}}
		p := &Programmer{Maps: m}
		if err := p.Apply(c.Compile(w.all()), true); err != nil {
			t.Fatal(err)
		}
		for step := range 40 {
			keys := w.changes()
			applied, err := p.ApplyChanges(w.recompile(c, keys))
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			if applied {
				alone++
			} else {
				whole++
				if err := p.Apply(c.Compile(w.all()), false); err != nil {
					t.Fatal(err)
				}
			}
			want := expectedMaps(groupsOf(c))
			if got := rawMaps(t, m); got != want {
				t.Fatalf("seed %d step %d (changed %v, alone %v): the maps hold\n%s\nwant\n%s", seed, step, keys, applied, got, want)
			}
			if fill := fillOf(p.Status.Fill); fill["skiff_services"] != countPrefix(want, "service ") || fill["skiff_backends"] != countPrefix(want, "backend ") {
				t.Fatalf("seed %d step %d: fill %+v, the maps hold %d frontends and %d backends", seed, step, fill, countPrefix(want, "service "), countPrefix(want, "backend "))
			}
		}
	}
	// The random world has no overlapping frontends and no full map: every change goes alone.
	if whole > 0 || alone == 0 {
		t.Errorf("%d changes applied alone, %d needed the whole state", alone, whole)
	}
}

// fillOf is each map's entries by name.
func fillOf(fill []MapFill) map[string]int {
	out := map[string]int{}
	for _, f := range fill {
		out[f.Map] = f.Entries
	}
	return out
}

func countPrefix(s, prefix string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// rawMaps is what the frontend, backend, name and Maglev maps hold.
func rawMaps(t *testing.T, m Maps) string {
	t.Helper()
	s, err := m.Contents()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// kernelMaps creates the service maps as the programs declare them (sized small, allocated
// on demand), with no program attached: the kernel's own maps, behind the writes the proxy
// makes, closed when the test ends. It skips under -short and needs root.
func kernelMaps(t *testing.T) Maps {
	t.Helper()
	if testing.Short() {
		t.Skip("needs root and BPF: make unit (-short) skips it, make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (every machine here has it)")
	}
	spec, err := programs.LoadSock()
	if err != nil {
		t.Fatal(err)
	}
	create := func(name string) *ebpf.Map {
		ms := spec.Maps[name].Copy()
		ms.MaxEntries = min(ms.MaxEntries, 65536)
		ms.Flags |= unix.BPF_F_NO_PREALLOC
		ms.Pinning = ebpf.PinNone
		m, err := ebpf.NewMap(ms)
		if err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	return Maps{Services: create("skiff_services"), Backends: create("skiff_backends"), Names: create("skiff_svc_names"),
		Maglev: create("skiff_maglev")}
}
