package bgp

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/packet/bgp"

	"github.com/skiff-sh/skiff/bgp/config"
)

// grFlags is what a speaker's OPEN says about graceful restart: the Restart State bit, and
// the Forwarding State bit of IPv4 unicast.
type grFlags struct{ restart, forwarding bool }

// openFrom connects to the speaker at addr from local (a configured passive peer's
// address) and decodes the OPEN the speaker sends. A peer just added is Idle for a moment,
// and GoBGP closes connections from it until it is Active: those are retried.
func openFrom(t *testing.T, local netip.Addr, addr string) grFlags {
	t.Helper()
	conn, open := dialOpen(t, local, addr)
	conn.Close()
	for _, p := range open.OptParams {
		caps, ok := p.(*bgp.OptionParameterCapability)
		if !ok {
			continue
		}
		for _, c := range caps.Capability {
			gr, ok := c.(*bgp.CapGracefulRestart)
			if !ok {
				continue
			}
			out := grFlags{restart: gr.Flags&0x08 != 0}
			for _, tu := range gr.Tuples {
				if tu.AFI == bgp.AFI_IP && tu.SAFI == bgp.SAFI_UNICAST {
					out.forwarding = tu.Flags&0x80 != 0
				}
			}
			return out
		}
	}
	t.Fatalf("the speaker's OPEN to %s has no graceful restart capability", local)
	return grFlags{}
}

// dialOpen connects to the speaker at addr from local until the speaker answers with its
// OPEN, and returns the connection and the OPEN.
func dialOpen(t *testing.T, local netip.Addr, addr string) (net.Conn, *bgp.BGPOpen) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var conn net.Conn
		var open *bgp.BGPOpen
		if conn, open, err = readOpen(local, addr); err == nil {
			return conn, open
		}
	}
	t.Fatalf("the speaker's OPEN to %s: %v", local, err)
	return nil, nil
}

func readOpen(local netip.Addr, addr string) (net.Conn, *bgp.BGPOpen, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: local.AsSlice()}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	open, err := func() (*bgp.BGPOpen, error) {
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		defer func() { _ = conn.SetReadDeadline(time.Time{}) }()
		header := make([]byte, bgp.BGP_HEADER_LENGTH)
		if _, err := io.ReadFull(conn, header); err != nil {
			return nil, err
		}
		msg := make([]byte, binary.BigEndian.Uint16(header[16:18]))
		copy(msg, header)
		if _, err := io.ReadFull(conn, msg[len(header):]); err != nil {
			return nil, err
		}
		m, err := bgp.ParseBGPMessage(msg)
		if err != nil {
			return nil, err
		}
		open, ok := m.Body.(*bgp.BGPOpen)
		if !ok {
			return nil, fmt.Errorf("the speaker sent %T first, want an OPEN", m.Body)
		}
		return open, nil
	}()
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, open, nil
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startSpeaker starts a speaker on 127.0.0.1 and a free port (g's ASN 64512 unless set),
// stopped when the test ends, and returns it with the address raw peers dial.
func startSpeaker(t *testing.T, g Global, log *slog.Logger) (*Speaker, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	port := freePort(t)
	if g.ASN == 0 {
		g.ASN = 64512
	}
	g.RouterID, g.IPv4, g.ListenPort = netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.1"), int32(port)
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	sp, err := Start(ctx, g, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.srv.Stop(); cancel() })
	return sp, net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
}

// passivePeer is an iBGP peer at addr that dials the speaker (9 s hold time).
func passivePeer(addr string) config.Peer {
	return config.Peer{Address: netip.MustParseAddr(addr), ASN: 64512, HoldTime: 9 * time.Second, KeepaliveTime: 3 * time.Second, Passive: true}
}

// sendMsgs writes BGP messages to a raw peer's connection.
func sendMsgs(t *testing.T, conn net.Conn, msgs ...*bgp.BGPMessage) {
	t.Helper()
	for _, m := range msgs {
		b, err := m.Serialize()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}
}

// openFromPeer is a raw peer's OPEN (AS 64512, 9 s hold time) with the given capabilities
// besides IPv4 unicast and four-octet AS numbers.
func openFromPeer(peer netip.Addr, caps ...bgp.ParameterCapabilityInterface) *bgp.BGPMessage {
	caps = append([]bgp.ParameterCapabilityInterface{bgp.NewCapMultiProtocol(bgp.RF_IPv4_UC), bgp.NewCapFourOctetASNumber(64512)}, caps...)
	return bgp.NewBGPOpenMessage(64512, 9, peer.String(), []bgp.OptionParameterInterface{bgp.NewOptionParameterCapability(caps)})
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

// peerState is the session state of one configured peer.
func peerState(t *testing.T, sp *Speaker, peer netip.Addr) PeerStatus {
	t.Helper()
	st, err := sp.PeerStates(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st[peer]
}

// A speaker that kept its forwarding state through a restart says so (R and F bits) to the
// peers it starts with, so helpers keep its routes until its End-of-RIB; a peer added
// after that meets a speaker that is no longer restarting, and a fresh start says neither.
func TestRestartingSpeakerOpen(t *testing.T) {
	for _, tc := range []struct {
		name       string
		restarting bool
		first      grFlags
	}{
		{"restarted with routes kept", true, grFlags{restart: true, forwarding: true}},
		{"fresh start", false, grFlags{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			sp, addr := startSpeaker(t, Global{GracefulRestart: config.GracefulRestart{Enabled: true, RestartTime: 120 * time.Second}, Restarting: tc.restarting}, nil)
			first, later := passivePeer("127.0.0.2"), passivePeer("127.0.0.3")
			if err := sp.SetPeers(ctx, []config.Peer{first}); err != nil {
				t.Fatal(err)
			}
			if err := sp.SetPeers(ctx, []config.Peer{first, later}); err != nil {
				t.Fatal(err)
			}
			if got := openFrom(t, first.Address, addr); got != tc.first {
				t.Errorf("OPEN to the first peer: %+v, want %+v", got, tc.first)
			}
			if got := openFrom(t, later.Address, addr); got != (grFlags{}) {
				t.Errorf("OPEN to a peer added later: %+v, want neither bit", got)
			}
		})
	}
}

// A restarting speaker whose peer restarts too (its OPEN has the R bit, as FRR's does when
// skiff's has) may send its table without waiting for the peer's End-of-RIB (RFC 4724
// 4.1), and GoBGP marks the peer's End-of-RIB received at the OPEN. PeerStates must not:
// the reconciler drops the routes it kept through the restart at the End-of-RIB, and until
// the peer really sent one its routes are not in yet.
func TestEndOfRIBOnlyWhenSent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sp, addr := startSpeaker(t, Global{GracefulRestart: config.GracefulRestart{Enabled: true, RestartTime: 120 * time.Second}, Restarting: true}, nil)
	go func() { _ = sp.Watch(ctx, func() {}) }()
	peer := netip.MustParseAddr("127.0.0.4")
	if err := sp.SetPeers(ctx, []config.Peer{passivePeer(peer.String())}); err != nil {
		t.Fatal(err)
	}
	conn, _ := dialOpen(t, peer, addr)
	defer conn.Close()
	// Keep reading (KEEPALIVEs, the speaker's table) so its writes never block.
	go func() { _, _ = io.Copy(io.Discard, conn) }()
	sendMsgs(t, conn, openFromPeer(peer, bgp.NewCapGracefulRestart(true, false, 120, []*bgp.CapGracefulRestartTuple{bgp.NewCapGracefulRestartTuple(bgp.RF_IPv4_UC, true)})),
		bgp.NewBGPKeepAliveMessage())
	waitFor(t, "the session up", func() bool { return peerState(t, sp, peer).State == api.PeerState_ESTABLISHED })
	// GoBGP itself already counts the End-of-RIB as received here.
	faked := false
	_ = sp.srv.ListPeer(ctx, &api.ListPeerRequest{Address: peer.String()}, func(p *api.Peer) {
		for _, af := range p.AfiSafis {
			faked = faked || af.GetMpGracefulRestart().GetState().GetEndOfRibReceived()
		}
	})
	if !faked {
		t.Log("GoBGP no longer marks the End-of-RIB received at a restarting peer's OPEN; this test still checks PeerStates")
	}
	time.Sleep(300 * time.Millisecond)
	if st := peerState(t, sp, peer); !st.GracefulRestart || st.EndOfRIB {
		t.Fatalf("before the peer's End-of-RIB: %+v, want graceful restart and no End-of-RIB", st)
	}
	sendMsgs(t, conn, bgp.NewEndOfRib(bgp.RF_IPv4_UC))
	waitFor(t, "the End-of-RIB sent seen", func() bool { return peerState(t, sp, peer).EndOfRIB })
}

// A dual-stack peer owes an End-of-RIB per family its graceful restart names: its IPv6 routes
// may follow its IPv4 End-of-RIB, and the reconciler must not drop the IPv6 routes it kept
// through a restart before they are in.
func TestEndOfRIBPerFamily(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sp, addr := startSpeaker(t, Global{GracefulRestart: config.GracefulRestart{Enabled: true, RestartTime: 120 * time.Second},
		IPv6: netip.MustParseAddr("::1")}, nil)
	go func() { _ = sp.Watch(ctx, func() {}) }()
	peer := netip.MustParseAddr("127.0.0.5")
	if err := sp.SetPeers(ctx, []config.Peer{passivePeer(peer.String())}); err != nil {
		t.Fatal(err)
	}
	conn, _ := dialOpen(t, peer, addr)
	defer conn.Close()
	go func() { _, _ = io.Copy(io.Discard, conn) }()
	sendMsgs(t, conn, openFromPeer(peer, bgp.NewCapMultiProtocol(bgp.RF_IPv6_UC),
		bgp.NewCapGracefulRestart(false, false, 120, []*bgp.CapGracefulRestartTuple{
			bgp.NewCapGracefulRestartTuple(bgp.RF_IPv4_UC, true), bgp.NewCapGracefulRestartTuple(bgp.RF_IPv6_UC, true)})),
		bgp.NewBGPKeepAliveMessage())
	waitFor(t, "the session up", func() bool { return peerState(t, sp, peer).State == api.PeerState_ESTABLISHED })
	sendMsgs(t, conn, bgp.NewEndOfRib(bgp.RF_IPv4_UC))
	time.Sleep(300 * time.Millisecond)
	if st := peerState(t, sp, peer); st.EndOfRIB {
		t.Fatalf("after the IPv4 End-of-RIB alone: %+v, want the IPv6 one awaited", st)
	}
	sendMsgs(t, conn, bgp.NewEndOfRib(bgp.RF_IPv6_UC))
	waitFor(t, "both End-of-RIBs seen", func() bool { return peerState(t, sp, peer).EndOfRIB })
}

// An IPv6-only node's speaker: its OPEN carries the router id derived from its IPv6 address
// (GoBGP and its peers need a 32-bit one), it listens and peers over IPv6, and it advertises
// its IPv6 block with its IPv6 address as the next hop.
func TestIPv6OnlySpeaker(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	self := netip.MustParseAddr("::1")
	port := freePort(t)
	g := Global{ASN: 64512, RouterID: config.DerivedRouterID(self), IPv6: self, ListenPort: int32(port)}
	sp, err := Start(ctx, g, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.srv.Stop() })
	go func() { _ = sp.Watch(ctx, func() {}) }()
	// The raw peer shares the loopback address; GoBGP tells it by its port.
	if err := sp.SetPeers(ctx, []config.Peer{passivePeer("::1")}); err != nil {
		t.Fatal(err)
	}
	conn, open := dialOpen(t, self, net.JoinHostPort("::1", fmt.Sprint(port)))
	defer conn.Close()
	if got := open.ID.String(); got != g.RouterID.String() {
		t.Errorf("OPEN's BGP identifier %s, want the derived %s", got, g.RouterID)
	}
	sendMsgs(t, conn, openFromPeer(netip.MustParseAddr("192.0.2.1"), bgp.NewCapMultiProtocol(bgp.RF_IPv6_UC)), bgp.NewBGPKeepAliveMessage())
	waitFor(t, "the IPv6 session up", func() bool { return peerState(t, sp, self).State == api.PeerState_ESTABLISHED })
	block := netip.MustParsePrefix("fd00:10:244:1::/64")
	if err := sp.Advertise(ctx, block); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		header := make([]byte, bgp.BGP_HEADER_LENGTH)
		if _, err := io.ReadFull(conn, header); err != nil {
			t.Fatalf("no UPDATE for %s: %v", block, err)
		}
		msg := make([]byte, binary.BigEndian.Uint16(header[16:18]))
		copy(msg, header)
		if _, err := io.ReadFull(conn, msg[len(header):]); err != nil {
			t.Fatal(err)
		}
		m, err := bgp.ParseBGPMessage(msg)
		if err != nil {
			t.Fatal(err)
		}
		u, ok := m.Body.(*bgp.BGPUpdate)
		if !ok {
			continue
		}
		for _, a := range u.PathAttributes {
			if r, ok := a.(*bgp.PathAttributeMpReachNLRI); ok && len(r.Value) == 1 && r.Value[0].String() == block.String() {
				if r.Nexthop.String() != "::1" {
					t.Errorf("%s advertised via %s, want ::1", block, r.Nexthop)
				}
				return
			}
		}
	}
}
