package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/apiutil"
	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
	"github.com/osrg/gobgp/v3/pkg/packet/bgp"
	"github.com/osrg/gobgp/v3/pkg/server"

	"github.com/skiff-sh/skiff/bgp/config"
)

// Global is what a speaker is started with; changing it needs a restart.
type Global struct {
	ASN uint32
	// RouterID is the BGP identifier (config.Config.RouterID).
	RouterID netip.Addr
	// IPv4 is the node's IPv4 address (config.Config.IPv4); invalid on an IPv6-only node.
	IPv4 netip.Addr
	// IPv6 is the node's IPv6 address (config.Config.IPv6); invalid on an IPv4-only node,
	// which then speaks IPv4 unicast only.
	IPv6       netip.Addr
	ListenPort int32
	// APIAddress serves GoBGP's gRPC API (127.0.0.1:50051) for `skiff bgp` and `gobgp`;
	// empty serves none.
	APIAddress      string
	GracefulRestart config.GracefulRestart
	// Restarting (only with GracefulRestart enabled) says the node kept its forwarding state through this speaker's restart
	// (the kernel still holds the routes the last speaker installed). The first peers then
	// get OPENs with the Restart State and Forwarding State bits set (RFC 4724 3): without
	// the F bit a helper drops this node's stale routes the moment the session comes back
	// (BIRD's and FRR's bgpd do), and forwards nothing to it until its UPDATE follows,
	// where with it the helper keeps them until this speaker's End-of-RIB.
	Restarting bool
}

// restartDeferral bounds how long a restarting speaker holds its own UPDATEs back waiting
// for its peers' End-of-RIB (RFC 4724 4.1's selection deferral; GoBGP's default is
// 360 s). Peers keep this node's stale routes meanwhile, so a peer that is slow to send
// its table only delays what changed during the restart.
const restartDeferral = 5 * time.Second

// Speaker is an embedded GoBGP server with skiff's peers and advertisement.
type Speaker struct {
	srv    *server.BgpServer
	global Global
	log    *slog.Logger

	mu    sync.Mutex
	peers map[netip.Addr]config.Peer
	// advertised holds each originated prefix's path id.
	advertised map[netip.Prefix][]byte
	// restarting holds Global.Restarting until the first SetPeers has used it: peers
	// added later meet a speaker that is no longer restarting.
	restarting bool

	// eorMu guards eor: which peers have sent End-of-RIB in their current session, as
	// Watch saw the messages arrive. GoBGP's own EndOfRibReceived is also set without one
	// when both ends restart (RFC 4724 4.1 lets it stop waiting), which says nothing about
	// whether the peer's routes are in.
	eorMu sync.Mutex
	eor   map[netip.Addr]map[api.Family_Afi]bool
}

// The address families skiff speaks: IPv4 unicast always, IPv6 unicast (MP-BGP) on a node
// with an IPv6 address.
var (
	ipv4Unicast = &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	ipv6Unicast = &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
)

// families are the families the speaker's sessions carry.
func (g Global) families() []*api.Family {
	if g.IPv6.IsValid() {
		return []*api.Family{ipv4Unicast, ipv6Unicast}
	}
	return []*api.Family{ipv4Unicast}
}

// familyOf is a prefix's address family.
func familyOf(p netip.Prefix) *api.Family {
	if p.Addr().Is4() {
		return ipv4Unicast
	}
	return ipv6Unicast
}

// Start runs a speaker for the rest of the process's life. It is never stopped with
// StopBgp, which would send every peer a Cease NOTIFICATION and make them drop this node's
// routes: when the agent exits, its sessions just close, which peers with graceful restart
// treat as a restart and so keep forwarding to this node's pods until it is back.
func Start(ctx context.Context, g Global, log *slog.Logger) (*Speaker, error) {
	opts := []server.ServerOption{server.LoggerOption(&logAdapter{log: log})}
	if g.APIAddress != "" {
		opts = append(opts, server.GrpcListenAddress(g.APIAddress))
	}
	srv := server.NewBgpServer(opts...)
	go srv.Serve()
	global := &api.Global{Asn: g.ASN, RouterId: g.RouterID.String(), ListenPort: g.ListenPort}
	for _, a := range []netip.Addr{g.IPv4, g.IPv6} {
		if a.IsValid() {
			global.ListenAddresses = append(global.ListenAddresses, a.String())
		}
	}
	if g.GracefulRestart.Enabled {
		global.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: uint32(g.GracefulRestart.RestartTime / time.Second)}
	}
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: global}); err != nil {
		// Release the API listener (there are no peers to tell yet), so a restart can bind it.
		srv.Stop()
		return nil, fmt.Errorf("start BGP (AS %d, router-id %s): %w", g.ASN, g.RouterID, err)
	}
	return &Speaker{srv: srv, global: g, log: log, peers: map[netip.Addr]config.Peer{}, restarting: g.Restarting}, nil
}

// Server exposes the GoBGP server (metrics collectors read it).
func (s *Speaker) Server() *server.BgpServer { return s.srv }

// SetPeers makes the speaker's peers exactly peers: new ones are added, gone ones removed,
// changed ones replaced.
func (s *Speaker) SetPeers(ctx context.Context, peers []config.Peer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() { s.restarting = false }()
	want := map[netip.Addr]config.Peer{}
	for _, p := range peers {
		want[p.Address] = p
	}
	var errs []error
	for addr, old := range s.peers {
		if p, ok := want[addr]; ok && reflect.DeepEqual(p, old) {
			continue
		}
		if err := s.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr.String()}); err != nil {
			errs = append(errs, fmt.Errorf("delete peer %s: %w", addr, err))
			continue
		}
		delete(s.peers, addr)
		s.log.Info("BGP peer removed", "peer", addr)
	}
	for addr, p := range want {
		if _, ok := s.peers[addr]; ok {
			continue
		}
		if err := s.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: s.apiPeer(p)}); err != nil {
			errs = append(errs, fmt.Errorf("add peer %s (AS %d): %w", addr, p.ASN, err))
			continue
		}
		s.peers[addr] = p
		s.log.Info("BGP peer added", "peer", addr, "asn", p.ASN, "name", p.Name)
	}
	return errors.Join(errs...)
}

// ResetPeer ends the session with peer (a Cease NOTIFICATION, which also ends graceful
// restart for it, so its routes are withdrawn now) and lets it reconnect.
func (s *Speaker) ResetPeer(ctx context.Context, peer netip.Addr, why string) error {
	return s.srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: peer.String(), Communication: why})
}

func (s *Speaker) apiPeer(p config.Peer) *api.Peer {
	// config.Resolve fills in the defaults (90 s, hold/3).
	hold, keepalive := p.HoldTime, p.KeepaliveTime
	ap := &api.Peer{
		Conf: &api.PeerConf{NeighborAddress: p.Address.String(), PeerAsn: p.ASN, AuthPassword: p.Password, Description: p.Name},
		Timers: &api.Timers{Config: &api.TimersConfig{HoldTime: uint64(hold / time.Second), KeepaliveInterval: uint64(keepalive / time.Second),
			// GoBGP's defaults (120 s between attempts, 30 s idle after a reset, during which
			// it refuses the peer's own connections) would keep a restarted node cut off
			// from its mesh for half a minute. The fork (hack/gobgpfork) also uses the idle
			// time for a session the peer ended, where GoBGP would wait a fixed 5 s.
			ConnectRetry: 1, IdleHoldTimeAfterReset: 1}},
		Transport: &api.Transport{PassiveMode: p.Passive},
	}
	// A link-local peer is reached from the node's own link-local address on that link (the
	// kernel's choice): a router configured with the node's link-local address would refuse
	// a connection from its global one.
	if local := s.nextHop(netip.PrefixFrom(p.Address, 0)); local.IsValid() && p.Address.Zone() == "" {
		ap.Transport.LocalAddress = local.String()
	}
	for _, f := range s.global.families() {
		ap.AfiSafis = append(ap.AfiSafis, &api.AfiSafi{Config: &api.AfiSafiConfig{Family: f, Enabled: true}})
	}
	if p.EBGPMultihop > 0 {
		ap.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.EBGPMultihop)}
	}
	if gr := s.global.GracefulRestart; gr.Enabled {
		ap.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: uint32(gr.RestartTime / time.Second)}
		for _, af := range ap.AfiSafis {
			af.MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
		}
		if s.restarting {
			// GoBGP sets the F bit exactly when it sets the R bit, and then holds this
			// speaker's UPDATEs until every peer's End-of-RIB or the deferral: the table
			// and End-of-RIB go out together, so the helper swaps stale for fresh at once.
			ap.GracefulRestart.LocalRestarting = true
			ap.GracefulRestart.DeferralTime = uint32(restartDeferral / time.Second)
		}
	}
	return ap
}

// Advertise originates prefixes with this node as next hop, replacing what was advertised
// before: new ones are added first, then the ones no longer wanted withdrawn; none
// withdraws everything. Invalid prefixes are skipped.
func (s *Speaker) Advertise(ctx context.Context, prefixes ...netip.Prefix) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.advertised == nil {
		s.advertised = map[netip.Prefix][]byte{}
	}
	want := map[netip.Prefix]bool{}
	for _, p := range prefixes {
		if p.IsValid() {
			want[p.Masked()] = true
		}
	}
	for p := range want {
		if _, ok := s.advertised[p]; ok {
			continue
		}
		nlri, attrs, err := s.originate(p)
		if err != nil {
			return err
		}
		path, err := apiutil.NewPath(nlri, false, attrs, time.Now())
		if err != nil {
			return err
		}
		resp, err := s.srv.AddPath(ctx, &api.AddPathRequest{TableType: api.TableType_GLOBAL, Path: path})
		if err != nil {
			return fmt.Errorf("advertise %s: %w", p, err)
		}
		s.advertised[p] = resp.Uuid
		s.log.Info("BGP advertising", "prefix", p, "nexthop", s.nextHop(p))
	}
	for p, id := range s.advertised {
		if want[p] {
			continue
		}
		if err := s.srv.DeletePath(ctx, &api.DeletePathRequest{TableType: api.TableType_GLOBAL, Family: familyOf(p), Uuid: id}); err != nil {
			return fmt.Errorf("withdraw %s: %w", p, err)
		}
		delete(s.advertised, p)
		s.log.Info("BGP withdrew", "prefix", p)
	}
	return nil
}

// nextHop is the node's address of p's family.
func (s *Speaker) nextHop(p netip.Prefix) netip.Addr {
	if p.Addr().Is4() {
		return s.global.IPv4
	}
	return s.global.IPv6
}

// originate is the NLRI and attributes of a prefix this node originates: IPv4 with a
// NEXT_HOP, IPv6 with MP_REACH_NLRI carrying the node's IPv6 address (RFC 4760).
func (s *Speaker) originate(p netip.Prefix) (bgp.AddrPrefixInterface, []bgp.PathAttributeInterface, error) {
	origin := bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP)
	if p.Addr().Is4() {
		if !s.global.IPv4.IsValid() {
			return nil, nil, fmt.Errorf("advertise %s: the node has no IPv4 address to be its next hop", p)
		}
		return bgp.NewIPAddrPrefix(uint8(p.Bits()), p.Addr().String()),
			[]bgp.PathAttributeInterface{origin, bgp.NewPathAttributeNextHop(s.global.IPv4.String())}, nil
	}
	if !s.global.IPv6.IsValid() {
		return nil, nil, fmt.Errorf("advertise %s: the node has no IPv6 address to be its next hop (give --node-ip an IPv6 address too)", p)
	}
	nlri := bgp.NewIPv6AddrPrefix(uint8(p.Bits()), p.Addr().String())
	return nlri, []bgp.PathAttributeInterface{origin,
		bgp.NewPathAttributeMpReachNLRI(s.global.IPv6.String(), []bgp.AddrPrefixInterface{nlri})}, nil
}

// Advertised is what the speaker originates now.
func (s *Speaker) Advertised() []netip.Prefix {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []netip.Prefix
	for p := range s.advertised {
		out = append(out, p)
	}
	return out
}

// Paths lists every path in the RIB, of every family the speaker speaks.
func (s *Speaker) Paths(ctx context.Context) ([]Path, error) {
	var out []Path
	var perr error
	for _, f := range s.global.families() {
		err := s.srv.ListPath(ctx, &api.ListPathRequest{TableType: api.TableType_GLOBAL, Family: f}, func(d *api.Destination) {
			prefix, err := netip.ParsePrefix(d.Prefix)
			if err != nil {
				perr = err
				return
			}
			for _, p := range d.Paths {
				if p.IsWithdraw {
					continue
				}
				if got, ok := PathOf(prefix, p); ok {
					out = append(out, got)
				}
			}
		})
		if err == nil {
			err = perr
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// PathOf reduces an API path to what route selection needs; false when it has no next hop.
// A link-local next hop (a router with no global address on the link: MP_REACH_NLRI's
// link-local field, or its only one) is reachable only on the link the path came over: it
// takes the zone of the link-local peer that sent it, and is dropped from any other.
func PathOf(prefix netip.Prefix, p *api.Path) (Path, bool) {
	attrs, err := apiutil.GetNativePathAttributes(p)
	if err != nil {
		return Path{}, false
	}
	out := Path{Prefix: prefix, LocalPref: 100}
	for _, a := range attrs {
		switch a := a.(type) {
		case *bgp.PathAttributeNextHop:
			out.NextHop, _ = netip.AddrFromSlice(a.Value)
		case *bgp.PathAttributeMpReachNLRI:
			out.NextHop, _ = netip.AddrFromSlice(a.Nexthop)
			if ll, ok := netip.AddrFromSlice(a.LinkLocalNexthop); ok && ll.IsLinkLocalUnicast() && (!out.NextHop.IsValid() || out.NextHop.IsUnspecified()) {
				out.NextHop = ll
			}
		case *bgp.PathAttributeLocalPref:
			out.LocalPref = a.Value
		case *bgp.PathAttributeAsPath:
			for _, seg := range a.Value {
				out.ASPathLen += seg.ASLen()
			}
		}
	}
	out.NextHop = out.NextHop.Unmap()
	if out.NextHop.Is6() && out.NextHop.IsLinkLocalUnicast() {
		from, err := netip.ParseAddr(p.NeighborIp)
		if err != nil || from.Zone() == "" {
			return out, false
		}
		out.NextHop = out.NextHop.WithZone(from.Zone())
	}
	return out, out.NextHop.IsValid()
}

// PeerStatus is a peer's session state and whether it has sent its whole table.
type PeerStatus struct {
	State api.PeerState_SessionState
	// EndOfRIB is true once the peer sent End-of-RIB, in its current session, for every
	// family its graceful restart capability names (IPv4 unicast when it names none), as
	// Watch saw them; peers without graceful restart never send one.
	EndOfRIB bool
	// GracefulRestart is true when the peer negotiated graceful restart.
	GracefulRestart bool
}

// PeerStates reports each configured peer's session state (ESTABLISHED, ACTIVE, ...).
func (s *Speaker) PeerStates(ctx context.Context) (map[netip.Addr]PeerStatus, error) {
	out := map[netip.Addr]PeerStatus{}
	err := s.srv.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
		a, err := netip.ParseAddr(p.Conf.NeighborAddress)
		if err != nil || p.State == nil {
			return
		}
		st := PeerStatus{State: p.State.SessionState}
		// The families the peer's graceful restart capability names each owe an End-of-RIB
		// (a dual-stack peer's IPv6 routes may follow its IPv4 End-of-RIB).
		var owed []api.Family_Afi
		for _, af := range p.AfiSafis {
			if gr := af.MpGracefulRestart; gr != nil && gr.State != nil && gr.State.Received {
				st.GracefulRestart = true
				owed = append(owed, af.GetConfig().GetFamily().GetAfi())
			}
		}
		if len(owed) == 0 {
			owed = []api.Family_Afi{api.Family_AFI_IP}
		}
		s.eorMu.Lock()
		st.EndOfRIB = true
		for _, afi := range owed {
			st.EndOfRIB = st.EndOfRIB && s.eor[a][afi]
		}
		s.eorMu.Unlock()
		out[a] = st
	})
	return out, err
}

// Watch calls fn whenever the best paths or a peer's state change or a peer sends
// End-of-RIB, until ctx ends. It is what PeerStates learns End-of-RIB from, so it runs for
// as long as the speaker does (a peer's End-of-RIB before it started is never seen; the
// reconciler's 5 s fallback covers that).
func (s *Speaker) Watch(ctx context.Context, fn func()) error {
	return s.srv.WatchEvent(ctx, &api.WatchEventRequest{
		Table: &api.WatchEventRequest_Table{Filters: []*api.WatchEventRequest_Table_Filter{
			{Type: api.WatchEventRequest_Table_Filter_BEST}, {Type: api.WatchEventRequest_Table_Filter_EOR}}},
		Peer: &api.WatchEventRequest_Peer{},
	}, func(ev *api.WatchEventResponse) {
		s.noteEndOfRIB(ev)
		fn()
	})
}

// noteEndOfRIB keeps eor: a peer's End-of-RIB for a unicast family counts until its session
// next changes state (down, or up again: a new session owes a new End-of-RIB).
func (s *Speaker) noteEndOfRIB(ev *api.WatchEventResponse) {
	s.eorMu.Lock()
	defer s.eorMu.Unlock()
	if s.eor == nil {
		s.eor = map[netip.Addr]map[api.Family_Afi]bool{}
	}
	if pe := ev.GetPeer(); pe != nil && pe.Type == api.WatchEventResponse_PeerEvent_STATE && pe.Peer.GetConf() != nil {
		if a, err := netip.ParseAddr(pe.Peer.Conf.NeighborAddress); err == nil {
			delete(s.eor, a.Unmap())
		}
		return
	}
	for _, p := range ev.GetTable().GetPaths() {
		// An End-of-RIB is a path without NLRI, from a neighbor; best paths have NLRI.
		if p.Nlri != nil || p.NeighborIp == "" || p.Family.GetSafi() != api.Family_SAFI_UNICAST {
			continue
		}
		if a, err := netip.ParseAddr(p.NeighborIp); err == nil {
			if s.eor[a.Unmap()] == nil {
				s.eor[a.Unmap()] = map[api.Family_Afi]bool{}
			}
			s.eor[a.Unmap()][p.Family.GetAfi()] = true
		}
	}
}

// logAdapter sends GoBGP's logs to slog; GoBGP's Info is mostly peer state, worth keeping.
type logAdapter struct {
	log   *slog.Logger
	level gobgplog.LogLevel
}

func attrs(f gobgplog.Fields) []any {
	out := make([]any, 0, 2*len(f))
	for k, v := range f {
		out = append(out, k, v)
	}
	return out
}

func (l *logAdapter) Panic(msg string, f gobgplog.Fields) { l.log.Error(msg, attrs(f)...); panic(msg) }
func (l *logAdapter) Fatal(msg string, f gobgplog.Fields) { l.log.Error(msg, attrs(f)...) }
func (l *logAdapter) Error(msg string, f gobgplog.Fields) { l.log.Error(msg, attrs(f)...) }
func (l *logAdapter) Warn(msg string, f gobgplog.Fields)  { l.log.Warn(msg, attrs(f)...) }
func (l *logAdapter) Info(msg string, f gobgplog.Fields)  { l.log.Info(msg, attrs(f)...) }
func (l *logAdapter) Debug(msg string, f gobgplog.Fields) { l.log.Debug(msg, attrs(f)...) }
func (l *logAdapter) SetLevel(level gobgplog.LogLevel)    { l.level = level }
func (l *logAdapter) GetLevel() gobgplog.LogLevel         { return gobgplog.InfoLevel }

// ASPathString renders a path's AS_PATH as `gobgp` does ("64512 65001"), "" when empty.
func ASPathString(p *api.Path) string {
	attrs, err := apiutil.GetNativePathAttributes(p)
	if err != nil {
		return "?"
	}
	for _, a := range attrs {
		if as, ok := a.(*bgp.PathAttributeAsPath); ok {
			var parts []string
			for _, seg := range as.Value {
				parts = append(parts, seg.String())
			}
			return strings.Join(parts, " ")
		}
	}
	return ""
}
