// Package allocator hands out Service ClusterIPs from the service CIDR and NodePorts from the
// node-port range without duplicates, across every API server of the cluster. Each allocated
// value is a reservation record in a Store (etcd in production: one key per value, created
// with a compare-and-swap), so two API servers can never hand out the same address.
//
// Picking is pure: Range.Candidates yields the order in which values are tried, and the
// caller's Store decides which are free.
package allocator

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
)

// ErrFull means every value of the range is taken.
var ErrFull = errors.New("range is full")

// ErrAllocated means a specifically requested value is taken.
var ErrAllocated = errors.New("provided value is already allocated")

// ErrNotInRange means a requested value lies outside the range.
var ErrNotInRange = errors.New("provided value is not in the valid range")

// Store keeps reservations. Reserve must be atomic: it returns false if key is held already.
type Store interface {
	Reserve(ctx context.Context, key, owner string) (bool, error)
	Release(ctx context.Context, key string) error
}

// Range is a contiguous range of values, each rendered as a string key.
type Range interface {
	// Size is the number of values.
	Size() int
	// Value renders offset i (0 <= i < Size).
	Value(i int) string
	// Offset parses a value; ok is false if it is outside the range.
	Offset(v string) (int, bool)
	// DynamicStart is the first offset dynamic allocation uses; lower offsets are left for
	// values users ask for by hand (upstream's static band, e.g. 10.96.0.10 for DNS).
	DynamicStart() int
}

// Allocator reserves values of a Range in a Store under a key prefix.
type Allocator struct {
	r      Range
	store  Store
	prefix string
	rand   func(n int) int
}

// New returns an allocator for r whose reservations live under prefix in store.
func New(r Range, store Store, prefix string) *Allocator {
	return &Allocator{r: r, store: store, prefix: prefix, rand: rand.IntN}
}

// Allocate reserves a specific value for owner.
func (a *Allocator) Allocate(ctx context.Context, value, owner string) error {
	if _, ok := a.r.Offset(value); !ok {
		return ErrNotInRange
	}
	ok, err := a.store.Reserve(ctx, a.prefix+value, owner)
	if err != nil {
		return err
	}
	if !ok {
		return ErrAllocated
	}
	return nil
}

// AllocateNext reserves a free value for owner and returns it.
func (a *Allocator) AllocateNext(ctx context.Context, owner string) (string, error) {
	for _, i := range Candidates(a.r.Size(), a.r.DynamicStart(), a.rand) {
		v := a.r.Value(i)
		ok, err := a.store.Reserve(ctx, a.prefix+v, owner)
		if err != nil {
			return "", err
		}
		if ok {
			return v, nil
		}
	}
	return "", ErrFull
}

// Release frees a value; releasing a free value is not an error.
func (a *Allocator) Release(ctx context.Context, value string) error {
	if _, ok := a.r.Offset(value); !ok {
		return nil
	}
	return a.store.Release(ctx, a.prefix+value)
}

// Candidates returns the offsets to try, in order: the dynamic band from a random start,
// wrapping around, then the static band. Random starts keep concurrent API servers from
// racing for the same value.
func Candidates(size, dynamicStart int, randN func(int) int) []int {
	if size <= 0 {
		return nil
	}
	if dynamicStart >= size {
		dynamicStart = 0
	}
	out := make([]int, 0, size)
	band := size - dynamicStart
	start := randN(band)
	for i := 0; i < band; i++ {
		out = append(out, dynamicStart+(start+i)%band)
	}
	for i := 0; i < dynamicStart; i++ {
		out = append(out, i)
	}
	return out
}

// IPRange is the usable addresses of a CIDR: without the network address and, for IPv4, the
// broadcast address.
type IPRange struct {
	prefix netip.Prefix
	size   int
}

// NewIPRange parses a CIDR such as 10.96.0.0/12.
func NewIPRange(cidr string) (*IPRange, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, fmt.Errorf("service CIDR %q: %w", cidr, err)
	}
	p = p.Masked()
	hostBits := p.Addr().BitLen() - p.Bits()
	if hostBits < 2 {
		return nil, fmt.Errorf("service CIDR %q is too small", cidr)
	}
	if hostBits > 20 {
		hostBits = 20 // upstream caps the range at 2^20 addresses too
	}
	size := 1<<hostBits - 1
	if p.Addr().Is4() {
		size-- // broadcast
	}
	return &IPRange{prefix: p, size: size}, nil
}

// ParseServiceCIDRs parses --service-cidr: one CIDR, or two of different families (a
// dual-stack cluster), comma-separated, the primary family first.
func ParseServiceCIDRs(s string) ([]*IPRange, error) {
	var out []*IPRange
	for _, cidr := range strings.Split(s, ",") {
		r, err := NewIPRange(strings.TrimSpace(cidr))
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	switch {
	case len(out) > 2:
		return nil, fmt.Errorf("service CIDRs %q: at most two, one per IP family", s)
	case len(out) == 2 && out[0].prefix.Addr().Is4() == out[1].prefix.Addr().Is4():
		return nil, fmt.Errorf("service CIDRs %q: two of one IP family; a dual-stack cluster has one IPv4 and one IPv6", s)
	}
	return out, nil
}

// Prefix is the CIDR the range is of.
func (r *IPRange) Prefix() netip.Prefix { return r.prefix }

// Size implements Range.
func (r *IPRange) Size() int { return r.size }

// Value implements Range: offset 0 is the first address after the network address.
func (r *IPRange) Value(i int) string {
	base := new(big.Int).SetBytes(r.prefix.Addr().AsSlice())
	base.Add(base, big.NewInt(int64(i+1)))
	b := base.FillBytes(make([]byte, len(r.prefix.Addr().AsSlice())))
	a, _ := netip.AddrFromSlice(b)
	return a.String()
}

// Offset implements Range.
func (r *IPRange) Offset(v string) (int, bool) {
	a, err := netip.ParseAddr(v)
	if err != nil || !r.prefix.Contains(a) {
		return 0, false
	}
	d := new(big.Int).Sub(new(big.Int).SetBytes(a.AsSlice()), new(big.Int).SetBytes(r.prefix.Addr().AsSlice()))
	if d.Sign() <= 0 || d.Cmp(big.NewInt(int64(r.size))) > 0 {
		return 0, false // the network address, or beyond the usable range (which a wide IPv6 prefix is capped to)
	}
	return int(d.Int64()) - 1, true
}

// DynamicStart implements Range with upstream's formula: min(max(16, size/16), 256).
func (r *IPRange) DynamicStart() int { return min(max(16, r.size/16), 256) }

// First returns the first usable address (the kubernetes Service's).
func (r *IPRange) First() string { return r.Value(0) }

// PortRange is an inclusive range of ports such as 30000-32767.
type PortRange struct{ Base, Max int }

// Size implements Range.
func (r PortRange) Size() int { return r.Max - r.Base + 1 }

// Value implements Range.
func (r PortRange) Value(i int) string { return strconv.Itoa(r.Base + i) }

// Offset implements Range.
func (r PortRange) Offset(v string) (int, bool) {
	n, err := strconv.Atoi(v)
	return n - r.Base, err == nil && n >= r.Base && n <= r.Max
}

// DynamicStart implements Range with upstream's formula for ports: min(max(16, size/32), 128).
func (r PortRange) DynamicStart() int { return min(max(16, r.Size()/32), 128) }

// ParsePortRange parses "30000-32767".
func ParsePortRange(s string) (PortRange, error) {
	var r PortRange
	if _, err := fmt.Sscanf(s, "%d-%d", &r.Base, &r.Max); err != nil || r.Base < 1 || r.Max > 65535 || r.Base > r.Max {
		return r, fmt.Errorf("invalid port range %q: want BASE-MAX within 1-65535", s)
	}
	return r, nil
}
