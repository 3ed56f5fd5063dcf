// Package hostaddr picks this machine's address where none is given: the node's address of
// an agent, the address the API server advertises.
package hostaddr

import "net"

// First is the first non-loopback IPv4 address of this machine's interfaces, 127.0.0.1 when
// there is none.
func First() net.IP { return FirstOf(false) }

// FirstOf is the first address of a family on this machine's interfaces that other machines
// can reach — not loopback, not link-local — IPv6's when v6; the family's loopback address
// when there is none.
func FirstOf(v6 bool) net.IP {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || n.IP.IsLinkLocalUnicast() || (n.IP.To4() == nil) != v6 {
			continue
		}
		if !v6 {
			return n.IP.To4()
		}
		return n.IP
	}
	if v6 {
		return net.IPv6loopback
	}
	return net.IPv4(127, 0, 0, 1).To4()
}
