package nodeipam

import (
	"errors"
	"fmt"
	"net/netip"
)

// ErrCIDRSetFull means every node block of the cluster CIDR is in use.
var ErrCIDRSetFull = errors.New("no remaining node CIDRs in the cluster CIDR")

// CIDRSet carves a cluster CIDR into equal node blocks and tracks which are used. It is
// the allocation decision without I/O: the controller rebuilds it from the Node objects on
// every start, which is what keeps it correct across restarts and leader changes.
type CIDRSet struct {
	cluster  netip.Prefix
	maskSize int
	used     []bool
	next     int
}

// NewCIDRSet splits cluster into blocks of maskSize bits (10.244.0.0/16 into /24s,
// fd00:10:244::/56 into /64s). Upstream's limits hold: at most 2^16 blocks, and IPv4
// blocks of at most /30 (two usable addresses).
func NewCIDRSet(cluster string, maskSize int) (*CIDRSet, error) {
	p, err := netip.ParsePrefix(cluster)
	if err != nil {
		return nil, fmt.Errorf("cluster CIDR %q: %w", cluster, err)
	}
	p = p.Masked()
	maxMask := 30
	if p.Addr().Is6() {
		maxMask = 126
	}
	if maskSize < p.Bits() || maskSize > maxMask {
		return nil, fmt.Errorf("node CIDR mask size %d must be between %d and %d", maskSize, p.Bits(), maxMask)
	}
	if maskSize-p.Bits() > 16 {
		return nil, fmt.Errorf("cluster CIDR %s with /%d blocks has too many blocks", cluster, maskSize)
	}
	return &CIDRSet{cluster: p, maskSize: maskSize, used: make([]bool, 1<<(maskSize-p.Bits()))}, nil
}

// Family is the address family of the cluster CIDR's blocks: 4 or 6.
func (s *CIDRSet) Family() int {
	if s.cluster.Addr().Is4() {
		return 4
	}
	return 6
}

// block is the i-th block: i written into the bits between the cluster's prefix and the
// block's (they are zero in the masked cluster address), as index reads them back.
func (s *CIDRSet) block(i int) netip.Prefix {
	b := s.cluster.Addr().AsSlice()
	width := s.maskSize - s.cluster.Bits()
	for j := 0; j < width; j++ {
		if i>>(width-1-j)&1 == 1 {
			bit := s.cluster.Bits() + j
			b[bit/8] |= 1 << (7 - bit%8)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return netip.PrefixFrom(a, s.maskSize)
}

// index is the block number of a /maskSize block of the cluster CIDR.
func (s *CIDRSet) index(cidr string) (int, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return 0, err
	}
	if p.Bits() != s.maskSize || !s.cluster.Contains(p.Addr()) || p.Masked() != p {
		return 0, fmt.Errorf("%s is not a /%d block of %s", cidr, s.maskSize, s.cluster)
	}
	// The block number is the bits between the cluster's prefix and the block's.
	b := p.Addr().AsSlice()
	n := 0
	for bit := s.cluster.Bits(); bit < s.maskSize; bit++ {
		n = n<<1 | int(b[bit/8]>>(7-bit%8)&1)
	}
	return n, nil
}

// Occupy marks a block as used (a node already has it).
func (s *CIDRSet) Occupy(cidr string) error {
	i, err := s.index(cidr)
	if err != nil {
		return err
	}
	s.used[i] = true
	return nil
}

// Release frees a block.
func (s *CIDRSet) Release(cidr string) error {
	i, err := s.index(cidr)
	if err != nil {
		return err
	}
	s.used[i] = false
	return nil
}

// AllocateNext returns the next free block, searching round-robin from the last allocation.
func (s *CIDRSet) AllocateNext() (string, error) {
	for n := 0; n < len(s.used); n++ {
		i := (s.next + n) % len(s.used)
		if !s.used[i] {
			s.used[i] = true
			s.next = (i + 1) % len(s.used)
			return s.block(i).String(), nil
		}
	}
	return "", ErrCIDRSetFull
}
