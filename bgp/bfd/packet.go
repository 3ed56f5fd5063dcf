// Package bfd is Bidirectional Forwarding Detection (RFC 5880) for the node's BGP sessions:
// single-hop IPv4 (RFC 5881), asynchronous mode, no authentication, no echo. GoBGP has no
// BFD (osrg/gobgp#2006), so without it a peer that vanishes is noticed only when its hold
// timer runs out (90 s by default); with it, within DetectMult x the agreed interval
// (3 x 100 ms by default).
//
// The pieces:
//   - packet.go encodes and parses control packets, rejecting what section 6.8.6 says to
//     discard;
//   - session.go is one session's state machine and timers, without I/O: it takes packets
//     and the time, and says what to send and when the peer is lost;
//   - manager.go runs the sessions of a node over UDP (port 3784, TTL 255 both ways) and
//     reports state changes.
//
// How it meets graceful restart: the agent sends AdminDown (diagnostic 7) on every session
// as it stops, which RFC 5882 section 3.2 says must not take the client protocol down, so a
// restarting agent's peers keep its routes as graceful restart asks; a node that dies, or
// whose agent is killed, stops sending, and its peers drop it within the detection time.
package bfd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// State is a session state (section 4.1).
type State uint8

const (
	AdminDown State = 0
	Down      State = 1
	Init      State = 2
	Up        State = 3
)

func (s State) String() string {
	switch s {
	case AdminDown:
		return "AdminDown"
	case Down:
		return "Down"
	case Init:
		return "Init"
	case Up:
		return "Up"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Diag says why a session last left Up (section 4.1).
type Diag uint8

const (
	DiagNone                Diag = 0
	DiagDetectionExpired    Diag = 1
	DiagEchoFailed          Diag = 2
	DiagNeighborDown        Diag = 3
	DiagForwardingReset     Diag = 4
	DiagPathDown            Diag = 5
	DiagConcatPathDown      Diag = 6
	DiagAdminDown           Diag = 7
	DiagReverseConcatPathDn Diag = 8
)

func (d Diag) String() string {
	names := [...]string{"none", "control detection time expired", "echo function failed", "neighbor signaled session down",
		"forwarding plane reset", "path down", "concatenated path down", "administratively down", "reverse concatenated path down"}
	if int(d) < len(names) {
		return names[d]
	}
	return fmt.Sprintf("diagnostic %d", uint8(d))
}

// Packet is a BFD control packet without authentication (24 bytes).
type Packet struct {
	Diag  Diag
	State State
	// Poll and Final run a poll sequence (section 6.5): a change of timers is confirmed by
	// the peer answering Poll with Final.
	Poll, Final bool
	// ControlPlaneIndependent (C): set by implementations whose BFD survives a control
	// plane restart. skiff's runs in the agent, so it is clear.
	ControlPlaneIndependent bool
	Demand                  bool
	DetectMult              uint8
	MyDiscriminator         uint32
	YourDiscriminator       uint32
	DesiredMinTx            time.Duration
	RequiredMinRx           time.Duration
	RequiredMinEchoRx       time.Duration
}

// Len is the length of a control packet without authentication.
const Len = 24

const version = 1

// Marshal encodes p.
func (p Packet) Marshal() []byte {
	b := make([]byte, Len)
	b[0] = version<<5 | uint8(p.Diag)&0x1f
	flags := uint8(p.State) << 6
	for i, set := range []bool{p.Poll, p.Final, p.ControlPlaneIndependent, false /* A */, p.Demand, false /* M */} {
		if set {
			flags |= 1 << (5 - i)
		}
	}
	b[1] = flags
	b[2] = p.DetectMult
	b[3] = Len
	binary.BigEndian.PutUint32(b[4:], p.MyDiscriminator)
	binary.BigEndian.PutUint32(b[8:], p.YourDiscriminator)
	binary.BigEndian.PutUint32(b[12:], micros(p.DesiredMinTx))
	binary.BigEndian.PutUint32(b[16:], micros(p.RequiredMinRx))
	binary.BigEndian.PutUint32(b[20:], micros(p.RequiredMinEchoRx))
	return b
}

func micros(d time.Duration) uint32 {
	us := d.Microseconds()
	switch {
	case us < 0:
		return 0
	case us > 1<<32-1:
		return 1<<32 - 1
	}
	return uint32(us)
}

// Parse decodes a control packet and applies the checks of section 6.8.6 that need no
// session: a packet failing one is to be discarded, and the error says which.
func Parse(b []byte) (Packet, error) {
	if len(b) < Len {
		return Packet{}, fmt.Errorf("BFD packet of %d bytes, shorter than %d", len(b), Len)
	}
	if v := b[0] >> 5; v != version {
		return Packet{}, fmt.Errorf("BFD version %d, want %d", v, version)
	}
	length := int(b[3])
	auth := b[1]&0x04 != 0
	switch {
	case length < Len:
		return Packet{}, fmt.Errorf("BFD length field %d, less than %d", length, Len)
	case length > len(b):
		return Packet{}, fmt.Errorf("BFD length field %d, more than the %d bytes received", length, len(b))
	case auth:
		return Packet{}, errors.New("BFD authentication is not supported")
	}
	p := Packet{
		Diag:                    Diag(b[0] & 0x1f),
		State:                   State(b[1] >> 6),
		Poll:                    b[1]&0x20 != 0,
		Final:                   b[1]&0x10 != 0,
		ControlPlaneIndependent: b[1]&0x08 != 0,
		Demand:                  b[1]&0x02 != 0,
		DetectMult:              b[2],
		MyDiscriminator:         binary.BigEndian.Uint32(b[4:]),
		YourDiscriminator:       binary.BigEndian.Uint32(b[8:]),
		DesiredMinTx:            time.Duration(binary.BigEndian.Uint32(b[12:])) * time.Microsecond,
		RequiredMinRx:           time.Duration(binary.BigEndian.Uint32(b[16:])) * time.Microsecond,
		RequiredMinEchoRx:       time.Duration(binary.BigEndian.Uint32(b[20:])) * time.Microsecond,
	}
	switch {
	case b[1]&0x01 != 0:
		return Packet{}, errors.New("BFD multipoint bit set")
	case p.DetectMult == 0:
		return Packet{}, errors.New("BFD detect multiplier 0")
	case p.MyDiscriminator == 0:
		return Packet{}, errors.New("BFD my discriminator 0")
	case p.YourDiscriminator == 0 && p.State != Down && p.State != AdminDown:
		return Packet{}, fmt.Errorf("BFD your discriminator 0 in state %s", p.State)
	case p.Poll && p.Final:
		return Packet{}, errors.New("BFD poll and final both set")
	}
	return p, nil
}
