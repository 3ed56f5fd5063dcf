package ipam

import (
	"errors"
	"fmt"
	"net/netip"
)

// Node is a node's allocators, one per pod CIDR in the node's order: a dual-stack node's pod
// gets an address from each block, the primary family's first (status.podIPs[0]).
type Node struct {
	blocks []*Allocator
}

// StoreFor is where the allocations of one family are kept.
type StoreFor func(ipv6 bool) Store

// NewNode loads an allocator per block; at most one block per family.
func NewNode(cidrs []string, store StoreFor) (*Node, error) {
	if len(cidrs) == 0 {
		return nil, errors.New("the node has no pod CIDR")
	}
	n := &Node{}
	seen := map[bool]string{}
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("pod CIDR %q: %w", c, err)
		}
		v6 := p.Addr().Is6()
		if other, dup := seen[v6]; dup {
			return nil, fmt.Errorf("pod CIDRs %q and %q are of one family; a node has at most one block per family", other, c)
		}
		seen[v6] = c
		a, err := New(c, store(v6))
		if err != nil {
			return nil, err
		}
		n.blocks = append(n.blocks, a)
	}
	return n, nil
}

// CIDRs are the node's blocks, primary first.
func (n *Node) CIDRs() []netip.Prefix {
	out := make([]netip.Prefix, len(n.blocks))
	for i, b := range n.blocks {
		out[i] = b.CIDR()
	}
	return out
}

// Allocate returns the sandbox's addresses, one per block, allocating what it lacks. It is
// all or nothing: when a block fails, what this call allocated in the others is released.
func (n *Node) Allocate(containerID, podNamespace, podName string) ([]Allocation, error) {
	var out []Allocation
	var fresh []*Allocator
	for _, b := range n.blocks {
		_, had := b.Get(containerID)
		al, err := b.Allocate(containerID, podNamespace, podName)
		if err != nil {
			for _, f := range fresh {
				_ = f.Release(containerID)
			}
			return nil, fmt.Errorf("%s: %w", b.CIDR(), err)
		}
		if !had {
			fresh = append(fresh, b)
		}
		out = append(out, al)
	}
	return out, nil
}

// Release frees the sandbox's addresses in every block; an unknown sandbox is not an error.
func (n *Node) Release(containerID string) error {
	var errs []error
	for _, b := range n.blocks {
		errs = append(errs, b.Release(containerID))
	}
	return errors.Join(errs...)
}

// Get returns the sandbox's addresses, primary first, if it has any.
func (n *Node) Get(containerID string) ([]Allocation, bool) {
	var out []Allocation
	for _, b := range n.blocks {
		if al, ok := b.Get(containerID); ok {
			out = append(out, al)
		}
	}
	return out, len(out) > 0
}

// Allocations lists every allocation of every block, by block then address.
func (n *Node) Allocations() []Allocation {
	var out []Allocation
	for _, b := range n.blocks {
		out = append(out, b.Allocations()...)
	}
	return out
}
