package policy

import "net/netip"

// Verdict is a decision and the policy that made it.
type Verdict struct {
	Allowed bool
	// Policy admitted the traffic ("" if the endpoint is not isolated in that direction).
	Policy string
	// Isolated is true when some policy selects the endpoint in that direction.
	Isolated bool
}

// Decide is the datapath's lookup, in Go: would endpoint admit, in dir, traffic with peer on
// proto/port? It is what `skiff policy trace` answers and what the eBPF program's tests
// compare with.
func (r *Result) Decide(endpoint netip.Addr, dir Direction, peer netip.Addr, proto uint8, port uint16) Verdict {
	ep, ok := r.Endpoints[endpoint]
	if !ok || (dir == Ingress && !ep.Ingress) || (dir == Egress && !ep.Egress) {
		return Verdict{Allowed: true}
	}
	peers := []Identity{AnyPeer, r.PeerIdentity(peer)}
	if id, ok := r.CIDRIdentity(peer); ok {
		peers = append(peers, id)
	}
	for _, id := range peers {
		for _, pr := range []uint8{proto, AnyProtocol} {
			if policy, ok := r.lookup(endpoint, dir, pr, id, port); ok {
				return Verdict{Allowed: true, Policy: policy, Isolated: true}
			}
		}
	}
	return Verdict{Isolated: true}
}

// PeerIdentity is the pod identity of addr, World if it is no pod's.
func (r *Result) PeerIdentity(addr netip.Addr) Identity {
	if id, ok := r.PodIdentities[addr]; ok {
		return id
	}
	return World
}

// CIDRIdentity is the identity of the longest ipBlock prefix holding addr.
func (r *Result) CIDRIdentity(addr netip.Addr) (Identity, bool) {
	best, bits := Identity(0), -1
	for p, id := range r.CIDRIdentities {
		if p.Contains(addr) && p.Bits() > bits {
			best, bits = id, p.Bits()
		}
	}
	return best, bits >= 0
}

// lookup is the LPM lookup on the port: the entry with the most port bits that covers port.
func (r *Result) lookup(endpoint netip.Addr, dir Direction, proto uint8, peer Identity, port uint16) (string, bool) {
	for bits := 16; bits >= 0; bits-- {
		pp := PortPrefix{Port: port, Bits: uint8(bits)}
		if bits < 16 {
			pp.Port = port &^ (uint16(1)<<(16-bits) - 1)
		}
		if bits == 0 {
			pp.Port = 0
		}
		if policy, ok := r.Entries[Key{Endpoint: endpoint, Direction: dir, Protocol: proto, Peer: peer, Port: pp.Port, PortBits: pp.Bits}]; ok {
			return policy, true
		}
	}
	return "", false
}
