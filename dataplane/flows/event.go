package flows

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Kinds of event, as flow.h's FLOW_KIND_*.
const (
	KindPolicy    = 1 // a policy verdict at a pod's veth
	KindTranslate = 2 // a Service frontend translated to a backend
	KindDrop      = 3 // dropped for a reason other than policy
)

// Verdicts, as flow.h's FLOW_FORWARDED, FLOW_DROPPED and FLOW_AUDIT.
const (
	VerdictForwarded = 1
	VerdictDropped   = 2
	VerdictAudit     = 3
)

// Reasons, as flow.h's FLOW_REASON_*.
const (
	ReasonNotIsolated = 1
	ReasonFromNode    = 2
	ReasonNodeDNS     = 3
	ReasonRule        = 4
	ReasonPolicy      = 5
	ReasonNoEndpoint  = 6
	ReasonNoBackend   = 7
	ReasonCTFull      = 8
	ReasonService     = 9
	// A ClusterNetworkPolicy rule decided; Event.Policy is its rank << 2 | action.
	ReasonAdminAccept    = 10
	ReasonAdminDeny      = 11
	ReasonBaselineAccept = 12
	ReasonBaselineDeny   = 13
)

// EventSize is the size of struct flow_event.
const EventSize = 88

// Event is one flow event as the programs wrote it, its fields in host terms.
type Event struct {
	// Mono is bpf_ktime_get_ns: nanoseconds of CLOCK_MONOTONIC.
	Mono           uint64
	Src, Dst, Orig netip.Addr
	Cgroup         uint64
	// Policy is the admitting rule's policy index + 1 (0: none).
	Policy uint32
	// PeerID is the peer's identity (policy events).
	PeerID                   uint32
	SrcPort, DstPort, OrigPt uint16
	Proto                    uint8
	Kind, Verdict, Reason    uint8
	// Dir is 1 (ingress) or 2 (egress) for policy events.
	Dir      uint8
	TCPFlags uint8
}

// Decode reads an event from the bytes of one ring buffer record.
func Decode(b []byte) (Event, error) {
	if len(b) < EventSize {
		return Event{}, fmt.Errorf("flow event of %d bytes, want %d", len(b), EventSize)
	}
	le := binary.LittleEndian
	family := b[78]
	addr := func(off int) netip.Addr {
		if family == 4 {
			return netip.AddrFrom4([4]byte(b[off : off+4]))
		}
		return netip.AddrFrom16([16]byte(b[off : off+16]))
	}
	if family != 4 && family != 6 {
		return Event{}, fmt.Errorf("flow event of address family %d", family)
	}
	port := func(off int) uint16 { return binary.BigEndian.Uint16(b[off : off+2]) } // network order
	e := Event{
		Mono: le.Uint64(b[0:8]), Src: addr(8), Dst: addr(24), Orig: addr(40), Cgroup: le.Uint64(b[56:64]),
		Policy: le.Uint32(b[64:68]), PeerID: le.Uint32(b[68:72]),
		SrcPort: port(72), DstPort: port(74), OrigPt: port(76),
		Proto: b[79], Kind: b[80], Verdict: b[81], Reason: b[82], Dir: b[83], TCPFlags: b[84],
	}
	if e.Kind < KindPolicy || e.Kind > KindDrop {
		return Event{}, fmt.Errorf("flow event of unknown kind %d", e.Kind)
	}
	if e.Verdict < VerdictForwarded || e.Verdict > VerdictAudit {
		return Event{}, fmt.Errorf("flow event of unknown verdict %d", e.Verdict)
	}
	return e, nil
}
