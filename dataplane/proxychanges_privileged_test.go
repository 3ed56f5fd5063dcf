package dataplane

import (
	"slices"
	"strings"
	"testing"
)

// expectedMaps is what rawMaps prints for maps holding exactly services.
func expectedMaps(services []Service) string {
	e := encode(services)
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
	d, _, _ := testDataplane(t, "test-changes")
	var alone, whole int
	for seed := range uint64(5) {
		w := newWorld(seed)
		c := &Compiler{Node: w.node, IDs: map[string]uint32{}}
		p := &Programmer{Maps: d.Maps}
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
			if got := rawMaps(t, d.Maps); got != want {
				t.Fatalf("seed %d step %d (changed %v, alone %v): the maps hold\n%s\nwant\n%s", seed, step, keys, applied, got, want)
			}
			if fill := p.Status.Fill; fill[0].Entries != countPrefix(want, "service ") || fill[2].Entries != countPrefix(want, "backend ") {
				t.Fatalf("seed %d step %d: fill %+v, the maps hold %d frontends and %d backends", seed, step, fill, countPrefix(want, "service "), countPrefix(want, "backend "))
			}
		}
	}
	// The random world has no overlapping frontends and no full map: every change goes alone.
	if whole > 0 || alone == 0 {
		t.Errorf("%d changes applied alone, %d needed the whole state", alone, whole)
	}
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
