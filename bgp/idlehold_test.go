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
