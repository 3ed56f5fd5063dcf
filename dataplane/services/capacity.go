package services

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// MapSizes are the capacities of the service maps, set at load (the agent's --bpf-map-*
// flags). The defaults hold upstream's largest tested cluster with room to spare: 262,144
// frontends (100,000 Services with a ClusterIP and a NodePort or a second port each) and
// 1,048,576 backends (upstream's 250 endpoints per Service at 4,000 Services, or 10 at
// 100,000); Cilium's defaults hold 65,536 of each, and its users hit "lb4_backends map is
// full" (cilium#28726). The maps are allocated as entries are written (BPF_F_NO_PREALLOC),
// so capacity costs no kernel memory until it is used.
type MapSizes struct {
	// Services is the frontends (skiff_services, and skiff_svc_names per Service port);
	// skiff_services6 holds as many IPv6 ones.
	Services int
	// Backends is the backend slots of every frontend together (skiff_backends);
	// skiff_backends6 holds as many of IPv6 frontends.
	Backends int
	// Maglev is the Maglev lookup entries (skiff_maglev): MaglevSize per Service that uses it.
	Maglev int
}

// DefaultMapSizes are the sizes when the agent is given none.
var DefaultMapSizes = MapSizes{Services: 262144, Backends: 1048576, Maglev: 1048576}

// WithDefaults fills zero sizes from DefaultMapSizes.
func (s MapSizes) WithDefaults() MapSizes {
	if s.Services <= 0 {
		s.Services = DefaultMapSizes.Services
	}
	if s.Backends <= 0 {
		s.Backends = DefaultMapSizes.Backends
	}
	if s.Maglev <= 0 {
		s.Maglev = DefaultMapSizes.Maglev
	}
	return s
}

// MapFill is how full one service map is: the entries the last sync wanted and the map's
// capacity.
type MapFill struct {
	Map      string
	Entries  int
	Capacity int
}

// MapStatus is what the last sync of the service maps could program.
type MapStatus struct {
	Fill []MapFill
	// Dropped names the frontends that did not fit ("namespace/name:port/PROTO at
	// ADDR:PORT"), sorted; empty when everything fits.
	Dropped []string
	// Sync is how the last sync ran — SyncChanges, SyncWhole or SyncResync — and Took how
	// long (the agent's skiff_service_proxy_sync_seconds).
	Sync string
	Took time.Duration
}

// How a sync of the service maps ran.
const (
	// SyncChanges wrote the changed Services alone (Programmer.ApplyChanges).
	SyncChanges = "changes"
	// SyncWhole compiled the whole state for a change that could not be made alone.
	SyncWhole = "whole"
	// SyncResync rewrote everything: the first sync, and every Resync.
	SyncResync = "resync"
)

// Full says which maps are full and what was left out, for a log line and the Node
// condition; "" when everything fits.
func (s MapStatus) Full() string {
	if len(s.Dropped) == 0 {
		return ""
	}
	var full []string
	for _, f := range s.Fill {
		if f.Entries >= f.Capacity {
			full = append(full, fmt.Sprintf("%s (%d entries)", f.Map, f.Capacity))
		}
	}
	first := s.Dropped[0]
	return fmt.Sprintf("service maps full: %s; %d frontends not programmed (first: %s); raise --bpf-map-services, --bpf-map-backends or --bpf-map-maglev",
		strings.Join(full, ", "), len(s.Dropped), first)
}

// Fit keeps the frontends that fit the maps' capacities and names those that do not. It
// counts entries as encode writes them: one service entry per frontend, one name and one set
// of backend slots per Service port id (the ClusterIP and NodePort frontends of one port
// share them), MaglevSize lookup entries per Maglev id. Frontends are taken in name and
// address order, so the same state always leaves out the same ones, and a frontend is left
// out whole (never a frontend without its backends). A frontend whose id is already in is
// always cheap: it adds one service entry.
func Fit(services []Service, caps MapSizes) (kept []Service, status MapStatus) {
	order := make([]int, len(services))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		sa, sb := services[order[a]], services[order[b]]
		if sa.Name != sb.Name {
			return sa.Name < sb.Name
		}
		return sa.Frontend.String() < sb.Frontend.String()
	})
	// Frontends and backend slots are counted per family (each has its own maps); names
	// and Maglev tables are shared.
	var have, want counts
	slots := map[uint32]int{} // backend slots written per id
	maglev := map[uint32]bool{}
	keep := make([]bool, len(services))
	wantSlots := map[uint32]int{}
	wantMaglevIDs := map[uint32]bool{}
	for _, i := range order {
		s := services[i]
		v6 := s.Frontend.Addr.Is6()
		n := min(len(s.Backends), 65535)
		// What the whole state asks for, fitting or not (the fill metric's numerator).
		*want.frontends(v6)++
		if had, ok := wantSlots[s.ID]; !ok || n > had {
			*want.slots(v6) += n - had
			wantSlots[s.ID] = n
		}
		if s.Maglev && n > 0 && !wantMaglevIDs[s.ID] {
			wantMaglevIDs[s.ID] = true
			want.maglev += MaglevSize
		}
		// What this frontend adds to what is kept so far.
		addBackends := 0
		if had := slots[s.ID]; n > had {
			addBackends = n - had
		}
		addMaglev := 0
		if s.Maglev && n > 0 && !maglev[s.ID] {
			addMaglev = MaglevSize
		}
		_, named := slots[s.ID]
		addNames := 0
		if !named {
			addNames = 1
		}
		if *have.frontends(v6)+1 > caps.Services || len(slots)+addNames > caps.Services ||
			*have.slots(v6)+addBackends > caps.Backends || have.maglev+addMaglev > caps.Maglev {
			status.Dropped = append(status.Dropped, fmt.Sprintf("%s at %s", s.Name, s.Frontend))
			continue
		}
		keep[i] = true
		*have.frontends(v6)++
		*have.slots(v6) += addBackends
		have.maglev += addMaglev
		slots[s.ID] = max(slots[s.ID], n)
		if addMaglev > 0 {
			maglev[s.ID] = true
		}
	}
	for i, s := range services {
		if keep[i] {
			kept = append(kept, s)
		}
	}
	sort.Strings(status.Dropped)
	want.names = len(wantSlots)
	status.Fill = fill(want, caps)
	return kept, status
}

// counts are the entries of each service map.
type counts struct {
	services, services6, names, backends, backends6, maglev int
}

// frontends is the frontend count of a family.
func (c *counts) frontends(v6 bool) *int {
	if v6 {
		return &c.services6
	}
	return &c.services
}

// slots is the backend-slot count of a family.
func (c *counts) slots(v6 bool) *int {
	if v6 {
		return &c.backends6
	}
	return &c.backends
}

// counts are e's entries per map.
func (e entries) counts() counts {
	return counts{services: len(e.services), services6: len(e.services6), names: len(e.names),
		backends: len(e.backends), backends6: len(e.backends6), maglev: len(e.maglev)}
}

// fill is each sized map's entries against its capacity, in MapStatus.Fill's order.
func fill(c counts, caps MapSizes) []MapFill {
	return []MapFill{
		{"skiff_services", c.services, caps.Services},
		{"skiff_services6", c.services6, caps.Services},
		{"skiff_svc_names", c.names, caps.Services},
		{"skiff_backends", c.backends, caps.Backends},
		{"skiff_backends6", c.backends6, caps.Backends},
		{"skiff_maglev", c.maglev, caps.Maglev},
	}
}

// Capacity is the sizes of the maps as loaded.
func (m Maps) Capacity() MapSizes { return m.tables().capacity() }

// capacity is the sizes of the tables.
func (t tables) capacity() MapSizes {
	c := MapSizes{}
	if t.services != nil {
		c.Services = int(t.services.MaxEntries())
		if t.names != nil {
			c.Services = min(c.Services, int(t.names.MaxEntries()))
		}
	}
	if t.backends != nil {
		c.Backends = int(t.backends.MaxEntries())
	}
	c.Maglev = math.MaxInt // no Maglev map: nothing is written to it (write skips it)
	if t.maglev != nil {
		c.Maglev = int(t.maglev.MaxEntries())
	}
	return c
}
