package bfd

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// scriptedPeer is the far end of a session, played by the test over loopback with real
// sockets: it reads what the manager sends and answers what the test tells it to.
type scriptedPeer struct {
	t    *testing.T
	conn net.PacketConn
	to   *net.UDPAddr
}

func newScriptedPeer(t *testing.T, addr netip.Addr, managerAddr netip.Addr) *scriptedPeer {
	network := "udp4"
	if addr.Is6() {
		network = "udp6"
	}
	c, err := net.ListenPacket(network, netip.AddrPortFrom(addr, Port).String())
	if err != nil {
		t.Fatalf("listen %s: %v", netip.AddrPortFrom(addr, Port), err)
	}
	t.Cleanup(func() { c.Close() })
	if addr.Is6() {
		err = ipv6.NewPacketConn(c).SetHopLimit(255)
	} else {
		err = ipv4.NewPacketConn(c).SetTTL(255)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &scriptedPeer{t: t, conn: c, to: &net.UDPAddr{IP: managerAddr.AsSlice(), Port: Port}}
}

func (p *scriptedPeer) read(timeout time.Duration) (Packet, bool) {
	buf := make([]byte, 128)
	_ = p.conn.SetReadDeadline(time.Now().Add(timeout))
	n, _, err := p.conn.ReadFrom(buf)
	if err != nil {
		return Packet{}, false
	}
	pk, err := Parse(buf[:n])
	if err != nil {
		p.t.Fatalf("manager sent a bad packet: %v", err)
	}
	return pk, true
}

func (p *scriptedPeer) send(pk Packet) {
	if _, err := p.conn.WriteTo(pk.Marshal(), p.to); err != nil {
		p.t.Fatal(err)
	}
}

// TestManagerOverLoopback runs a manager against a scripted peer: the handshake, the fast
// rate after the poll, loss detection within the detection time, and AdminDown at stop.
func TestManagerOverLoopback(t *testing.T) {
	local, remote := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	events := make(chan Event, 16)
	m := NewManager(local, DefaultConfig, slog.New(slog.NewTextHandler(io.Discard, nil)), func(e Event) { events <- e })
	peer := newScriptedPeer(t, remote, local)
	m.SetPeers([]netip.Addr{remote})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()

	first, ok := peer.read(3 * time.Second)
	if !ok || first.State != Down || first.YourDiscriminator != 0 {
		t.Fatalf("first packet %+v (ok %v), want Down without our discriminator", first, ok)
	}
	const ours = 77
	answer := func(state State, final bool) {
		peer.send(Packet{State: state, Final: final, DetectMult: 3, MyDiscriminator: ours, YourDiscriminator: first.MyDiscriminator,
			DesiredMinTx: 50 * time.Millisecond, RequiredMinRx: 50 * time.Millisecond})
	}
	answer(Init, false)
	waitEvent(t, events, Up)
	// The manager answers at once with Up and a poll for its fast rate; we finish it.
	for {
		p, ok := peer.read(2 * time.Second)
		if !ok {
			t.Fatal("no packet after Up")
		}
		if p.State == Up && p.Poll {
			if p.DesiredMinTx != 100*time.Millisecond || p.YourDiscriminator != ours {
				t.Fatalf("poll %+v", p)
			}
			break
		}
	}
	answer(Up, true)
	// From now on packets come every 75-100 ms (100 ms with jitter; our RequiredMinRx is 50).
	prev, lastAnswer := time.Time{}, time.Time{}
	var gaps []time.Duration
	for len(gaps) < 5 {
		answer(Up, false)
		lastAnswer = time.Now()
		if _, ok := peer.read(time.Second); !ok {
			t.Fatal("manager stopped sending")
		}
		if !prev.IsZero() {
			gaps = append(gaps, time.Since(prev))
		}
		prev = time.Now()
	}
	for _, g := range gaps {
		if g > 400*time.Millisecond {
			t.Errorf("gap %v between packets of an Up session paced at 100 ms", g)
		}
	}
	if st, _ := m.State(remote); st != Up {
		t.Fatalf("state %s, want Up", st)
	}

	// Silence: the manager declares the peer lost after 3 x max(100, 50) ms.
	ev := waitEvent(t, events, Down)
	if !ev.Lost() || ev.Diag != DiagDetectionExpired {
		t.Errorf("loss event %+v, want lost by detection time", ev)
	}
	if d := time.Since(lastAnswer); d < 300*time.Millisecond {
		t.Errorf("declared lost after %v, before the 300 ms detection time", d)
	}

	// Back up, then the manager stops: the peer is told AdminDown.
	answer(Down, false)
	waitEvent(t, events, Init)
	answer(Up, false)
	waitEvent(t, events, Up)
	cancel()
	<-done
	done <- nil
	for {
		p, ok := peer.read(time.Second)
		if !ok {
			t.Fatal("no AdminDown at stop")
		}
		if p.State == AdminDown {
			if p.Diag != DiagAdminDown {
				t.Errorf("AdminDown with diag %s", p.Diag)
			}
			break
		}
	}
}

// TestManagerDropsPacketsWithLowTTL is RFC 5881 section 5: a packet that crossed a router
// (TTL below 255) is not a single-hop peer's.
func TestManagerDropsPacketsWithLowTTL(t *testing.T) {
	local, remote := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.3")
	events := make(chan Event, 16)
	m := NewManager(local, DefaultConfig, slog.New(slog.NewTextHandler(io.Discard, nil)), func(e Event) { events <- e })
	m.SetPeers([]netip.Addr{remote})
	c, err := net.ListenPacket("udp4", netip.AddrPortFrom(remote, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := ipv4.NewPacketConn(c).SetTTL(254); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond)
	for i := 0; i < 3; i++ {
		if _, err := c.WriteTo(Packet{State: Down, DetectMult: 3, MyDiscriminator: 5, DesiredMinTx: time.Second, RequiredMinRx: time.Second}.Marshal(),
			&net.UDPAddr{IP: local.AsSlice(), Port: Port}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case e := <-events:
		t.Fatalf("a TTL 254 packet moved the session: %+v", e)
	case <-time.After(300 * time.Millisecond):
	}
	if st, _ := m.State(remote); st != Down {
		t.Errorf("state %s, want Down", st)
	}
}

func waitEvent(t *testing.T, events <-chan Event, to State) Event {
	t.Helper()
	deadline := time.After(3 * time.Second)
	for {
		select {
		case e := <-events:
			if e.To == to {
				return e
			}
		case <-deadline:
			t.Fatalf("no transition to %s", to)
		}
	}
}

// startWithState runs a manager of one session to remote that keeps its sessions in state
// (as an agent across restarts), and returns the function that stops it.
func startWithState(local, remote netip.Addr, state string, log *slog.Logger, onChange func(Event)) (*Manager, func()) {
	m := NewManager(local, DefaultConfig, log, onChange)
	m.StateFile = state
	m.SetPeers([]netip.Addr{remote})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	return m, func() { cancel(); <-done }
}

// TestManagerResumesAcrossRestart: a manager's Up session, saved to its StateFile, is
// resumed by the next manager with the same discriminators, sending Up at once.
func TestManagerResumesAcrossRestart(t *testing.T) {
	local, remote := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.4")
	state := t.TempDir() + "/bfd.json"
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	peer := newScriptedPeer(t, remote, local)
	run := func(events chan Event) (*Manager, func()) {
		return startWithState(local, remote, state, quiet, func(e Event) { events <- e })
	}
	events := make(chan Event, 16)
	m1, stop := run(events)
	if late := m1.AwaitResumed(context.Background(), time.Second); len(late) != 0 {
		t.Errorf("a manager that resumed nothing waits for %v", late)
	}
	first, ok := peer.read(3 * time.Second)
	if !ok {
		t.Fatal("no packet")
	}
	peer.send(Packet{State: Init, DetectMult: 3, MyDiscriminator: 99, YourDiscriminator: first.MyDiscriminator, DesiredMinTx: 100 * time.Millisecond, RequiredMinRx: 100 * time.Millisecond})
	waitEvent(t, events, Up)
	stop()

	events2 := make(chan Event, 16)
	m2, stop2 := run(events2)
	defer stop2()
	for {
		p, ok := peer.read(2 * time.Second)
		if !ok {
			t.Fatal("the restarted manager sent nothing")
		}
		if p.State == AdminDown {
			continue // the first manager's goodbye, still queued
		}
		if p.State != Up || p.MyDiscriminator != first.MyDiscriminator || p.YourDiscriminator != 99 {
			t.Fatalf("after the restart: %+v, want Up %d->99", p, first.MyDiscriminator)
		}
		break
	}
	// Until the peer answers, the resumed session is unconfirmed: BGP would wait on it.
	if late := m2.AwaitResumed(context.Background(), 100*time.Millisecond); len(late) != 1 || late[0] != remote {
		t.Errorf("AwaitResumed before the peer answered = %v, want [%v]", late, remote)
	}
	// The peer, which never noticed, keeps the session; no event on our side.
	peer.send(Packet{State: Up, DetectMult: 3, MyDiscriminator: 99, YourDiscriminator: first.MyDiscriminator, DesiredMinTx: 100 * time.Millisecond, RequiredMinRx: 100 * time.Millisecond})
	if late := m2.AwaitResumed(context.Background(), 2*time.Second); len(late) != 0 {
		t.Errorf("AwaitResumed after the peer confirmed = %v", late)
	}
	select {
	case e := <-events2:
		t.Errorf("resumed session changed state: %+v", e)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestManagerAwaitsResumedSessionThePeerDropped: a restart the peer noticed (it answers
// the resumed session Down) is awaited through the new three-way handshake, not taken as
// the session being back.
func TestManagerAwaitsResumedSessionThePeerDropped(t *testing.T) {
	local, remote := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.5")
	state := t.TempDir() + "/bfd.json"
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	peer := newScriptedPeer(t, remote, local)
	fast := func(st State, my, your uint32) Packet {
		return Packet{State: st, DetectMult: 3, MyDiscriminator: my, YourDiscriminator: your, DesiredMinTx: 100 * time.Millisecond, RequiredMinRx: 100 * time.Millisecond}
	}
	start := func() (*Manager, func()) { return startWithState(local, remote, state, quiet, nil) }
	m1, stop1 := start()
	first, ok := peer.read(3 * time.Second)
	if !ok {
		t.Fatal("no packet")
	}
	peer.send(fast(Init, 77, first.MyDiscriminator))
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, _ := m1.State(remote); st == Up {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("first session never came Up")
		}
	}
	stop1()

	m2, stop2 := start()
	defer stop2()
	awaited := make(chan []netip.Addr, 1)
	go func() { awaited <- m2.AwaitResumed(context.Background(), 10*time.Second) }()
	// The peer had timed the session out: it answers Down with a new discriminator.
	var mine uint32
	for deadline := time.Now().Add(5 * time.Second); ; {
		p, ok := peer.read(time.Until(deadline))
		if !ok {
			t.Fatal("the restarted manager fell silent")
		}
		if p.State == AdminDown {
			continue
		}
		mine = p.MyDiscriminator
		switch p.State {
		case Up:
			peer.send(fast(Down, 78, 0))
			continue
		case Down:
			peer.send(fast(Down, 78, mine)) // a peer in Down keeps saying so
			continue
		}
		if p.State == Init {
			break // our end restarted the handshake
		}
	}
	select {
	case late := <-awaited:
		t.Fatalf("AwaitResumed returned %v while the session was re-forming", late)
	case <-time.After(100 * time.Millisecond):
	}
	peer.send(fast(Up, 78, mine))
	select {
	case late := <-awaited:
		if len(late) != 0 {
			t.Errorf("AwaitResumed after the handshake = %v", late)
		}
		if st, _ := m2.State(remote); st != Up {
			t.Errorf("session %v after AwaitResumed, want Up", st)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("AwaitResumed never returned after the session came Up")
	}
}
