package flows

import (
	"net/netip"
	"slices"
	"strconv"
	"time"
)

// Flow is a flow event described for people and tools: `skiff observe` prints it, -o json
// writes it. Its field names follow Hubble's flow (observer.proto) where they mean the same.
type Flow struct {
	Time time.Time `json:"time"`
	Node string    `json:"node_name"`
	// Verdict is FORWARDED, DROPPED, or AUDIT (forwarded; an audit-mode policy would have
	// dropped it).
	Verdict string `json:"verdict"`
	// Type is policy-verdict, translation or drop.
	Type string `json:"type"`
	// Reason says why, in words ("no rule admits it", "no backend", ...).
	Reason string `json:"reason"`
	// DropReason is set for drops, as Hubble's drop_reason_desc (POLICY_DENIED, ...).
	DropReason string `json:"drop_reason_desc,omitempty"`
	// Direction is INGRESS or EGRESS (of the pod whose veth decided) for policy verdicts.
	Direction string `json:"traffic_direction,omitempty"`
	IP        IP     `json:"IP"`
	L4        L4     `json:"l4"`
	Source    *Peer  `json:"source,omitempty"`
	// Destination is the backend of a translation.
	Destination *Peer `json:"destination,omitempty"`
	// Service is the frontend a translation came from, with its Service's name.
	Service *Service `json:"service,omitempty"`
	// Policies decided: the one whose rule admitted, those that isolate the pod for a drop,
	// the audit-mode ones that would have dropped it.
	Policies []string `json:"policies,omitempty"`
}

// IP is a flow's addresses.
type IP struct {
	Source      string `json:"source,omitempty"`
	Destination string `json:"destination"`
	Version     string `json:"ipVersion"`
}

// L4 is a flow's protocol and ports.
type L4 struct {
	Protocol        string `json:"protocol"`
	SourcePort      uint16 `json:"source_port,omitempty"`
	DestinationPort uint16 `json:"destination_port,omitempty"`
	// Flags are the TCP flags of the packet that decided (SYN, ACK, ...).
	Flags []string `json:"flags,omitempty"`
}

// Peer is one end of a flow: a pod (namespace, name, labels) or an address only.
type Peer struct {
	Namespace string   `json:"namespace,omitempty"`
	PodName   string   `json:"pod_name,omitempty"`
	Labels    []string `json:"labels,omitempty"`
	Identity  uint32   `json:"identity,omitempty"`
}

// Service is a translated frontend.
type Service struct {
	Name     string `json:"name,omitempty"` // namespace/name
	Frontend string `json:"frontend"`
}

// Pod is what naming needs of a pod.
type Pod struct {
	Namespace, Name string
	Labels          map[string]string
}

// Names resolve what events carry as numbers and addresses; each may answer "" (unknown).
type Names interface {
	// PodAt is the pod with addr, any node's.
	PodAt(addr netip.Addr) (Pod, bool)
	// PodOfCgroup is the pod whose cgroup (or a cgroup under it) has id.
	PodOfCgroup(id uint64) (Pod, bool)
	// Policy is the policy a rule value's index names.
	Policy(index uint32) string
	// Isolating are the policies selecting endpoint in dir (1 ingress, 2 egress); audit
	// asks for the audit-mode ones.
	Isolating(endpoint netip.Addr, dir uint8, audit bool) []string
	// Service is the Service of a frontend ("namespace/name").
	Service(frontend netip.AddrPort, proto uint8) string
	// TierRule is the ClusterNetworkPolicy and rule of a tier rule's rank.
	TierRule(rank uint32) (policy, rule string)
}

// Describe turns an event into a Flow: bootWall is the wall time CLOCK_MONOTONIC started at.
func Describe(e Event, names Names, node string, bootWall time.Time) Flow {
	f := Flow{Time: bootWall.Add(time.Duration(e.Mono)), Node: node, Verdict: verdictName(e.Verdict), Type: kindName(e.Kind),
		Reason: reasonText(e.Reason), DropReason: dropReason(e), IP: IP{Destination: e.Dst.String(), Version: "IPv4"},
		L4: L4{Protocol: ProtocolName(e.Proto), SourcePort: e.SrcPort, DestinationPort: e.DstPort, Flags: tcpFlags(e)}}
	if e.Src.Is6() {
		f.IP.Version = "IPv6"
	}
	if !e.Src.IsUnspecified() {
		f.IP.Source = e.Src.String()
	}
	switch e.Kind {
	case KindPolicy:
		f.Direction = "INGRESS"
		endpoint := e.Dst // the pod whose veth decided
		if e.Dir == 2 {
			f.Direction = "EGRESS"
			endpoint = e.Src
		}
		f.Source, f.Destination = peerAt(names, e.Src), peerAt(names, e.Dst)
		peerEnd := f.Source
		if e.Dir == 2 {
			peerEnd = f.Destination
		}
		if e.PeerID != 0 {
			peerEnd.Identity = e.PeerID
		}
		switch {
		case e.Reason == ReasonRule && e.Policy > 0:
			f.Policies = []string{names.Policy(e.Policy - 1)}
		case e.Verdict == VerdictDropped && e.Reason == ReasonPolicy:
			f.Policies = names.Isolating(endpoint, e.Dir, false)
		case e.Reason >= ReasonAdminAccept && e.Reason <= ReasonBaselineDeny:
			pol, rule := names.TierRule(e.Policy >> 2)
			if pol != "" {
				f.Policies = []string{pol}
				f.Reason += " (rule " + rule + ")"
			}
		case e.Verdict == VerdictAudit:
			f.Policies = names.Isolating(endpoint, e.Dir, true)
			f.Reason = "audit-mode policies would drop it (no enforced policy selects the pod)"
		}
	case KindTranslate, KindDrop:
		if e.Cgroup != 0 {
			if p, ok := names.PodOfCgroup(e.Cgroup); ok {
				f.Source = podPeer(p)
			}
		}
		if f.Source == nil {
			f.Source = peerAt(names, e.Src)
		}
		frontend := netip.AddrPortFrom(e.Orig, e.OrigPt)
		if e.Kind == KindDrop && e.Orig.IsUnspecified() {
			frontend = netip.AddrPortFrom(e.Dst, e.DstPort) // a packet to the frontend itself
		}
		f.Service = &Service{Name: names.Service(frontend, e.Proto), Frontend: frontend.String()}
		if e.Kind == KindTranslate {
			f.Destination = peerAt(names, e.Dst)
		}
	}
	return f
}

func peerAt(names Names, a netip.Addr) *Peer {
	if a.IsUnspecified() {
		return &Peer{}
	}
	if p, ok := names.PodAt(a); ok {
		return podPeer(p)
	}
	return &Peer{}
}

func podPeer(p Pod) *Peer {
	out := &Peer{Namespace: p.Namespace, PodName: p.Name}
	for k, v := range p.Labels {
		out.Labels = append(out.Labels, k+"="+v)
	}
	slices.Sort(out.Labels)
	return out
}

func verdictName(v uint8) string {
	switch v {
	case VerdictForwarded:
		return "FORWARDED"
	case VerdictDropped:
		return "DROPPED"
	default:
		return "AUDIT"
	}
}

func kindName(k uint8) string {
	switch k {
	case KindPolicy:
		return "policy-verdict"
	case KindTranslate:
		return "translation"
	default:
		return "drop"
	}
}

func reasonText(r uint8) string {
	switch r {
	case ReasonNotIsolated:
		return "no policy selects the pod"
	case ReasonFromNode:
		return "from the node"
	case ReasonNodeDNS:
		return "to the node's DNS resolver"
	case ReasonRule:
		return "a rule admits it"
	case ReasonPolicy:
		return "no rule admits it"
	case ReasonNoEndpoint:
		return "a pod address not policed yet"
	case ReasonNoBackend:
		return "the Service has no backend"
	case ReasonCTFull:
		return "connection tracking table full"
	case ReasonService:
		return "Service frontend to backend"
	case ReasonAdminAccept:
		return "an Admin-tier ClusterNetworkPolicy accepts it"
	case ReasonAdminDeny:
		return "an Admin-tier ClusterNetworkPolicy denies it"
	case ReasonBaselineAccept:
		return "a Baseline-tier ClusterNetworkPolicy accepts it"
	case ReasonBaselineDeny:
		return "a Baseline-tier ClusterNetworkPolicy denies it"
	}
	return "reason " + strconv.Itoa(int(r))
}

// dropReason names a drop as Hubble's drop_reason_desc does.
func dropReason(e Event) string {
	if e.Verdict != VerdictDropped {
		return ""
	}
	switch e.Reason {
	case ReasonPolicy, ReasonAdminDeny, ReasonBaselineDeny:
		return "POLICY_DENIED"
	case ReasonNoEndpoint:
		return "UNKNOWN_ENDPOINT"
	case ReasonNoBackend:
		return "SERVICE_BACKEND_NOT_FOUND"
	case ReasonCTFull:
		return "CT_MAP_INSERTION_FAILED"
	}
	return "UNKNOWN"
}

// ProtocolName is an IP protocol number's name.
func ProtocolName(p uint8) string {
	switch p {
	case 6:
		return "TCP"
	case 17:
		return "UDP"
	case 132:
		return "SCTP"
	case 1:
		return "ICMPv4"
	case 58:
		return "ICMPv6"
	}
	return strconv.Itoa(int(p))
}

var tcpFlagNames = []struct {
	bit  uint8
	name string
}{{0x02, "SYN"}, {0x10, "ACK"}, {0x01, "FIN"}, {0x04, "RST"}, {0x08, "PSH"}, {0x20, "URG"}}

func tcpFlags(e Event) []string {
	if e.Proto != 6 || e.Kind != KindPolicy {
		return nil
	}
	var out []string
	for _, f := range tcpFlagNames {
		if e.TCPFlags&f.bit != 0 {
			out = append(out, f.name)
		}
	}
	return out
}
