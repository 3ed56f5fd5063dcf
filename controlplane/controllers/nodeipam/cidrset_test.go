package nodeipam

import (
	"errors"
	"net/netip"
	"testing"
)

func TestCIDRSetAllocatesEachBlockOnce(t *testing.T) {
	s, err := NewCIDRSet("10.244.0.0/16", 24)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Occupy("10.244.1.0/24"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{"10.244.1.0/24": true}
	for i := 0; i < 255; i++ {
		b, err := s.AllocateNext()
		if err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
		if seen[b] {
			t.Fatalf("block %s handed out twice", b)
		}
		seen[b] = true
	}
	if _, err := s.AllocateNext(); !errors.Is(err, ErrCIDRSetFull) {
		t.Fatalf("full set: %v", err)
	}
	if err := s.Release("10.244.7.0/24"); err != nil {
		t.Fatal(err)
	}
	if b, err := s.AllocateNext(); err != nil || b != "10.244.7.0/24" {
		t.Fatalf("after release: %s %v", b, err)
	}
}

func TestCIDRSetFirstBlocksAndValidation(t *testing.T) {
	s, _ := NewCIDRSet("10.244.0.0/16", 24)
	for _, want := range []string{"10.244.0.0/24", "10.244.1.0/24", "10.244.2.0/24"} {
		if got, _ := s.AllocateNext(); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	}
	for _, bad := range []string{"10.245.0.0/24", "10.244.0.0/25", "10.244.0.1/24", "junk"} {
		if err := s.Occupy(bad); err == nil {
			t.Errorf("Occupy(%q) accepted", bad)
		}
	}
	for _, tc := range []struct {
		cidr string
		mask int
	}{{"10.244.0.0/16", 8}, {"10.244.0.0/16", 31}, {"fd00::/64", 60}, {"fd00::/48", 127}, {"fd00::/40", 64}, {"x", 24}, {"10.0.0.0/8", 30}} {
		if _, err := NewCIDRSet(tc.cidr, tc.mask); err == nil {
			t.Errorf("NewCIDRSet(%s, %d) accepted", tc.cidr, tc.mask)
		}
	}
	small, _ := NewCIDRSet("10.0.0.0/23", 24)
	a, _ := small.AllocateNext()
	b, _ := small.AllocateNext()
	if a != "10.0.0.0/24" || b != "10.0.1.0/24" {
		t.Fatalf("small set: %s %s", a, b)
	}
}

func TestCIDRSetIPv6(t *testing.T) {
	s, err := NewCIDRSet("fd00:10:244::/56", 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"fd00:10:244::/64", "fd00:10:244:1::/64", "fd00:10:244:2::/64"} {
		if got, _ := s.AllocateNext(); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	}
	if err := s.Occupy("fd00:10:244:ff::/64"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"fd00:10:245::/64", "fd00:10:244::/65", "fd00:10:244:100::/64", "10.244.0.0/24"} {
		if err := s.Occupy(bad); err == nil {
			t.Errorf("Occupy(%q) accepted", bad)
		}
	}
	if s.Family() != 6 {
		t.Errorf("family %d", s.Family())
	}
}

// TestCIDRSetBlocksRoundTrip: every block number of sets in both families and at odd
// boundaries (blocks not on byte edges) is a block of the cluster that index reads back.
func TestCIDRSetBlocksRoundTrip(t *testing.T) {
	for _, c := range []struct {
		cidr string
		mask int
	}{{"10.244.0.0/16", 24}, {"10.0.0.0/13", 27}, {"10.244.0.0/23", 24}, {"fd00:10:244::/56", 64}, {"fd00::/50", 61}, {"2001:db8:0:ff00::/56", 70}} {
		s, err := NewCIDRSet(c.cidr, c.mask)
		if err != nil {
			t.Fatal(err)
		}
		cluster := netip.MustParsePrefix(c.cidr)
		seen := map[netip.Prefix]bool{}
		for i := range s.used {
			b := s.block(i)
			if !cluster.Contains(b.Addr()) || b.Masked() != b || seen[b] {
				t.Fatalf("%s/%d: block %d is %s", c.cidr, c.mask, i, b)
			}
			seen[b] = true
			if j, err := s.index(b.String()); err != nil || j != i {
				t.Fatalf("%s/%d: index(%s) = %d %v, want %d", c.cidr, c.mask, b, j, err, i)
			}
		}
	}
}
