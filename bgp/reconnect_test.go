package bgp

import (
	"context"
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
	holds := &idleHolds{}
	sp, addr := startSpeaker(t, Global{}, slog.New(holds))
	peer := netip.MustParseAddr("127.0.0.5")
	if err := sp.SetPeers(context.Background(), []config.Peer{passivePeer(peer.String())}); err != nil {
		t.Fatal(err)
	}
	open := func() net.Conn {
		t.Helper()
		conn, _ := dialOpen(t, peer, addr)
		go func() { _, _ = io.Copy(io.Discard, conn) }()
		sendMsgs(t, conn, openFromPeer(peer), bgp.NewBGPKeepAliveMessage())
		waitFor(t, "the session up", func() bool { return peerState(t, sp, peer).State == api.PeerState_ESTABLISHED })
		return conn
	}
	conn := open()
	before := len(holds.list()) // the first Idle, when the peer was added
	sendMsgs(t, conn, bgp.NewBGPNotificationMessage(bgp.BGP_ERROR_CEASE, bgp.BGP_ERROR_SUB_ADMINISTRATIVE_RESET, nil))
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
	sp, addr := startSpeaker(t, Global{GracefulRestart: config.GracefulRestart{Enabled: true, RestartTime: 120 * time.Second}}, nil)
	peer := netip.MustParseAddr("127.0.0.6")
	if err := sp.SetPeers(context.Background(), []config.Peer{passivePeer(peer.String())}); err != nil {
		t.Fatal(err)
	}
	block := netip.MustParsePrefix("10.9.0.0/24")
	hasBlock := func() bool {
		paths, err := sp.Paths(context.Background())
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
	state := func() api.PeerState_SessionState { return peerState(t, sp, peer).State }
	// Graceful restart, forwarding kept for IPv4 unicast.
	gr := bgp.NewCapGracefulRestart(false, false, 120, []*bgp.CapGracefulRestartTuple{bgp.NewCapGracefulRestartTuple(bgp.RF_IPv4_UC, true)})

	// A session and one route.
	conn, _ := dialOpen(t, peer, addr)
	go func() { _, _ = io.Copy(io.Discard, conn) }()
	sendMsgs(t, conn, openFromPeer(peer, gr), bgp.NewBGPKeepAliveMessage(),
		bgp.NewBGPUpdateMessage(nil, []bgp.PathAttributeInterface{
			bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP),
			bgp.NewPathAttributeAsPath(nil),
			bgp.NewPathAttributeNextHop(peer.String()),
			bgp.NewPathAttributeLocalPref(100),
		}, []*bgp.IPAddrPrefix{bgp.NewIPAddrPrefix(24, block.Addr().String())}),
		bgp.NewEndOfRib(bgp.RF_IPv4_UC))
	waitFor(t, "the peer's route", hasBlock)

	// The peer's process goes (the connection closes without a NOTIFICATION): its routes
	// stay, as stale.
	conn.Close()
	waitFor(t, "the session ending", func() bool { return state() != api.PeerState_ESTABLISHED })
	// Its first attempt to come back fails: the connection closes after the speaker's OPEN.
	failed, _ := dialOpen(t, peer, addr)
	failed.Close()
	waitFor(t, "the failed attempt ending", func() bool { return state() != api.PeerState_OPENSENT })
	time.Sleep(200 * time.Millisecond)
	if !hasBlock() {
		t.Fatal("the restarting peer's route was dropped when a reconnection attempt failed")
	}
	// The next attempt succeeds.
	conn, _ = dialOpen(t, peer, addr)
	defer conn.Close()
	go func() { _, _ = io.Copy(io.Discard, conn) }()
	sendMsgs(t, conn, openFromPeer(peer, gr), bgp.NewBGPKeepAliveMessage())
	waitFor(t, "the session back", func() bool { return state() == api.PeerState_ESTABLISHED })
	if !hasBlock() {
		t.Fatal("the restarting peer's route was dropped before its End-of-RIB")
	}
}
