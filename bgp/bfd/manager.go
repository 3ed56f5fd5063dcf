package bfd

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"sync"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// Port is the destination port of single-hop BFD control packets (RFC 5881 section 4).
const Port = 3784

// ttl is sent and required on receipt: a packet with less crossed a router (section 5).
const ttl = 255

// Event is a session's change of state.
type Event struct {
	Peer     netip.Addr
	From, To State
	// Diag is this end's diagnostic, RemoteDiag the peer's last one.
	Diag, RemoteDiag Diag
	// RemoteControlPlaneIndependent is the peer's C bit (see Session).
	RemoteControlPlaneIndependent bool
	// Resumed: the session had been resumed after a restart and the peer had not yet
	// confirmed it (see ResumeSession).
	Resumed bool
}

// Lost reports whether the change means the peer is gone: a session that was Up went
// Down because the peer fell silent or said so, not because it went AdminDown (which
// RFC 5882 section 3.2 says must not take the routing session down).
func (e Event) Lost() bool {
	return e.From == Up && e.To == Down && e.RemoteDiag != DiagAdminDown && !e.Resumed
}

// Status is one session as `skiff bgp peers` shows it.
type Status struct {
	Peer          netip.Addr
	State         State
	RemoteState   State
	Diag          Diag
	DetectionTime time.Duration
	TxInterval    time.Duration
}

// Manager runs a node's BFD sessions, one per peer address, from its local address.
type Manager struct {
	local netip.Addr
	cfg   Config
	log   *slog.Logger
	// StateFile, if set before the first SetPeers, keeps the Up sessions across restarts
	// of the process: they resume (ResumeSession) rather than start over in Down. A
	// restarted agent would otherwise send its peers Down while they still had the old
	// session Up, after its BGP session had come back, and they would take that session
	// down with it.
	StateFile string
	saved     map[netip.Addr]Saved
	// resuming are the peers whose sessions were resumed and are not yet known to be Up
	// at both ends (see AwaitResumed).
	resuming map[netip.Addr]bool

	mu       sync.Mutex
	onChange func(Event)
	sessions map[netip.Addr]*entry
	byDisc   map[uint32]*entry
	// retiring are removed sessions whose peers are still to be told AdminDown.
	retiring []*entry
	wake     chan struct{}
	rtOnce   sync.Once
}

type entry struct {
	peer   netip.Addr
	s      *Session
	nextTx time.Time
}

// NewManager makes a manager; onChange (see SetHandler) may be nil.
func NewManager(local netip.Addr, cfg Config, log *slog.Logger, onChange func(Event)) *Manager {
	m := &Manager{local: local, cfg: cfg, log: log, sessions: map[netip.Addr]*entry{},
		byDisc: map[uint32]*entry{}, wake: make(chan struct{}, 1)}
	m.SetHandler(onChange)
	return m
}

// SetHandler replaces the function called, from the manager's goroutine, for every state
// change; it must not block.
func (m *Manager) SetHandler(onChange func(Event)) {
	if onChange == nil {
		onChange = func(Event) {}
	}
	m.mu.Lock()
	m.onChange = onChange
	m.mu.Unlock()
}

// Config is what the manager's sessions run with.
func (m *Manager) Config() Config { return m.cfg }

// SetPeers makes the sessions exactly one per address of peers: new ones start in Down,
// gone ones end (their peers are told AdminDown first, at the next send).
func (m *Manager) SetPeers(peers []netip.Addr) {
	m.mu.Lock()
	if m.saved == nil {
		m.saved = m.loadSaved()
	}
	want := map[netip.Addr]bool{}
	for _, p := range peers {
		want[p] = true
		if _, ok := m.sessions[p]; ok {
			continue
		}
		e := &entry{peer: p}
		if sv, ok := m.saved[p]; ok && sv.LocalDiscriminator != 0 && m.byDisc[sv.LocalDiscriminator] == nil {
			e.s = ResumeSession(m.cfg, sv, time.Now())
			if m.resuming == nil {
				m.resuming = map[netip.Addr]bool{}
			}
			m.resuming[p] = true
			m.log.Info("BFD session resumed", "peer", p)
		} else {
			e.s = NewSession(m.cfg, m.newDiscriminator())
		}
		delete(m.saved, p)
		m.sessions[p] = e
		m.byDisc[e.s.LocalDiscriminator()] = e
	}
	for p, e := range m.sessions {
		if !want[p] {
			delete(m.sessions, p)
			delete(m.byDisc, e.s.LocalDiscriminator())
			e.s.SetAdminDown()
			m.retiring = append(m.retiring, e)
		}
	}
	m.mu.Unlock()
	m.poke()
}

func (m *Manager) newDiscriminator() uint32 {
	for {
		var b [4]byte
		_, _ = rand.Read(b[:])
		d := binary.BigEndian.Uint32(b[:])
		if _, used := m.byDisc[d]; d != 0 && !used {
			return d
		}
	}
}

func (m *Manager) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// AwaitResumed waits, at most limit, until every resumed session is Up at both ends: the
// peer confirmed it, or had let it go (it noticed the restart) and the two have come Up
// again. It returns the peers still waiting. A BGP speaker opens its sessions after it:
// a router whose BFD session is Down refuses a BGP session over it (FRR sends Cease,
// "BFD down", and ends the graceful restart that was keeping the restarted node's
// routes), where a moment later it would have taken it.
func (m *Manager) AwaitResumed(ctx context.Context, limit time.Duration) []netip.Addr {
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		m.mu.Lock()
		var waiting []netip.Addr
		for p := range m.resuming {
			if e, ok := m.sessions[p]; !ok || (e.s.State() == Up && !e.s.Resumed()) {
				delete(m.resuming, p)
				continue
			}
			waiting = append(waiting, p)
		}
		m.mu.Unlock()
		if len(waiting) == 0 || !time.Now().Before(deadline) {
			sort.Slice(waiting, func(i, j int) bool { return waiting[i].Less(waiting[j]) })
			return waiting
		}
		select {
		case <-ctx.Done():
			return waiting
		case <-tick.C:
		}
	}
}

// Statuses lists the sessions by peer address.
func (m *Manager) Statuses() []Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Status, 0, len(m.sessions))
	for p, e := range m.sessions {
		out = append(out, Status{Peer: p, State: e.s.State(), RemoteState: e.s.RemoteState(), Diag: e.s.Diag(),
			DetectionTime: e.s.DetectionTime(), TxInterval: e.s.TxInterval()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Peer.Less(out[j].Peer) })
	return out
}

// State is the session state with peer, and whether there is a session.
func (m *Manager) State(peer netip.Addr) (State, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.sessions[peer]
	if !ok {
		return Down, false
	}
	return e.s.State(), true
}

type received struct {
	from netip.Addr
	ttl  int
	b    []byte
}

// Run serves the sessions until ctx ends, then sends every peer AdminDown. (The agent's
// manager runs for the life of the process instead: see bgp.Run.)
//
// Its goroutines run on OS threads of their own at real-time priority (SCHED_FIFO), as
// routers run BFD: on a busy node (a neighbour's agent starting, BPF programs loading)
// ordinary threads were seen to wait 400 ms for a CPU, longer than a 300 ms detection
// time, and a peer that merely waited was taken for lost. Those threads end with them.
func (m *Manager) Run(ctx context.Context) error {
	done := make(chan error, 1)
	go func() {
		m.realtime()
		done <- m.serve(ctx)
	}()
	return <-done
}

// realtime locks the calling goroutine to its thread and raises the thread to SCHED_FIFO.
// The goroutine must end locked, so that the thread ends too and never runs other code at
// that priority. Without the privilege it says so once and carries on.
func (m *Manager) realtime() {
	runtime.LockOSThread()
	if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: rtPriority}, 0); err != nil {
		m.rtOnce.Do(func() { m.log.Warn("BFD runs at normal priority; a busy node may be taken for lost", "err", err) })
	}
}

// rtPriority is below the kernel's own real-time threads (50 and up by convention).
const rtPriority = 10

func (m *Manager) serve(ctx context.Context) error {
	lc := net.ListenConfig{}
	rx, err := lc.ListenPacket(ctx, m.network(), netip.AddrPortFrom(m.local, Port).String())
	if err != nil {
		return fmt.Errorf("BFD: listen on %s: %w", netip.AddrPortFrom(m.local, Port), err)
	}
	defer rx.Close()
	readFrom, err := ttlReader(rx, m.local.Is6())
	if err != nil {
		return err
	}
	tx, err := m.sendSocket()
	if err != nil {
		return err
	}
	defer tx.Close()
	if m.local.Is6() {
		err = ipv6.NewPacketConn(tx).SetHopLimit(ttl)
	} else {
		err = ipv4.NewPacketConn(tx).SetTTL(ttl)
	}
	if err != nil {
		return fmt.Errorf("BFD: set TTL (hop limit) %d: %w", ttl, err)
	}

	in := make(chan received, 64)
	readErr := make(chan error, 1)
	go func() {
		m.realtime()
		buf := make([]byte, 512)
		for {
			n, hops, from, err := readFrom(buf)
			if err != nil {
				readErr <- err
				return
			}
			ua, _ := from.(*net.UDPAddr)
			if ua == nil || hops < 0 {
				continue
			}
			a, _ := netip.AddrFromSlice(ua.IP)
			select {
			case in <- received{from: a.Unmap(), ttl: hops, b: append([]byte(nil), buf[:n]...)}:
			default: // a flood: drop rather than queue stale packets
			}
		}
	}()
	m.log.Info("BFD running", "local", m.local, "txInterval", m.cfg.DesiredMinTx, "detectMult", m.cfg.DetectMult)

	send := func(e *entry) {
		if _, err := tx.WriteTo(e.s.Packet().Marshal(), &net.UDPAddr{IP: e.peer.AsSlice(), Port: Port}); err != nil {
			m.log.Debug("BFD send", "peer", e.peer, "err", err)
		}
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		m.mu.Lock()
		var events []Event
		next := now.Add(time.Hour)
		for _, e := range m.retiring {
			send(e)
		}
		m.retiring = nil
		for _, e := range m.sessions {
			from, resumed := e.s.State(), e.s.Resumed()
			if e.s.Expire(now) {
				events = append(events, m.event(e, from, resumed))
				e.nextTx = now // tell the peer at once
			}
			if iv := e.s.TxInterval(); iv > 0 && !now.Before(e.nextTx) {
				send(e)
				e.nextTx = now.Add(jitter(iv, m.cfg.DetectMult))
			}
			if iv := e.s.TxInterval(); iv > 0 && e.nextTx.Before(next) {
				next = e.nextTx
			}
			if d := e.s.Deadline(); !d.IsZero() && d.Before(next) {
				next = d
			}
		}
		m.mu.Unlock()
		for _, ev := range events {
			m.report(ev)
		}
		if len(events) > 0 {
			m.persist()
		}
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			m.adminDown(send)
			return nil
		case err := <-readErr:
			return fmt.Errorf("BFD: receive: %w", err)
		case <-m.wake:
		case <-timer.C:
		case r := <-in:
			if ev, ok := m.receive(r, send); ok {
				m.report(ev)
				m.persist()
			}
		}
	}
}

// network is the manager's socket family: "udp4", or "udp6" for an IPv6 local address (its
// sessions are with IPv6 peers: RFC 5881 runs one BFD per address family).
func (m *Manager) network() string {
	if m.local.Is6() {
		return "udp6"
	}
	return "udp4"
}

// ttlReader reads datagrams from c with the TTL (IPv4) or hop limit (IPv6) each arrived
// with, -1 when the kernel did not say.
func ttlReader(c net.PacketConn, v6 bool) (func([]byte) (int, int, net.Addr, error), error) {
	if v6 {
		p := ipv6.NewPacketConn(c)
		if err := p.SetControlMessage(ipv6.FlagHopLimit, true); err != nil {
			return nil, fmt.Errorf("BFD: receive hop limits: %w", err)
		}
		return func(b []byte) (int, int, net.Addr, error) {
			n, cm, from, err := p.ReadFrom(b)
			if cm == nil {
				return n, -1, from, err
			}
			return n, cm.HopLimit, from, err
		}, nil
	}
	p := ipv4.NewPacketConn(c)
	if err := p.SetControlMessage(ipv4.FlagTTL, true); err != nil {
		return nil, fmt.Errorf("BFD: receive TTLs: %w", err)
	}
	return func(b []byte) (int, int, net.Addr, error) {
		n, cm, from, err := p.ReadFrom(b)
		if cm == nil {
			return n, -1, from, err
		}
		return n, cm.TTL, from, err
	}, nil
}

// sendSocket binds the one socket all sessions send from, on a source port in
// 49152-65535 as RFC 5881 section 4 asks (the kernel's ephemeral range starts lower).
func (m *Manager) sendSocket() (net.PacketConn, error) {
	var last error
	for i := 0; i < 32; i++ {
		port := 49152 + mrand.IntN(65536-49152)
		c, err := net.ListenPacket(m.network(), netip.AddrPortFrom(m.local, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, fmt.Errorf("BFD: no free source port in 49152-65535 on %s: %w", m.local, last)
}

// receive matches a packet to its session (by Your Discriminator, else by source address
// while the peer does not know ours) and applies it.
func (m *Manager) receive(r received, send func(*entry)) (Event, bool) {
	if r.ttl != ttl {
		m.log.Debug("BFD packet dropped: TTL is not 255", "from", r.from, "ttl", r.ttl)
		return Event{}, false
	}
	p, err := Parse(r.b)
	if err != nil {
		m.log.Debug("BFD packet dropped", "from", r.from, "err", err)
		return Event{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var e *entry
	if p.YourDiscriminator != 0 {
		e = m.byDisc[p.YourDiscriminator]
		if e != nil && e.peer != r.from {
			e = nil
		}
	} else {
		e = m.sessions[r.from]
	}
	if e == nil {
		m.log.Debug("BFD packet for no session dropped", "from", r.from, "yourDiscriminator", p.YourDiscriminator)
		return Event{}, false
	}
	from, resumed := e.s.State(), e.s.Resumed()
	changed, now := e.s.Receive(p, time.Now())
	if now {
		send(e)
		e.nextTx = time.Now().Add(jitter(e.s.TxInterval(), m.cfg.DetectMult))
	}
	if changed {
		return m.event(e, from, resumed), true
	}
	return Event{}, false
}

func (m *Manager) event(e *entry, from State, resumed bool) Event {
	return Event{Peer: e.peer, From: from, To: e.s.State(), Diag: e.s.Diag(), RemoteDiag: e.s.RemoteDiag(),
		RemoteControlPlaneIndependent: e.s.RemoteControlPlaneIndependent(), Resumed: resumed}
}

func (m *Manager) report(ev Event) {
	m.log.Info("BFD session "+ev.To.String(), "peer", ev.Peer, "from", ev.From, "diag", ev.Diag.String(), "remoteDiag", ev.RemoteDiag.String())
	m.mu.Lock()
	h := m.onChange
	m.mu.Unlock()
	h(ev)
}

// adminDown tells every peer this end is going out of service (three packets each, since
// any may be lost and no more follow).
func (m *Manager) adminDown(send func(*entry)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := 0; i < 3; i++ {
		for _, e := range m.sessions {
			e.s.SetAdminDown()
			send(e)
		}
		if i < 2 {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// jitter shortens an interval by 0-25% (10-25% with a multiplier of 1), so peers' packets
// do not synchronise (section 6.8.7).
func jitter(iv time.Duration, mult uint8) time.Duration {
	lo := 0.75
	hi := 1.0
	if mult == 1 {
		hi = 0.9
	}
	return time.Duration(float64(iv) * (lo + mrand.Float64()*(hi-lo)))
}

// savedFile is the StateFile's content.
type savedFile struct {
	Local    netip.Addr           `json:"local"`
	Sessions map[netip.Addr]Saved `json:"sessions"`
}

// loadSaved reads the StateFile; sessions saved for another local address, or a file that
// cannot be read, resume nothing.
func (m *Manager) loadSaved() map[netip.Addr]Saved {
	out := map[netip.Addr]Saved{}
	if m.StateFile == "" {
		return out
	}
	b, err := os.ReadFile(m.StateFile)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			m.log.Warn("BFD sessions not resumed", "err", err)
		}
		return out
	}
	var f savedFile
	if err := json.Unmarshal(b, &f); err != nil {
		m.log.Warn("BFD sessions not resumed", "file", m.StateFile, "err", err)
		return out
	}
	if f.Local != m.local {
		return out
	}
	for p, sv := range f.Sessions {
		out[p] = sv
	}
	return out
}

// persist writes the Up sessions to the StateFile (atomically: a crash mid-write leaves the
// previous file).
func (m *Manager) persist() {
	if m.StateFile == "" {
		return
	}
	m.mu.Lock()
	f := savedFile{Local: m.local, Sessions: map[netip.Addr]Saved{}}
	for p, e := range m.sessions {
		if sv, ok := e.s.Save(); ok {
			f.Sessions[p] = sv
		}
	}
	m.mu.Unlock()
	b, err := json.Marshal(f)
	if err == nil {
		tmp := m.StateFile + ".tmp"
		if err = os.WriteFile(tmp, b, 0o600); err == nil {
			err = os.Rename(tmp, m.StateFile)
		}
	}
	if err != nil {
		m.log.Warn("BFD sessions not saved", "file", m.StateFile, "err", err)
	}
}
