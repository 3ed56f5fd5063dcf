package bgp

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/apiutil"
	"github.com/osrg/gobgp/v3/pkg/packet/bgp"
)

var (
	p1   = netip.MustParsePrefix("10.244.1.0/24")
	p2   = netip.MustParsePrefix("10.244.2.0/24")
	own  = netip.MustParsePrefix("10.244.0.0/24")
	self = netip.MustParseAddr("198.18.0.1")
	n2   = netip.MustParseAddr("198.18.0.2")
	n3   = netip.MustParseAddr("198.18.0.3")
)

func path(p netip.Prefix, nh netip.Addr, lp uint32, as int) Path {
	return Path{Prefix: p, NextHop: nh, LocalPref: lp, ASPathLen: as}
}

func TestSelect(t *testing.T) {
	for _, tc := range []struct {
		name  string
		paths []Path
		want  string
	}{
		{"nothing", nil, "map[]"},
		{"one path", []Path{path(p1, n2, 100, 0)}, "map[10.244.1.0/24:[198.18.0.2]]"},
		{"own block never installed", []Path{path(own, n2, 100, 0)}, "map[]"},
		{"path through self ignored", []Path{path(p1, self, 100, 0)}, "map[]"},
		{"unspecified next hop ignored", []Path{path(p1, netip.IPv4Unspecified(), 100, 0)}, "map[]"},
		{"invalid next hop ignored", []Path{{Prefix: p1, LocalPref: 100}}, "map[]"},
		{"attached network through itself ignored", []Path{path(netip.MustParsePrefix("198.18.0.0/24"), netip.MustParseAddr("198.18.0.254"), 100, 0)}, "map[]"},
		{"family mismatch ignored", []Path{path(p1, netip.MustParseAddr("fd00::2"), 100, 0)}, "map[]"},
		{"ECMP on a tie, sorted, deduplicated", []Path{path(p1, n3, 100, 1), path(p1, n2, 100, 1), path(p1, n3, 100, 1)},
			"map[10.244.1.0/24:[198.18.0.2 198.18.0.3]]"},
		{"higher local pref wins", []Path{path(p1, n3, 100, 0), path(p1, n2, 200, 3)}, "map[10.244.1.0/24:[198.18.0.2]]"},
		{"shorter AS path wins", []Path{path(p1, n2, 100, 2), path(p1, n3, 100, 1)}, "map[10.244.1.0/24:[198.18.0.3]]"},
		{"worse path after a better one", []Path{path(p1, n3, 100, 1), path(p1, n2, 100, 2)}, "map[10.244.1.0/24:[198.18.0.3]]"},
		{"unmasked prefix normalised", []Path{path(netip.MustParsePrefix("10.244.2.7/24"), n2, 100, 0)}, "map[10.244.2.0/24:[198.18.0.2]]"},
		{"two prefixes", []Path{path(p1, n2, 100, 0), path(p2, n3, 100, 0)}, "map[10.244.1.0/24:[198.18.0.2] 10.244.2.0/24:[198.18.0.3]]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(Select(tc.paths, []netip.Prefix{own}, self)); got != tc.want {
				t.Errorf("Select = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	installed := Routes{p1: {n2}, p2: {n2, n3}}
	for _, tc := range []struct {
		name      string
		want      Routes
		keepStale bool
		set, del  string
	}{
		{"in sync", Routes{p1: {n2}, p2: {n2, n3}}, false, "map[]", "[]"},
		{"next hop changed", Routes{p1: {n3}, p2: {n2, n3}}, false, "map[10.244.1.0/24:[198.18.0.3]]", "[]"},
		{"ECMP member lost", Routes{p1: {n2}, p2: {n3}}, false, "map[10.244.2.0/24:[198.18.0.3]]", "[]"},
		{"withdrawn", Routes{p1: {n2}}, false, "map[]", "[10.244.2.0/24]"},
		{"withdrawn during graceful restart kept", Routes{p1: {n2}}, true, "map[]", "[]"},
		{"all gone", Routes{}, false, "map[]", "[10.244.1.0/24 10.244.2.0/24]"},
		{"new prefix", Routes{p1: {n2}, p2: {n2, n3}, own: {n3}}, false, "map[10.244.0.0/24:[198.18.0.3]]", "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, del := Plan(tc.want, installed, tc.keepStale)
			if fmt.Sprint(set) != tc.set || fmt.Sprint(del) != tc.del {
				t.Errorf("Plan = %v %v, want %s %s", set, del, tc.set, tc.del)
			}
		})
	}
}

func TestKeepRestarting(t *testing.T) {
	installed := Routes{p1: {n2}, p2: {n2, n3}, own: {n3}}
	for _, tc := range []struct {
		name       string
		want       Routes
		restarting map[netip.Addr]bool
		out        string
	}{
		{"nobody restarting: withdrawals stand", Routes{p1: {n2}}, nil, "map[10.244.1.0/24:[198.18.0.2]]"},
		{"restarting peer's route kept", Routes{}, map[netip.Addr]bool{n2: true}, "map[10.244.1.0/24:[198.18.0.2]]"},
		{"ECMP kept only if every next hop restarts", Routes{}, map[netip.Addr]bool{n2: true, n3: true},
			"map[10.244.0.0/24:[198.18.0.3] 10.244.1.0/24:[198.18.0.2] 10.244.2.0/24:[198.18.0.2 198.18.0.3]]"},
		{"a wanted route is not overridden", Routes{p1: {n3}}, map[netip.Addr]bool{n2: true}, "map[10.244.1.0/24:[198.18.0.3]]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(KeepRestarting(tc.want, installed, tc.restarting)); got != tc.out {
				t.Errorf("KeepRestarting = %s, want %s", got, tc.out)
			}
		})
	}
}

// TestPathOfLinkLocalNextHop: a path whose only next hop is link-local (a router with no
// global address on the link) is reached through the link it came over, named by the zone of
// the link-local peer that sent it; from a peer with no interface it cannot be installed.
func TestPathOfLinkLocalNextHop(t *testing.T) {
	block := netip.MustParsePrefix("fd00:10:244:7::/64")
	nlri := bgp.NewIPv6AddrPrefix(64, block.Addr().String())
	path := func(global, linkLocal, from string) *api.Path {
		reach := bgp.NewPathAttributeMpReachNLRI(global, []bgp.AddrPrefixInterface{nlri})
		if linkLocal != "" {
			reach.LinkLocalNexthop = net.ParseIP(linkLocal)
		}
		p, err := apiutil.NewPath(nlri, false, []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), reach}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		p.NeighborIp = from
		return p
	}
	for _, tc := range []struct {
		name                    string
		global, linkLocal, from string
		want                    string // "" when the path has no usable next hop
	}{
		{"global", "2001:2::3", "", "2001:2::fe", "2001:2::3"},
		{"global beside link-local", "2001:2::3", "fe80::3", "fe80::fe%eth1", "2001:2::3"},
		{"link-local only, from a link-local peer", "::", "fe80::fe", "fe80::fe%eth1", "fe80::fe%eth1"},
		{"link-local in the global field", "fe80::fe", "", "fe80::fe%eth1", "fe80::fe%eth1"},
		{"link-local from a global peer", "::", "fe80::fe", "2001:2::fe", ""},
	} {
		got, ok := PathOf(block, path(tc.global, tc.linkLocal, tc.from))
		if tc.want == "" {
			if ok {
				t.Errorf("%s: next hop %s, want none usable", tc.name, got.NextHop)
			}
			continue
		}
		if !ok || got.NextHop.String() != tc.want {
			t.Errorf("%s: next hop %v (%v), want %s", tc.name, got.NextHop, ok, tc.want)
		}
	}
	// Selection keeps a link-local next hop like any other.
	if r := Select([]Path{{Prefix: block, NextHop: netip.MustParseAddr("fe80::fe%eth1"), LocalPref: 100}}, nil, netip.MustParseAddr("2001:2::2")); len(r[block]) != 1 {
		t.Errorf("Select dropped the link-local next hop: %v", r)
	}
}
