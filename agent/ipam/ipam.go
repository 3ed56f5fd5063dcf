// Package ipam hands out pod addresses from the node's blocks (Node.spec.podCIDRs, one per
// family in a dual-stack cluster): one address per family per pod sandbox, keyed by the
// sandbox's container ID so a repeated CNI ADD gets the same addresses and DEL is idempotent.
// Allocations are written through a Store, so an agent restart keeps every running pod's
// addresses.
//
// The first address of a block (the network address, IPv6's subnet-router anycast) and the
// last (IPv4's broadcast) are never handed out. Addresses never used come first, in order;
// then the longest-free, which keeps a just-freed address out of circulation as long as
// possible (stale conntrack or neighbour entries age out meanwhile). Neither walks the block:
// an IPv6 /64 has 2^64 addresses.
package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync"
)

// ErrExhausted means every address of the block is in use.
var ErrExhausted = errors.New("no free address in the node's pod CIDR")

// Allocation is one pod sandbox's address.
type Allocation struct {
	ContainerID  string     `json:"containerID"`
	IP           netip.Addr `json:"ip"`
	PodNamespace string     `json:"podNamespace,omitempty"`
	PodName      string     `json:"podName,omitempty"`
	// Seq orders allocations and frees, so reuse prefers the longest-free address.
	Seq uint64 `json:"seq"`
}

// State is what a Store persists.
type State struct {
	CIDR        string                `json:"cidr"`
	Allocations map[string]Allocation `json:"allocations"`
	// Freed remembers when each address was last released.
	Freed map[netip.Addr]uint64 `json:"freed,omitempty"`
	Seq   uint64                `json:"seq"`
}

// Store persists the state; Save must be atomic (write-then-rename for files).
type Store interface {
	Load() (*State, error)
	Save(*State) error
}

// Allocator allocates from one block.
type Allocator struct {
	mu    sync.Mutex
	cidr  netip.Prefix
	store Store
	state *State
}

// New loads the state for cidr, an IPv4 block of /30 or larger or an IPv6 block of /126 or
// larger. A state for another CIDR (the node got a new block) keeps only the allocations that
// still fit.
func New(cidr string, store Store) (*Allocator, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, fmt.Errorf("pod CIDR %q: %w", cidr, err)
	}
	p = p.Masked()
	if p.Addr().Is4In6() || p.Bits() > p.Addr().BitLen()-2 {
		return nil, fmt.Errorf("pod CIDR %q: need an IPv4 block of /30 or larger, or an IPv6 block of /126 or larger", cidr)
	}
	st, err := store.Load()
	if err != nil {
		return nil, err
	}
	if st == nil {
		st = &State{}
	}
	if st.Allocations == nil {
		st.Allocations = map[string]Allocation{}
	}
	if st.Freed == nil {
		st.Freed = map[netip.Addr]uint64{}
	}
	if st.CIDR != p.String() {
		for id, a := range st.Allocations {
			if !p.Contains(a.IP) {
				delete(st.Allocations, id)
			}
		}
		for ip := range st.Freed {
			if !p.Contains(ip) {
				delete(st.Freed, ip)
			}
		}
		st.CIDR = p.String()
	}
	return &Allocator{cidr: p, store: store, state: st}, nil
}

// CIDR is the block the allocator hands addresses out of.
func (a *Allocator) CIDR() netip.Prefix { return a.cidr }

func (a *Allocator) usable(ip netip.Addr) bool {
	if !a.cidr.Contains(ip) || ip == a.cidr.Addr() {
		return false
	}
	return ip.Next().IsValid() && a.cidr.Contains(ip.Next()) // not the last address
}

// pick is the address to hand out next: the lowest never used, else the longest-free. The
// walk from the block's start passes only used or freed addresses before it finds a never-used
// one, so it takes at most len(used)+len(freed)+1 steps (or the block's size, when full).
func (a *Allocator) pick(used map[netip.Addr]bool) (netip.Addr, bool) {
	for ip := a.cidr.Addr().Next(); a.usable(ip); ip = ip.Next() {
		if _, freed := a.state.Freed[ip]; !used[ip] && !freed {
			return ip, true
		}
	}
	var best netip.Addr
	var bestSeq uint64
	for ip, seq := range a.state.Freed {
		if used[ip] || !a.usable(ip) {
			continue
		}
		if !best.IsValid() || seq < bestSeq || seq == bestSeq && ip.Less(best) {
			best, bestSeq = ip, seq
		}
	}
	return best, best.IsValid()
}

// Allocate returns the sandbox's address, allocating one if it has none.
func (a *Allocator) Allocate(containerID, podNamespace, podName string) (Allocation, error) {
	if containerID == "" {
		return Allocation{}, errors.New("container ID is required")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if al, ok := a.state.Allocations[containerID]; ok {
		return al, nil
	}
	used := make(map[netip.Addr]bool, len(a.state.Allocations))
	for _, al := range a.state.Allocations {
		used[al.IP] = true
	}
	ip, ok := a.pick(used)
	if !ok {
		return Allocation{}, ErrExhausted
	}
	a.state.Seq++
	al := Allocation{ContainerID: containerID, IP: ip, PodNamespace: podNamespace, PodName: podName, Seq: a.state.Seq}
	a.state.Allocations[containerID] = al
	delete(a.state.Freed, al.IP)
	if err := a.store.Save(a.state); err != nil {
		delete(a.state.Allocations, containerID)
		return Allocation{}, fmt.Errorf("persist allocation: %w", err)
	}
	return al, nil
}

// Release frees the sandbox's address; releasing an unknown sandbox is not an error.
func (a *Allocator) Release(containerID string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	al, ok := a.state.Allocations[containerID]
	if !ok {
		return nil
	}
	delete(a.state.Allocations, containerID)
	a.state.Seq++
	a.state.Freed[al.IP] = a.state.Seq
	if err := a.store.Save(a.state); err != nil {
		a.state.Allocations[containerID] = al
		return fmt.Errorf("persist release: %w", err)
	}
	return nil
}

// Get returns the sandbox's allocation, if any.
func (a *Allocator) Get(containerID string) (Allocation, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	al, ok := a.state.Allocations[containerID]
	return al, ok
}

// Allocations lists every allocation, by address.
func (a *Allocator) Allocations() []Allocation {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Allocation, 0, len(a.state.Allocations))
	for _, al := range a.state.Allocations {
		out = append(out, al)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IP.Less(out[j].IP) })
	return out
}
