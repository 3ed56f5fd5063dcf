package lbipam

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func a(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestAllocate(t *testing.T) {
	pools := []netip.Prefix{netip.MustParsePrefix("198.18.200.0/30"), netip.MustParsePrefix("10.9.9.9/32")}
	for _, c := range []struct {
		name  string
		pools []netip.Prefix
		wants []Want
		want  map[string]string // key → address or "error: …" fragment
	}{
		{"the lowest free, skipping the network address", pools, []Want{{Key: "a", Order: "1"}},
			map[string]string{"a": "198.18.200.1"}},
		{"in order, then the next pool (a /32 is its own address)", pools,
			[]Want{{Key: "c", Order: "3"}, {Key: "a", Order: "1"}, {Key: "b", Order: "2"}},
			map[string]string{"a": "198.18.200.1", "b": "198.18.200.2", "c": "10.9.9.9"}},
		{"exhausted", pools, []Want{{Key: "a", Order: "1"}, {Key: "b", Order: "2"}, {Key: "c", Order: "3"}, {Key: "d", Order: "4"}},
			map[string]string{"a": "198.18.200.1", "b": "198.18.200.2", "c": "10.9.9.9", "d": "error: no free address in the LoadBalancer pools (198.18.200.0/30, 10.9.9.9/32)"}},
		{"a held address is kept, whatever the order", pools,
			[]Want{{Key: "new", Order: "1"}, {Key: "old", Order: "2", Current: a("198.18.200.1")}},
			map[string]string{"old": "198.18.200.1", "new": "198.18.200.2"}},
		{"a request granted", pools, []Want{{Key: "a", Order: "1", Requested: a("198.18.200.2")}, {Key: "b", Order: "2"}},
			map[string]string{"a": "198.18.200.2", "b": "198.18.200.1"}},
		{"the same address asked twice: the older gets it, the newer is refused", pools,
			[]Want{{Key: "b", Order: "2", Requested: a("198.18.200.2")}, {Key: "a", Order: "1", Requested: a("198.18.200.2")}},
			map[string]string{"a": "198.18.200.2", "b": "error: loadBalancerIP 198.18.200.2 is already allocated to a"}},
		{"a request held by another's running address is refused", pools,
			[]Want{{Key: "old", Order: "2", Current: a("198.18.200.1")}, {Key: "new", Order: "1", Requested: a("198.18.200.1")}},
			map[string]string{"old": "198.18.200.1", "new": "error: already allocated to old"}},
		{"a request outside the pools", pools, []Want{{Key: "a", Order: "1", Requested: a("192.0.2.1")}},
			map[string]string{"a": "error: loadBalancerIP 192.0.2.1 is in no LoadBalancer pool"}},
		{"a request changed: the new address replaces the held one", pools,
			[]Want{{Key: "a", Order: "1", Current: a("198.18.200.1"), Requested: a("198.18.200.2")}},
			map[string]string{"a": "198.18.200.2"}},
		{"a held address whose pool went is replaced", []netip.Prefix{netip.MustParsePrefix("198.18.201.0/24")},
			[]Want{{Key: "a", Order: "1", Current: a("198.18.200.1")}}, map[string]string{"a": "198.18.201.1"}},
		{"no pools", nil, []Want{{Key: "a", Order: "1"}}, map[string]string{"a": "error: none configured"}},
		{"a /31 uses both addresses", []netip.Prefix{netip.MustParsePrefix("198.18.200.0/31")},
			[]Want{{Key: "a", Order: "1"}, {Key: "b", Order: "2"}}, map[string]string{"a": "198.18.200.0", "b": "198.18.200.1"}},
		{"an IPv6 pool skips its subnet-router anycast address only, its last address is used", []netip.Prefix{netip.MustParsePrefix("2001:2:0:200::/126")},
			[]Want{{Key: "a", Order: "1"}, {Key: "b", Order: "2"}, {Key: "c", Order: "3"}, {Key: "d", Order: "4"}},
			map[string]string{"a": "2001:2:0:200::1", "b": "2001:2:0:200::2", "c": "2001:2:0:200::3", "d": "error: no free address"}},
		{"an IPv6 /128 is its own address", []netip.Prefix{netip.MustParsePrefix("2001:2:0:200::9/128")},
			[]Want{{Key: "a", Order: "1"}}, map[string]string{"a": "2001:2:0:200::9"}},
	} {
		got := Allocate(c.pools, c.wants)
		if len(got) != len(c.want) {
			t.Errorf("%s: %d results, want %d: %v", c.name, len(got), len(c.want), got)
		}
		for k, w := range c.want {
			r := got[k]
			text := r.Addr.String()
			if r.Err != nil {
				text = "error: " + r.Err.Error()
			}
			if strings.HasPrefix(w, "error: ") {
				if r.Err == nil || !strings.Contains(text, strings.TrimPrefix(w, "error: ")) {
					t.Errorf("%s: %s got %s, want %s", c.name, k, text, w)
				}
			} else if text != w {
				t.Errorf("%s: %s got %s, want %s", c.name, k, text, w)
			}
		}
	}
}

// TestAllocateNeverDoubles allocates for many Services with mixed requests and held
// addresses and checks no address is given twice and every given one is in a pool.
func TestAllocateNeverDoubles(t *testing.T) {
	pools := []netip.Prefix{netip.MustParsePrefix("198.18.200.0/26")}
	var wants []Want
	for i := 0; i < 80; i++ {
		w := Want{Key: fmt.Sprintf("s%02d", i), Order: fmt.Sprintf("%02d", (i*37)%80)}
		switch i % 4 {
		case 1:
			w.Requested = netip.AddrFrom4([4]byte{198, 18, 200, byte(i % 70)})
		case 2:
			w.Current = netip.AddrFrom4([4]byte{198, 18, 200, byte(i % 50)})
		}
		wants = append(wants, w)
	}
	seen := map[netip.Addr]string{}
	granted := 0
	for k, r := range Allocate(pools, wants) {
		if r.Err != nil {
			continue
		}
		granted++
		if other, dup := seen[r.Addr]; dup {
			t.Errorf("%s given to %s and %s", r.Addr, other, k)
		}
		seen[r.Addr] = k
		if !pools[0].Contains(r.Addr) {
			t.Errorf("%s outside the pool", r.Addr)
		}
	}
	if granted < 62 { // a /26 has 62 usable addresses, all given out
		t.Errorf("only %d addresses granted for 80 Services in a /26", granted)
	}
}
