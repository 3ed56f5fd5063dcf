// Package hostaddr picks this machine's address where none is given: the node's address of
// an agent, the address the API server advertises.
package hostaddr

import "net"

// First is the first non-loopback IPv4 address of this machine's interfaces, 127.0.0.1 when
// there is none.
func First() net.IP {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.To4()
		}
	}
	return net.IPv4(127, 0, 0, 1).To4()
}
