package allocator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

type memStore struct {
	mu   sync.Mutex
	held map[string]string
}

func (m *memStore) Reserve(_ context.Context, key, owner string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.held[key]; ok {
		return false, nil
	}
	m.held[key] = owner
	return true, nil
}

func (m *memStore) Release(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.held, key)
	return nil
}

func TestIPRange(t *testing.T) {
	r, err := NewIPRange("10.96.0.0/12")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Size(), 1<<20-2; got != want {
		t.Errorf("size = %d, want %d", got, want)
	}
	if got := r.First(); got != "10.96.0.1" {
		t.Errorf("first = %s", got)
	}
	if got := r.Value(r.Size() - 1); got != "10.111.255.254" {
		t.Errorf("last = %s", got)
	}
	for _, tc := range []struct {
		ip string
		ok bool
	}{{"10.96.0.10", true}, {"10.96.0.0", false}, {"10.111.255.255", false}, {"10.112.0.1", false}, {"junk", false}} {
		if _, ok := r.Offset(tc.ip); ok != tc.ok {
			t.Errorf("Offset(%s) ok = %v, want %v", tc.ip, ok, tc.ok)
		}
	}
	if got := r.DynamicStart(); got != 256 {
		t.Errorf("dynamic start = %d", got)
	}
	if _, err := NewIPRange("10.0.0.0/31"); err == nil {
		t.Error("a /31 must be rejected")
	}
}

func TestCandidatesCoverRangeOnce(t *testing.T) {
	for _, tc := range []struct{ size, start, rnd int }{{10, 3, 0}, {10, 3, 6}, {5, 0, 4}, {5, 9, 2}, {1, 0, 0}} {
		got := Candidates(tc.size, tc.start, func(int) int { return tc.rnd })
		seen := map[int]bool{}
		for _, c := range got {
			if c < 0 || c >= tc.size || seen[c] {
				t.Fatalf("%+v: bad candidate list %v", tc, got)
			}
			seen[c] = true
		}
		if len(seen) != tc.size {
			t.Fatalf("%+v: covered %d of %d", tc, len(seen), tc.size)
		}
		if tc.start < tc.size && tc.size-tc.start > 0 && got[0] < tc.start {
			t.Errorf("%+v: dynamic allocation must start in the dynamic band, got %v", tc, got)
		}
	}
}

func TestAllocatorNoDuplicatesUntilFull(t *testing.T) {
	ctx := context.Background()
	r, _ := NewIPRange("10.0.0.0/28") // 14 addresses
	a := New(r, &memStore{held: map[string]string{}}, "/ips/")
	if err := a.Allocate(ctx, "10.0.0.10", "dns"); err != nil {
		t.Fatal(err)
	}
	if err := a.Allocate(ctx, "10.0.0.10", "other"); !errors.Is(err, ErrAllocated) {
		t.Fatalf("second allocation of the same IP: %v", err)
	}
	if err := a.Allocate(ctx, "10.0.1.1", "x"); !errors.Is(err, ErrNotInRange) {
		t.Fatalf("out of range: %v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]bool{}
	for i := 0; i < 13; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ip, err := a.AllocateNext(ctx, fmt.Sprint(i))
			mu.Lock()
			defer mu.Unlock()
			if err != nil || got[ip] || ip == "10.0.0.10" {
				t.Errorf("AllocateNext = %q, %v (dup=%v)", ip, err, got[ip])
			}
			got[ip] = true
		}()
	}
	wg.Wait()
	if _, err := a.AllocateNext(ctx, "overflow"); !errors.Is(err, ErrFull) {
		t.Fatalf("full range: %v", err)
	}
	if err := a.Release(ctx, "10.0.0.10"); err != nil {
		t.Fatal(err)
	}
	if ip, err := a.AllocateNext(ctx, "again"); err != nil || ip != "10.0.0.10" {
		t.Fatalf("after release: %q %v", ip, err)
	}
}

func TestPortRange(t *testing.T) {
	r, err := ParsePortRange("30000-32767")
	if err != nil {
		t.Fatal(err)
	}
	if r.Size() != 2768 || r.Value(0) != "30000" || r.Value(2767) != "32767" {
		t.Errorf("range %+v", r)
	}
	if _, ok := r.Offset("29999"); ok {
		t.Error("29999 is outside")
	}
	for _, bad := range []string{"", "5-1", "0-10", "1-70000", "a-b"} {
		if _, err := ParsePortRange(bad); err == nil {
			t.Errorf("ParsePortRange(%q) accepted", bad)
		}
	}
}

func TestParseServiceCIDRs(t *testing.T) {
	for _, c := range []struct {
		in, want, err string
	}{
		{in: "10.96.0.0/12", want: "[10.96.0.0/12]"},
		{in: "10.96.0.0/12,fd00:10:96::/108", want: "[10.96.0.0/12 fd00:10:96::/108]"},
		{in: "fd00:10:96::/108, 10.96.0.0/12", want: "[fd00:10:96::/108 10.96.0.0/12]"},
		{in: "10.96.0.0/12,10.112.0.0/12", err: "two of one IP family"},
		{in: "10.96.0.0/12,fd00::/108,fd01::/108", err: "at most two"},
		{in: "10.96.0.0/12,", err: "service CIDR \"\""},
	} {
		rs, err := ParseServiceCIDRs(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want an error with %q", c.in, err, c.err)
			}
			continue
		}
		var got []string
		for _, r := range rs {
			got = append(got, r.Prefix().String())
		}
		if err != nil || fmt.Sprint(got) != c.want {
			t.Errorf("%q: %v %v, want %s", c.in, got, err, c.want)
		}
	}
	r, _ := NewIPRange("fd00:10:96::/108")
	if r.First() != "fd00:10:96::1" || r.Size() != 1<<20-1 {
		t.Errorf("IPv6 range: first %s size %d", r.First(), r.Size())
	}
	if i, ok := r.Offset("fd00:10:96::a"); !ok || r.Value(i) != "fd00:10:96::a" {
		t.Errorf("IPv6 offset of fd00:10:96::a: %d %v", i, ok)
	}
	// A prefix wider than the 2^20 addresses used: an address far beyond them is out of
	// range, not read modulo 2^64 (fd00:0:0:1::5 is 2^64+5 from fd00::).
	wide, _ := NewIPRange("fd00::/48")
	for _, out := range []string{"fd00:0:0:1::5", "fd00::", "fd00::10:0"} {
		if i, ok := wide.Offset(out); ok {
			t.Errorf("%s is in fd00::/48's usable range at %d", out, i)
		}
	}
	if i, ok := wide.Offset("fd00::f:ffff"); !ok || i != wide.Size()-1 {
		t.Errorf("the last usable address: %d %v, want %d", i, ok, wide.Size()-1)
	}
}
