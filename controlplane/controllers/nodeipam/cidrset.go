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

// NewCIDRSet splits cluster into blocks of maskSize bits (10.244.0.0/16 into /24s).
func NewCIDRSet(cluster string, maskSize int) (*CIDRSet, error) {
	p, err := netip.ParsePrefix(cluster)
	if err != nil {
		return nil, fmt.Errorf("cluster CIDR %q: %w", cluster, err)
	}
	p = p.Masked()
	if !p.Addr().Is4() {
		return nil, fmt.Errorf("cluster CIDR %q: only IPv4 is supported", cluster)
	}
	if maskSize < p.Bits() || maskSize > 30 {
		return nil, fmt.Errorf("node CIDR mask size %d must be between %d and 30", maskSize, p.Bits())
	}
	if maskSize-p.Bits() > 16 {
		return nil, fmt.Errorf("cluster CIDR %s with /%d blocks has too many blocks", cluster, maskSize)
	}
	return &CIDRSet{cluster: p, maskSize: maskSize, used: make([]bool, 1<<(maskSize-p.Bits()))}, nil
}

func (s *CIDRSet) block(i int) netip.Prefix {
	a := s.cluster.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += uint32(i) << (32 - s.maskSize)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), s.maskSize)
}

func (s *CIDRSet) index(cidr string) (int, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return 0, err
	}
	if p.Bits() != s.maskSize || !s.cluster.Contains(p.Addr()) || p.Masked() != p {
		return 0, fmt.Errorf("%s is not a /%d block of %s", cidr, s.maskSize, s.cluster)
	}
	a, c := p.Addr().As4(), s.cluster.Addr().As4()
	off := (uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])) -
		(uint32(c[0])<<24 | uint32(c[1])<<16 | uint32(c[2])<<8 | uint32(c[3]))
	return int(off >> (32 - s.maskSize)), nil
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
