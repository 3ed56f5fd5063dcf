package policy

import "net/netip"

// Host is the identity of the node's own addresses: the node reaches its pods whatever
// their policies (probes, the agent), and its pods reach its cluster DNS resolver.
const Host Identity = 1

// DNSPort is the node's cluster DNS resolver's port, which egress-isolated pods still reach.
const DNSPort = 53

// Lookup is what a decision reads: the compiler's Result, or a node's live maps (what
// `skiff policy trace` reads). The eBPF program reads the same maps in the same order.
type Lookup interface {
	// Isolation says whether endpoint is a policed pod here and in which directions its
	// policies select it (ok false: not a pod here).
	Isolation(endpoint netip.Addr) (iso Isolation, ok bool)
	// PeerIdentity is addr's pod (or Host) identity, World when it is neither.
	PeerIdentity(addr netip.Addr) Identity
	// CIDRIdentity is the identity of the longest ipBlock prefix holding addr.
	CIDRIdentity(addr netip.Addr) (Identity, bool)
	// Admits is the LPM lookup on the port: the policy of the entry with the most port bits
	// covering port that admits peer on proto in dir at endpoint.
	Admits(endpoint netip.Addr, dir Direction, proto uint8, peer Identity, port uint16) (policy string, ok bool)
	// Tier is the LPM lookup of a ClusterNetworkPolicy tier's entries (dir carries the
	// tier): the first matching rule among those of the entry with the most port bits.
	Tier(endpoint netip.Addr, dir Direction, proto uint8, peer Identity, port uint16) (TierValue, bool)
}

// Isolation is which policies select an endpoint in each direction: enforced ones isolate
// it, audit-mode ones only report what they would drop.
type Isolation struct {
	Ingress, Egress           bool
	AuditIngress, AuditEgress bool
	// Admin…, Baseline…: ClusterNetworkPolicies of the tier select it in that direction.
	AdminIngress, AdminEgress       bool
	BaselineIngress, BaselineEgress bool
}

// In says whether the endpoint is isolated in dir (with Audit: selected by audit-mode
// policies in that direction).
func (i Isolation) In(dir Direction) bool {
	switch dir {
	case Ingress:
		return i.Ingress
	case Egress:
		return i.Egress
	case Ingress | Audit:
		return i.AuditIngress
	case Egress | Audit:
		return i.AuditEgress
	case Ingress | AdminTier:
		return i.AdminIngress
	case Egress | AdminTier:
		return i.AdminEgress
	case Ingress | BaselineTier:
		return i.BaselineIngress
	case Egress | BaselineTier:
		return i.BaselineEgress
	}
	return false
}

// Reason says why a verdict is what it is.
type Reason uint8

// Reasons.
const (
	NotIsolated    Reason = iota // no policy selects the endpoint in that direction
	FromNode                     // ingress from the node itself
	ToNodeDNS                    // egress to the node's own cluster DNS resolver
	Admitted                     // a rule admits the peer
	NoRule                       // isolated, and no rule admits the peer
	AdminAccept                  // an Admin-tier ClusterNetworkPolicy rule accepts it
	AdminDeny                    // an Admin-tier rule denies it
	BaselineAccept               // a Baseline-tier rule accepts it (no NetworkPolicy selects the pod)
	BaselineDeny                 // a Baseline-tier rule denies it
)

// Verdict is a decision and what made it.
type Verdict struct {
	Allowed bool
	// Isolated is true when some policy selects the endpoint in that direction.
	Isolated bool
	Reason   Reason
	// Policy admitted the traffic (Reason Admitted).
	Policy string
	// Peer is the identity a rule matched (Admitted), else the peer's pod identity.
	Peer Identity
	// Audited: allowed, and the audit-mode policies selecting the endpoint (it is not
	// isolated by enforced ones) would have dropped it.
	Audited bool
	// Tier is the ClusterNetworkPolicy rule that decided (Reason Admin… or Baseline…), and
	// PassedBy an Admin-tier rule that passed it on to the next tier.
	Tier, PassedBy TierValue
}

// Decide is the datapath's decision on a new connection, in Go: would endpoint admit, in
// dir, traffic with peer on proto/port? A peer is matched as anyone, by its pod identity and
// by its CIDR identity; a rule for one protocol admits no other.
func Decide(l Lookup, endpoint netip.Addr, dir Direction, peer netip.Addr, proto uint8, port uint16) Verdict {
	iso, ok := l.Isolation(endpoint)
	if !ok {
		return Verdict{Allowed: true, Reason: NotIsolated}
	}
	id := l.PeerIdentity(peer)
	// The node's own traffic passes whatever any policy says.
	if iso.In(dir) || iso.In(dir|AdminTier) || iso.In(dir|BaselineTier) {
		if r := exemption(dir, id, proto, port); r != NotIsolated {
			return Verdict{Allowed: true, Isolated: iso.In(dir), Reason: r, Peer: id}
		}
	}
	var passed TierValue
	if iso.In(dir | AdminTier) {
		if v, ok := tierLookup(l, endpoint, dir|AdminTier, peer, id, proto, port); ok {
			switch v.Action() {
			case Accept:
				return Verdict{Allowed: true, Isolated: iso.In(dir), Reason: AdminAccept, Tier: v, Peer: id}
			case Deny:
				return Verdict{Isolated: iso.In(dir), Reason: AdminDeny, Tier: v, Peer: id}
			default:
				passed = v
			}
		}
	}
	if iso.In(dir) {
		v := decideIsolated(l, endpoint, dir, peer, proto, port)
		v.PassedBy = passed
		return v
	}
	if iso.In(dir | BaselineTier) {
		if v, ok := tierLookup(l, endpoint, dir|BaselineTier, peer, id, proto, port); ok {
			if v.Action() == Accept {
				return Verdict{Allowed: true, Reason: BaselineAccept, Tier: v, Peer: id, PassedBy: passed}
			}
			return Verdict{Reason: BaselineDeny, Tier: v, Peer: id, PassedBy: passed}
		}
	}
	v := Verdict{Allowed: true, Reason: NotIsolated, PassedBy: passed}
	// Audit-mode policies alone select it: would they have dropped this?
	if iso.In(dir|Audit) && exemption(dir, id, proto, port) == NotIsolated {
		v.Audited = !decideIsolated(l, endpoint, dir|Audit, peer, proto, port).Allowed
	}
	return v
}

// exemption is why the node's traffic passes (NotIsolated: it is not the node's): ingress
// from the node itself, egress to its DNS resolver.
func exemption(dir Direction, id Identity, proto uint8, port uint16) Reason {
	switch {
	case dir&Egress == 0 && id == Host:
		return FromNode
	case dir&Egress != 0 && id == Host && port == DNSPort && (proto == TCP || proto == UDP):
		return ToNodeDNS
	}
	return NotIsolated
}

// tierLookup is the first rule of a tier matching the peer (as anyone, by its pod identity,
// by its CIDR identity) on proto and port: the lowest value of the six lookups the program
// makes.
func tierLookup(l Lookup, endpoint netip.Addr, dir Direction, peer netip.Addr, id Identity, proto uint8, port uint16) (TierValue, bool) {
	peers := []Identity{AnyPeer, id}
	if cid, ok := l.CIDRIdentity(peer); ok {
		peers = append(peers, cid)
	}
	var best TierValue
	for _, p := range peers {
		for _, pr := range []uint8{proto, AnyProtocol} {
			if v, ok := l.Tier(endpoint, dir, pr, p, port); ok && (best == 0 || v < best) {
				best = v
			}
		}
	}
	return best, best != 0
}

// decideIsolated decides for an endpoint isolated in dir (with Audit: by the audit-mode
// policies' rules).
func decideIsolated(l Lookup, endpoint netip.Addr, dir Direction, peer netip.Addr, proto uint8, port uint16) Verdict {
	id := l.PeerIdentity(peer)
	peers := []Identity{AnyPeer, id}
	if cid, ok := l.CIDRIdentity(peer); ok {
		peers = append(peers, cid)
	}
	for _, p := range peers {
		for _, pr := range []uint8{proto, AnyProtocol} {
			if name, ok := l.Admits(endpoint, dir, pr, p, port); ok {
				return Verdict{Allowed: true, Isolated: true, Reason: Admitted, Policy: name, Peer: p}
			}
		}
	}
	return Verdict{Isolated: true, Reason: NoRule, Peer: id}
}

// Decide is Decide over the compiled result.
func (r *Result) Decide(endpoint netip.Addr, dir Direction, peer netip.Addr, proto uint8, port uint16) Verdict {
	return Decide(r, endpoint, dir, peer, proto, port)
}

// Isolation implements Lookup.
func (r *Result) Isolation(endpoint netip.Addr) (Isolation, bool) {
	ep, ok := r.Endpoints[endpoint]
	return Isolation{Ingress: ep.Ingress, Egress: ep.Egress, AuditIngress: ep.AuditIngress, AuditEgress: ep.AuditEgress,
		AdminIngress: ep.AdminIngress, AdminEgress: ep.AdminEgress, BaselineIngress: ep.BaselineIngress, BaselineEgress: ep.BaselineEgress}, ok
}

// Tier implements Lookup: the LPM lookup on the port over the compiled tier entries.
func (r *Result) Tier(endpoint netip.Addr, dir Direction, proto uint8, peer Identity, port uint16) (TierValue, bool) {
	return longestPrefix(r.TierEntries, Key{Endpoint: endpoint, Direction: dir, Protocol: proto, Peer: peer}, port)
}

// longestPrefix is the entry of m for key with the most port bits covering port, as the
// programs' LPM lookups find it.
func longestPrefix[V any](m map[Key]V, key Key, port uint16) (V, bool) {
	for bits := 16; bits >= 0; bits-- {
		key.Port, key.PortBits = port, uint8(bits)
		if bits < 16 {
			key.Port = port &^ (uint16(1)<<(16-bits) - 1)
		}
		if bits == 0 {
			key.Port = 0
		}
		if v, ok := m[key]; ok {
			return v, true
		}
	}
	var none V
	return none, false
}

// PeerIdentity is the pod identity of addr, World if it is no pod's (the compiler does not
// know the node's addresses: Host comes from the maps).
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

// Admits implements Lookup: the LPM lookup on the port over the compiled entries.
func (r *Result) Admits(endpoint netip.Addr, dir Direction, proto uint8, peer Identity, port uint16) (string, bool) {
	return longestPrefix(r.Entries, Key{Endpoint: endpoint, Direction: dir, Protocol: proto, Peer: peer}, port)
}
