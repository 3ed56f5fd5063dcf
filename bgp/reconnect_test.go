package bgp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/packet/bgp"

	"github.com/skiff-sh/skiff/bgp/config"
)

// idleHolds records the Duration of every "IdleHoldTimer expired" GoBGP logs.
type idleHolds struct {
	mu    sync.Mutex
	holds []string
}

func (h *idleHolds) Enabled(context.Context, slog.Level) bool { return true }
func (h *idleHolds) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *idleHolds) WithGroup(string) slog.Handler            { return h }
func (h *idleHolds) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "IdleHoldTimer expired" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "Duration" {
			h.mu.Lock()
			h.holds = append(h.holds, a.Value.String())
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

func (h *idleHolds) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.holds...)
}

// When a peer ends the session (its NOTIFICATION, as when its BFD lost this node and it
// reset, or its agent restarting), the speaker is Idle for the 1 s skiff configures, not
// GoBGP's fixed 5 s during which it refuses the peer's connections (third_party/gobgp's
// second edit): the session is back a second later.
func TestIdleHoldAfterPeerEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	port := freePort(t)
	holds := &idleHolds{}
	g := Global{ASN: 64512, RouterID: netip.MustParseAddr("127.0.0.1"), ListenPort: int32(port)}
	sp, err := Start(ctx, g, slog.New(holds))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.srv.Stop()
	peer := netip.MustParseAddr("127.0.0.5")
	if err := sp.SetPeers(ctx, []config.Peer{{Address: peer, ASN: 64512, HoldTime: 9 * time.Second, KeepaliveTime: 3 * time.Second, Passive: true}}); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	established := func() {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			st, err := sp.PeerStates(ctx)
			if err == nil && st[peer].State == api.PeerState_ESTABLISHED {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the session did not come up: %+v %v", st[peer], err)
			}
		}
	}
	open := func() net.Conn {
		t.Helper()
		conn, _ := dialOpen(t, peer, addr)
		go func() { _, _ = io.Copy(io.Discard, conn) }()
		for _, m := range []*bgp.BGPMessage{
			bgp.NewBGPOpenMessage(64512, 9, peer.String(), []bgp.OptionParameterInterface{bgp.NewOptionParameterCapability(
				[]bgp.ParameterCapabilityInterface{bgp.NewCapMultiProtocol(bgp.RF_IPv4_UC), bgp.NewCapFourOctetASNumber(64512)})}),
			bgp.NewBGPKeepAliveMessage(),
		} {
			b, err := m.Serialize()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Write(b); err != nil {
				t.Fatal(err)
			}
		}
		established()
		return conn
	}
	conn := open()
	before := len(holds.list()) // the first Idle, when the peer was added
	b, err := bgp.NewBGPNotificationMessage(bgp.BGP_ERROR_CEASE, bgp.BGP_ERROR_SUB_ADMINISTRATIVE_RESET, nil).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(b); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	ended := time.Now()
	conn = open()
	defer conn.Close()
	t.Logf("the session was back %s after the peer ended it", time.Since(ended).Round(time.Millisecond))
	if got := holds.list()[before:]; len(got) != 1 || got[0] != "1" {
		t.Errorf("idle holds after the peer's NOTIFICATION: %v (seconds), want [1]", got)
	}
}

// As graceful-restart helper, the speaker keeps a restarting peer's routes while the peer
// reconnects, even when an attempt fails before the OPENs are exchanged (the restarted
// agent refuses connections until it has configured its peers): only the restart timer's
// expiry, or the peer's End-of-RIB, ends them (RFC 4724 4.2; third_party/gobgp's third edit).
func TestHelperKeepsRoutesThroughFailedReconnect(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	port := freePort(t)
	g := Global{ASN: 64512, RouterID: netip.MustParseAddr("127.0.0.1"), ListenPort: int32(port),
		GracefulRestart: config.GracefulRestart{Enabled: true, RestartTime: 120 * time.Second}}
	sp, err := Start(ctx, g, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.srv.Stop()
	peer := netip.MustParseAddr("127.0.0.6")
	if err := sp.SetPeers(ctx, []config.Peer{{Address: peer, ASN: 64512, HoldTime: 9 * time.Second, KeepaliveTime: 3 * time.Second, Passive: true}}); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	block := netip.MustParsePrefix("10.9.0.0/24")
	send := func(conn net.Conn, msgs ...*bgp.BGPMessage) {
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
	hasBlock := func() bool {
		paths, err := sp.Paths(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			if p.Prefix == block && p.NextHop == peer {
				return true
			}
		}
		return false
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10s", what)
			}
		}
	}
	state := func() api.PeerState_SessionState {
		st, _ := sp.PeerStates(ctx)
		return st[peer].State
	}

	// A session with graceful restart (forwarding kept for IPv4 unicast) and one route.
	conn, _ := dialOpen(t, peer, addr)
	go func() { _, _ = io.Copy(io.Discard, conn) }()
	caps := []bgp.ParameterCapabilityInterface{
		bgp.NewCapMultiProtocol(bgp.RF_IPv4_UC),
		bgp.NewCapFourOctetASNumber(64512),
		bgp.NewCapGracefulRestart(false, false, 120, []*bgp.CapGracefulRestartTuple{bgp.NewCapGracefulRestartTuple(bgp.RF_IPv4_UC, true)}),
	}
	send(conn, bgp.NewBGPOpenMessage(64512, 9, peer.String(), []bgp.OptionParameterInterface{bgp.NewOptionParameterCapability(caps)}),
		bgp.NewBGPKeepAliveMessage(),
		bgp.NewBGPUpdateMessage(nil, []bgp.PathAttributeInterface{
			bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP),
			bgp.NewPathAttributeAsPath(nil),
			bgp.NewPathAttributeNextHop(peer.String()),
			bgp.NewPathAttributeLocalPref(100),
		}, []*bgp.IPAddrPrefix{bgp.NewIPAddrPrefix(24, block.Addr().String())}),
		bgp.NewEndOfRib(bgp.RF_IPv4_UC))
	waitFor("the peer's route", hasBlock)

	// The peer's process goes (the connection closes without a NOTIFICATION): its routes
	// stay, as stale.
	conn.Close()
	waitFor("the session ending", func() bool { return state() != api.PeerState_ESTABLISHED })
	// Its first attempt to come back fails: the connection closes after the speaker's OPEN.
	failed, _ := dialOpen(t, peer, addr)
	failed.Close()
	waitFor("the failed attempt ending", func() bool { return state() != api.PeerState_OPENSENT })
	time.Sleep(200 * time.Millisecond)
	if !hasBlock() {
		t.Fatal("the restarting peer's route was dropped when a reconnection attempt failed")
	}
	// The next attempt succeeds and the peer sends its table again.
	conn, _ = dialOpen(t, peer, addr)
	defer conn.Close()
	go func() { _, _ = io.Copy(io.Discard, conn) }()
	send(conn, bgp.NewBGPOpenMessage(64512, 9, peer.String(), []bgp.OptionParameterInterface{bgp.NewOptionParameterCapability(caps)}),
		bgp.NewBGPKeepAliveMessage())
	waitFor("the session back", func() bool { return state() == api.PeerState_ESTABLISHED })
	if !hasBlock() {
		t.Fatal("the restarting peer's route was dropped before its End-of-RIB")
	}
}
