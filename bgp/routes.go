package bgp

import (
	"net/netip"
	"slices"
)

// Path is one path to a prefix in the speaker's RIB, reduced to what route selection needs.
type Path struct {
	Prefix  netip.Prefix
	NextHop netip.Addr
	// LocalPref is the LOCAL_PREF attribute (100 when absent).
	LocalPref uint32
	// ASPathLen is the number of ASes in AS_PATH.
	ASPathLen int
}

// Routes maps each prefix to its next hops, sorted; several next hops make an ECMP route.
type Routes map[netip.Prefix][]netip.Addr

// Select picks the kernel routes the paths call for: for each prefix the paths with the
// highest LOCAL_PREF and, among those, the shortest AS_PATH, all of them (ECMP). Prefixes the
// node originates itself, paths through one of the node's own addresses (self: one per
// family), unusable next hops and
// networks announced through an address of their own are left out, so a node never routes
// its own block or its attached network away.
func Select(paths []Path, own []netip.Prefix, self ...netip.Addr) Routes {
	best := map[netip.Prefix][]Path{}
	for _, p := range paths {
		if !p.Prefix.IsValid() || !p.NextHop.IsValid() || p.NextHop.IsUnspecified() || slices.Contains(self, p.NextHop) {
			continue
		}
		if p.Prefix.Addr().Is4() != p.NextHop.Is4() {
			continue
		}
		p.Prefix = p.Prefix.Masked()
		// A route to a network through an address inside it is a router announcing its own
		// attached network (the fabric): installing it would replace the node's connected route.
		if p.Prefix.Contains(p.NextHop) {
			continue
		}
		if slices.ContainsFunc(own, func(o netip.Prefix) bool { return o.Masked() == p.Prefix }) {
			continue
		}
		cur := best[p.Prefix]
		switch {
		case len(cur) == 0 || better(p, cur[0]):
			best[p.Prefix] = []Path{p}
		case !better(cur[0], p):
			best[p.Prefix] = append(cur, p)
		}
	}
	out := Routes{}
	for prefix, ps := range best {
		var hops []netip.Addr
		for _, p := range ps {
			if !slices.Contains(hops, p.NextHop) {
				hops = append(hops, p.NextHop)
			}
		}
		slices.SortFunc(hops, func(a, b netip.Addr) int { return a.Compare(b) })
		out[prefix] = hops
	}
	return out
}

func better(a, b Path) bool {
	if a.LocalPref != b.LocalPref {
		return a.LocalPref > b.LocalPref
	}
	return a.ASPathLen < b.ASPathLen
}

// Plan compares the wanted routes with the installed ones: set holds routes to add or
// replace, del the prefixes to remove. With keepStale, nothing is removed (the graceful
// restart window, before the speaker has relearned what it knew).
func Plan(want, installed Routes, keepStale bool) (set Routes, del []netip.Prefix) {
	set = Routes{}
	for p, hops := range want {
		if !slices.Equal(installed[p], hops) {
			set[p] = hops
		}
	}
	if !keepStale {
		for p := range installed {
			if _, ok := want[p]; !ok {
				del = append(del, p)
			}
		}
	}
	slices.SortFunc(del, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return set, del
}

// KeepRestarting adds to want the installed routes it lacks whose next hops all belong to
// peers that are restarting (their session dropped without a NOTIFICATION less than the
// restart time ago). GoBGP as a graceful-restart helper sometimes drops such a peer's stale
// paths before the peer is back (when the new session's first attempt is refused); the
// kernel keeps forwarding to the restarting node meanwhile, as RFC 4724 intends.
func KeepRestarting(want, installed Routes, restarting map[netip.Addr]bool) Routes {
	out := Routes{}
	for p, hops := range want {
		out[p] = hops
	}
	for p, hops := range installed {
		if _, ok := out[p]; ok || len(hops) == 0 {
			continue
		}
		all := true
		for _, h := range hops {
			all = all && restarting[h]
		}
		if all {
			out[p] = hops
		}
	}
	return out
}
