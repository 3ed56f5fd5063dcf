package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

type memStore struct {
	st   *State
	fail bool
}

func (m *memStore) Load() (*State, error) { return m.st, nil }
func (m *memStore) Save(st *State) error {
	if m.fail {
		return errors.New("disk full")
	}
	m.st = st
	return nil
}

func TestAllocateIdempotentAndExhaustion(t *testing.T) {
	a, err := New("10.244.1.0/29", &memStore{}) // .1 - .6 usable
	if err != nil {
		t.Fatal(err)
	}
	first, err := a.Allocate("c1", "default", "p1")
	if err != nil || first.IP != netip.MustParseAddr("10.244.1.1") {
		t.Fatalf("first allocation %v %v", first.IP, err)
	}
	again, _ := a.Allocate("c1", "default", "p1")
	if again.IP != first.IP {
		t.Fatalf("repeated ADD got %v, want %v", again.IP, first.IP)
	}
	for i := 2; i <= 6; i++ {
		al, err := a.Allocate(fmt.Sprint("c", i), "default", "p")
		if err != nil || al.IP != netip.MustParseAddr(fmt.Sprint("10.244.1.", i)) {
			t.Fatalf("allocation %d: %v %v", i, al.IP, err)
		}
	}
	if _, err := a.Allocate("c7", "", ""); !errors.Is(err, ErrExhausted) {
		t.Fatalf("7th address of a /29: %v (network and broadcast must stay free)", err)
	}
	if _, err := a.Allocate("", "", ""); err == nil {
		t.Fatal("empty container ID accepted")
	}
}

func TestReleaseReusesLongestFree(t *testing.T) {
	a, _ := New("10.244.1.0/29", &memStore{})
	for i := 1; i <= 6; i++ {
		if _, err := a.Allocate(fmt.Sprint("c", i), "", ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Release("c4"); err != nil {
		t.Fatal(err)
	}
	if err := a.Release("c2"); err != nil {
		t.Fatal(err)
	}
	if err := a.Release("c2"); err != nil {
		t.Fatal("second release must be a no-op")
	}
	x, _ := a.Allocate("x", "", "")
	y, _ := a.Allocate("y", "", "")
	if x.IP.String() != "10.244.1.4" || y.IP.String() != "10.244.1.2" {
		t.Fatalf("reuse order %v %v, want .4 (freed first) then .2", x.IP, y.IP)
	}
}

func TestPersistAcrossRestartAndCIDRChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipam.json")
	a, _ := New("10.244.1.0/24", FileStore{Path: path})
	p1, _ := a.Allocate("c1", "ns", "p1")
	p2, _ := a.Allocate("c2", "ns", "p2")
	b, err := New("10.244.1.0/24", FileStore{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := b.Get("c1"); !ok || got.IP != p1.IP || got.PodName != "p1" {
		t.Fatalf("after restart: %+v %v", got, ok)
	}
	if n, _ := b.Allocate("c3", "", ""); n.IP == p1.IP || n.IP == p2.IP {
		t.Fatalf("restart handed out a used address %v", n.IP)
	}
	c, _ := New("10.244.9.0/24", FileStore{Path: path})
	if len(c.Allocations()) != 0 {
		t.Fatalf("allocations outside the new block kept: %v", c.Allocations())
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New("10.244.9.0/24", FileStore{Path: path}); err == nil {
		t.Fatal("corrupt state accepted")
	}
}

func TestFailedSaveLosesNothing(t *testing.T) {
	m := &memStore{}
	a, _ := New("10.244.1.0/24", m)
	a.Allocate("c1", "", "")
	m.fail = true
	if _, err := a.Allocate("c2", "", ""); err == nil {
		t.Fatal("allocation reported ok although it was not persisted")
	}
	if _, ok := a.Get("c2"); ok {
		t.Fatal("unpersisted allocation kept in memory")
	}
	if err := a.Release("c1"); err == nil {
		t.Fatal("release reported ok although it was not persisted")
	}
	if _, ok := a.Get("c1"); !ok {
		t.Fatal("failed release dropped the allocation")
	}
}

func TestBadCIDRs(t *testing.T) {
	for _, c := range []string{"", "junk", "fd00::/127", "fd00::1/128", "::ffff:10.0.0.0/120", "10.0.0.0/31", "10.0.0.0/32"} {
		if _, err := New(c, &memStore{}); err == nil {
			t.Errorf("New(%q) accepted", c)
		}
	}
}

func TestIPv6BlockIsNotWalked(t *testing.T) {
	a, err := New("fd00:10:244:1::/64", &memStore{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		al, err := a.Allocate(fmt.Sprint("c", i), "", "")
		if err != nil || al.IP != netip.MustParseAddr(fmt.Sprint("fd00:10:244:1::", i)) {
			t.Fatalf("allocation %d: %v %v", i, al.IP, err)
		}
	}
	if err := a.Release("c2"); err != nil {
		t.Fatal(err)
	}
	// A never-used address comes before the freed one, as in IPv4.
	if al, _ := a.Allocate("c4", "", ""); al.IP != netip.MustParseAddr("fd00:10:244:1::4") {
		t.Fatalf("after a release got %v, want the never-used ::4", al.IP)
	}
}

func TestSmallIPv6Block(t *testing.T) {
	a, err := New("fd00::/126", &memStore{}) // ::1 and ::2 usable
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		if _, err := a.Allocate(fmt.Sprint("c", i), "", ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Allocate("c3", "", ""); !errors.Is(err, ErrExhausted) {
		t.Fatalf("third address of a /126: %v", err)
	}
	_ = a.Release("c1")
	if al, err := a.Allocate("c3", "", ""); err != nil || al.IP != netip.MustParseAddr("fd00::1") {
		t.Fatalf("after a release: %v %v", al.IP, err)
	}
}

func TestNodeDualStack(t *testing.T) {
	stores := map[bool]*memStore{false: {}, true: {}}
	n, err := NewNode([]string{"fd00:10:244:1::/64", "10.244.1.0/30"}, func(v6 bool) Store { return stores[v6] })
	if err != nil {
		t.Fatal(err)
	}
	als, err := n.Allocate("c1", "default", "p1")
	if err != nil || len(als) != 2 || als[0].IP != netip.MustParseAddr("fd00:10:244:1::1") || als[1].IP != netip.MustParseAddr("10.244.1.1") {
		t.Fatalf("dual-stack allocation %+v %v (want the IPv6 block's first: it is the node's primary)", als, err)
	}
	if _, err := n.Allocate("c2", "", ""); err != nil {
		t.Fatal(err)
	}
	// The IPv4 /30 is full now: a third pod gets nothing, and its IPv6 address goes back.
	if _, err := n.Allocate("c3", "", ""); !errors.Is(err, ErrExhausted) {
		t.Fatalf("third pod on a /30: %v", err)
	}
	if _, ok := n.Get("c3"); ok {
		t.Fatal("a failed allocation kept its IPv6 address")
	}
	// A repeated ADD gets the same addresses; a failure on it keeps them.
	again, err := n.Allocate("c1", "", "")
	if err != nil || again[0].IP != als[0].IP || again[1].IP != als[1].IP {
		t.Fatalf("repeated ADD: %+v %v", again, err)
	}
	if err := n.Release("c1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Get("c1"); ok {
		t.Fatal("released sandbox still has addresses")
	}
	if got := len(n.Allocations()); got != 2 {
		t.Fatalf("%d allocations left, want c2's two", got)
	}
	if _, err := NewNode([]string{"10.244.1.0/24", "10.245.1.0/24"}, func(bool) Store { return &memStore{} }); err == nil {
		t.Fatal("two IPv4 blocks accepted")
	}
	if _, err := NewNode(nil, func(bool) Store { return &memStore{} }); err == nil {
		t.Fatal("no block accepted")
	}
}
