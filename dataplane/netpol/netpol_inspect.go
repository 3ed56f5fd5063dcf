package netpol

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"

	"github.com/cilium/ebpf"

	"github.com/skiff-sh/skiff/dataplane/policy"
	"github.com/skiff-sh/skiff/dataplane/programs"
)

// PolicyView reads a node's pinned policy maps, as the datapath sees them.
type PolicyView struct {
	endpoints, identities, cidrs, rules, names *ebpf.Map
	// IPv6's maps (nil when the agent that pinned the maps predates them).
	endpoints6, identities6, cidrs6, rules6 *ebpf.Map
}

// OpenPolicyPinned opens the policy maps pinned in pinDir, read-only.
func OpenPolicyPinned(pinDir string) (*PolicyView, error) {
	v := &PolicyView{}
	for _, m := range []struct {
		name     string
		dst      **ebpf.Map
		optional bool
	}{{"skiff_pol_endpoints", &v.endpoints, false}, {"skiff_pol_identities", &v.identities, false}, {"skiff_pol_cidrs", &v.cidrs, false},
		{"skiff_pol_rules", &v.rules, false}, {"skiff_pol_names", &v.names, false},
		{"skiff_pol_endpoints6", &v.endpoints6, true}, {"skiff_pol_identities6", &v.identities6, true}, {"skiff_pol_cidrs6", &v.cidrs6, true},
		{"skiff_pol_rules6", &v.rules6, true}} {
		mp, err := ebpf.LoadPinnedMap(filepath.Join(pinDir, m.name), &ebpf.LoadPinOptions{ReadOnly: true})
		if m.optional && errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			v.Close()
			return nil, fmt.Errorf("%s (is the agent's network policy running on this node?): %w", m.name, err)
		}
		*m.dst = mp
	}
	return v, nil
}

// Close releases the maps.
func (v *PolicyView) Close() {
	for _, m := range []*ebpf.Map{v.endpoints, v.identities, v.cidrs, v.rules, v.names, v.endpoints6, v.identities6, v.cidrs6, v.rules6} {
		if m != nil {
			m.Close()
		}
	}
}

func (v *PolicyView) name(kind, id uint32) string {
	var n programs.PolicyPolName
	if err := v.names.Lookup(programs.PolicyPolNameKey{Kind: kind, Id: id}, &n); err != nil {
		return ""
	}
	return n.String()
}

// Peer describes an identity in Kubernetes terms ("any", "host", "world", "ns:labels",
// "cidr:…").
func (v *PolicyView) Peer(id uint32) string {
	switch id {
	case uint32(policy.AnyPeer):
		return "any"
	case HostIdentity:
		return "host"
	case uint32(policy.World):
		return "world"
	}
	if n := v.name(nameKindIdentity, id); n != "" {
		return n
	}
	return fmt.Sprintf("identity %d", id)
}

// EndpointInfo is one policed pod and its rules.
type EndpointInfo struct {
	Pod             string
	Address         netip.Addr
	Identity        uint32
	Ingress, Egress bool // isolated
	// AuditIngress, AuditEgress: audit-mode policies select it in that direction.
	AuditIngress, AuditEgress bool
	Rules                     []RuleInfo
}

// RuleInfo is one admitting entry.
type RuleInfo struct {
	Direction policy.Direction
	Peer      string
	Protocol  uint8
	Port      uint16
	PortBits  uint8
	Policy    string
}

// Endpoints lists every endpoint with its rules, by pod name.
func (v *PolicyView) Endpoints() ([]EndpointInfo, error) {
	byAddr := map[uint32]*EndpointInfo{}
	var a uint32
	var e programs.PolicyPolEndpoint
	it := v.endpoints.Iterate()
	for it.Next(&a, &e) {
		info := &EndpointInfo{Address: programs.FromAddr4(a), Pod: v.name(nameKindEndpoint, a),
			Ingress: e.Flags&isolatedIngress != 0, Egress: e.Flags&isolatedEgress != 0,
			AuditIngress: e.Flags&auditIngress != 0, AuditEgress: e.Flags&auditEgress != 0}
		var id uint32
		if v.identities.Lookup(a, &id) == nil {
			info.Identity = id
		}
		byAddr[a] = info
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	var k programs.PolicyPolRuleKey
	var r programs.PolicyPolRuleValue
	rit := v.rules.Iterate()
	for rit.Next(&k, &r) {
		info, ok := byAddr[k.Endpoint]
		if !ok {
			continue
		}
		info.Rules = append(info.Rules, RuleInfo{Direction: policy.Direction(k.Dir), Peer: v.Peer(k.Peer), Protocol: k.Proto,
			Port: programs.Port(k.Port), PortBits: uint8(k.Prefixlen - 80), Policy: v.ruleValueName(policy.Direction(k.Dir), r.Policy)})
	}
	if err := rit.Err(); err != nil {
		return nil, err
	}
	infos := make([]*EndpointInfo, 0, len(byAddr))
	for _, info := range byAddr {
		infos = append(infos, info)
	}
	six, err := v.endpoints6Info()
	if err != nil {
		return nil, err
	}
	var out []EndpointInfo
	for _, info := range append(infos, six...) {
		sort.Slice(info.Rules, func(i, j int) bool {
			a, b := info.Rules[i], info.Rules[j]
			if a.Direction != b.Direction {
				return a.Direction < b.Direction
			}
			if a.Peer != b.Peer {
				return a.Peer < b.Peer
			}
			if a.Protocol != b.Protocol {
				return a.Protocol < b.Protocol
			}
			return a.Port < b.Port
		})
		out = append(out, *info)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Pod < out[j].Pod || out[i].Pod == out[j].Pod && out[i].Address.Less(out[j].Address)
	})
	return out, nil
}

// endpoints6Info is Endpoints for the IPv6 maps.
func (v *PolicyView) endpoints6Info() ([]*EndpointInfo, error) {
	if v.endpoints6 == nil || v.rules6 == nil || v.identities6 == nil {
		return nil, nil
	}
	byAddr := map[programs.PolicyPolAddr6]*EndpointInfo{}
	var a programs.PolicyPolAddr6
	var e programs.PolicyPolEndpoint
	it := v.endpoints6.Iterate()
	for it.Next(&a, &e) {
		addr := programs.FromAddr6(a.Addr)
		info := &EndpointInfo{Address: addr, Pod: v.name(nameKindEndpoint6, endpoint6ID(addr)),
			Ingress: e.Flags&isolatedIngress != 0, Egress: e.Flags&isolatedEgress != 0,
			AuditIngress: e.Flags&auditIngress != 0, AuditEgress: e.Flags&auditEgress != 0}
		var id uint32
		if v.identities6.Lookup(a, &id) == nil {
			info.Identity = id
		}
		byAddr[a] = info
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	var k programs.PolicyPolRule6Key
	var r programs.PolicyPolRuleValue
	rit := v.rules6.Iterate()
	for rit.Next(&k, &r) {
		if info, ok := byAddr[programs.PolicyPolAddr6{Addr: k.Endpoint}]; ok {
			info.Rules = append(info.Rules, RuleInfo{Direction: policy.Direction(k.Dir), Peer: v.Peer(k.Peer), Protocol: k.Proto,
				Port: programs.Port(k.Port), PortBits: uint8(k.Prefixlen - 176), Policy: v.ruleValueName(policy.Direction(k.Dir), r.Policy)})
		}
	}
	out := make([]*EndpointInfo, 0, len(byAddr))
	for _, info := range byAddr {
		out = append(out, info)
	}
	return out, rit.Err()
}

// TraceStep is the decision at one end.
type TraceStep struct {
	Direction policy.Direction
	Endpoint  string // the pod deciding
	Verdict   string // "allowed", "denied"
	Why       string
}

// Trace answers whether traffic from src to dst on proto/port passes this node's policy, as
// the programs decide a new connection: egress at src if it is a pod here, ingress at dst if
// it is. Each step says which policy admits, or that none does. The decision is
// policy.Decide over the live maps, the one the program's tests check it against.
func (v *PolicyView) Trace(src, dst netip.Addr, proto uint8, port uint16) ([]TraceStep, bool, error) {
	if src.Is4() != dst.Is4() || src.Is4In6() || dst.Is4In6() {
		return nil, false, errors.New("give two addresses of one family")
	}
	var steps []TraceStep
	allowed := true
	for _, end := range []struct {
		dir      policy.Direction
		ep, peer netip.Addr
	}{{policy.Egress, src, dst}, {policy.Ingress, dst, src}} {
		if _, ok := v.Isolation(end.ep); !ok {
			continue // not a pod of this node: decided elsewhere, or not at all
		}
		st := TraceStep{Direction: end.dir, Endpoint: v.endpointName(end.ep)}
		if st.Endpoint == "" {
			st.Endpoint = end.ep.String()
		}
		d := policy.Decide(v, end.ep, end.dir, end.peer, proto, port)
		st.Verdict = "allowed"
		switch d.Reason {
		case policy.NotIsolated:
			st.Why = "no policy selects the pod for " + end.dir.String()
			if d.Audited {
				st.Why = "no enforced policy selects the pod for " + end.dir.String() + "; its audit-mode policies would deny it"
			}
		case policy.FromNode:
			st.Why = "from the node itself"
		case policy.ToNodeDNS:
			st.Why = "to the node's own cluster DNS resolver"
		case policy.Admitted:
			st.Why = fmt.Sprintf("networkpolicy %s admits peer %s", d.Policy, v.Peer(uint32(d.Peer)))
		case policy.NoRule:
			st.Verdict, st.Why = "denied", fmt.Sprintf("no rule admits peer %s on %s", v.Peer(uint32(d.Peer)), protoPort(proto, port))
			allowed = false
		case policy.AdminAccept, policy.BaselineAccept:
			st.Why = fmt.Sprintf("clusternetworkpolicy %s accepts it (%s tier)", v.TierRuleName(d.Tier), tierOf(d.Reason))
		case policy.AdminDeny, policy.BaselineDeny:
			st.Verdict, st.Why = "denied", fmt.Sprintf("clusternetworkpolicy %s denies it (%s tier)", v.TierRuleName(d.Tier), tierOf(d.Reason))
			allowed = false
		}
		if d.PassedBy != 0 {
			st.Why += fmt.Sprintf("; clusternetworkpolicy %s passed it on", v.TierRuleName(d.PassedBy))
		}
		steps = append(steps, st)
	}
	return steps, allowed, nil
}

func tierOf(r policy.Reason) string {
	if r == policy.AdminAccept || r == policy.AdminDeny {
		return "Admin"
	}
	return "Baseline"
}

// endpointName is the pod an endpoint address belongs to ("" if unnamed).
func (v *PolicyView) endpointName(a netip.Addr) string {
	if a.Is4() {
		return v.name(nameKindEndpoint, programs.Addr4(a))
	}
	return v.name(nameKindEndpoint6, endpoint6ID(a))
}

// Isolation implements policy.Lookup from the endpoints maps.
func (v *PolicyView) Isolation(ep netip.Addr) (policy.Isolation, bool) {
	var e programs.PolicyPolEndpoint
	var err error
	switch {
	case ep.Is4():
		err = v.endpoints.Lookup(programs.Addr4(ep), &e)
	case v.endpoints6 != nil:
		err = v.endpoints6.Lookup(Addr6(ep), &e)
	default:
		return policy.Isolation{}, false
	}
	if err != nil {
		return policy.Isolation{}, false
	}
	return isolationOf(e.Flags), true
}

// PeerIdentity implements policy.Lookup from the identities maps; a link-local IPv6 peer is
// the node, as the program has it.
func (v *PolicyView) PeerIdentity(a netip.Addr) policy.Identity {
	var id uint32
	switch {
	case a.Is4():
		if v.identities.Lookup(programs.Addr4(a), &id) == nil {
			return policy.Identity(id)
		}
	case a.IsLinkLocalUnicast():
		return policy.Host
	case v.identities6 != nil:
		if v.identities6.Lookup(Addr6(a), &id) == nil {
			return policy.Identity(id)
		}
	}
	return policy.World
}

// CIDRIdentity implements policy.Lookup from the CIDR LPM maps.
func (v *PolicyView) CIDRIdentity(a netip.Addr) (policy.Identity, bool) {
	var cid uint32
	var err error
	switch {
	case a.Is4():
		err = v.cidrs.Lookup(programs.PolicyPolCidrKey{Prefixlen: 32, Addr: programs.Addr4(a)}, &cid)
	case v.cidrs6 != nil:
		err = v.cidrs6.Lookup(programs.PolicyPolCidr6Key{Prefixlen: 128, Addr: programs.Addr6(a)}, &cid)
	default:
		return 0, false
	}
	if err == nil {
		return policy.Identity(cid), true
	}
	return 0, false
}

// Tier implements policy.Lookup with the rules maps' own LPM lookup of a tier's entries.
func (v *PolicyView) Tier(ep netip.Addr, dir policy.Direction, proto uint8, peer policy.Identity, port uint16) (policy.TierValue, bool) {
	value, ok := v.lookupRule(ep, dir, proto, peer, port)
	return policy.TierValue(value), ok
}

// lookupRule is the value of the rules maps' longest-prefix entry for a packet's key.
func (v *PolicyView) lookupRule(ep netip.Addr, dir policy.Direction, proto uint8, peer policy.Identity, port uint16) (uint32, bool) {
	var r programs.PolicyPolRuleValue
	var err error
	switch {
	case ep.Is4():
		err = v.rules.Lookup(programs.PolicyPolRuleKey{Prefixlen: 96, Endpoint: programs.Addr4(ep), Peer: uint32(peer), Dir: uint8(dir), Proto: proto, Port: programs.Port(port)}, &r)
	case v.rules6 != nil:
		err = v.rules6.Lookup(programs.PolicyPolRule6Key{Prefixlen: 192, Endpoint: programs.Addr6(ep), Peer: uint32(peer), Dir: uint8(dir), Proto: proto, Port: programs.Port(port)}, &r)
	default:
		return 0, false
	}
	return r.Policy, err == nil
}

// ruleValueName names a rule's value: a NetworkPolicy's, or a ClusterNetworkPolicy rule's
// with its action.
func (v *PolicyView) ruleValueName(dir policy.Direction, value uint32) string {
	if dir&(policy.AdminTier|policy.BaselineTier) != 0 {
		t := policy.TierValue(value)
		return "clusternetworkpolicy " + v.TierRuleName(t) + " " + t.Action().String()
	}
	return v.name(nameKindPolicy, value)
}

// TierRuleName is the ClusterNetworkPolicy rule of a rank ("policy/rule").
func (v *PolicyView) TierRuleName(t policy.TierValue) string {
	return v.name(nameKindTierRule, t.Rank())
}

// Admits implements policy.Lookup with the rules maps' own LPM lookup.
func (v *PolicyView) Admits(ep netip.Addr, dir policy.Direction, proto uint8, peer policy.Identity, port uint16) (string, bool) {
	value, ok := v.lookupRule(ep, dir, proto, peer, port)
	if !ok {
		return "", false
	}
	return v.name(nameKindPolicy, value), true
}

// ProtocolName is "TCP", "UDP", "SCTP", "any" or the number.
func ProtocolName(p uint8) string {
	switch p {
	case policy.TCP:
		return "TCP"
	case policy.UDP:
		return "UDP"
	case policy.SCTP:
		return "SCTP"
	case policy.AnyProtocol:
		return "any"
	}
	return fmt.Sprint(p)
}

func protoPort(proto uint8, port uint16) string {
	if port == 0 {
		return ProtocolName(proto)
	}
	return fmt.Sprintf("%s/%d", ProtocolName(proto), port)
}

// PortRange prints a rule's ports: "80", "8000-8063", "all".
func (r RuleInfo) PortRange() string {
	if r.PortBits == 0 {
		return "all"
	}
	if r.PortBits == 16 {
		return fmt.Sprint(r.Port)
	}
	size := uint32(1) << (16 - r.PortBits)
	return fmt.Sprintf("%d-%d", r.Port, uint32(r.Port)+size-1)
}
