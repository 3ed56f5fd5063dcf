package bfd

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)

// exchange delivers a's next packet to b at now and returns what b did.
func exchange(a, b *Session, now time.Time) (changed, sendNow bool) {
	return b.Receive(a.Packet(), now)
}

func upPair(t *testing.T) (a, b *Session) {
	t.Helper()
	a, b = NewSession(DefaultConfig, 1), NewSession(DefaultConfig, 2)
	exchange(a, b, t0) // b: Down -> Init
	if b.State() != Init {
		t.Fatalf("b after a's Down: %s, want Init", b.State())
	}
	exchange(b, a, t0) // a: Down -> Up (peer Init)
	if a.State() != Up {
		t.Fatalf("a after b's Init: %s, want Up", a.State())
	}
	exchange(a, b, t0) // b: Init -> Up
	if b.State() != Up {
		t.Fatalf("b after a's Up: %s, want Up", b.State())
	}
	return a, b
}

func TestThreeWayHandshake(t *testing.T) {
	a, b := upPair(t)
	if a.Diag() != DiagNone || b.Diag() != DiagNone {
		t.Errorf("diags %s %s, want none", a.Diag(), b.Diag())
	}
	// The peer's discriminator is learned and echoed.
	if p := a.Packet(); p.YourDiscriminator != 2 || p.MyDiscriminator != 1 {
		t.Errorf("a's packet discriminators my=%d your=%d, want 1 2", p.MyDiscriminator, p.YourDiscriminator)
	}
}

func TestSlowUntilUpThenPollForTheFastRate(t *testing.T) {
	a, b := NewSession(DefaultConfig, 1), NewSession(DefaultConfig, 2)
	if p := a.Packet(); p.DesiredMinTx != time.Second || p.Poll {
		t.Fatalf("a Down advertises %v poll=%v, want 1s (section 6.8.3) and no poll", p.DesiredMinTx, p.Poll)
	}
	if iv := a.TxInterval(); iv != time.Second {
		t.Fatalf("a Down sends every %v, want 1s", iv)
	}
	exchange(a, b, t0)
	exchange(b, a, t0) // a Up
	p := a.Packet()
	if p.DesiredMinTx != 100*time.Millisecond || !p.Poll || p.Final {
		t.Fatalf("a Up advertises %v poll=%v final=%v, want 100ms with a poll", p.DesiredMinTx, p.Poll, p.Final)
	}
	// A faster rate is used at once, bounded by the peer's RequiredMinRx (100 ms).
	if iv := a.TxInterval(); iv != 100*time.Millisecond {
		t.Errorf("a Up sends every %v, want 100ms", iv)
	}
	// b answers the poll with Final, at once, and its next packet has no Final.
	if _, now := b.Receive(p, t0); !now {
		t.Error("a poll did not ask for an immediate answer")
	}
	fin := b.Packet()
	if !fin.Final || fin.Poll {
		t.Fatalf("b's answer final=%v poll=%v, want final only (b polls too, next)", fin.Final, fin.Poll)
	}
	if next := b.Packet(); next.Final || !next.Poll {
		t.Errorf("b's next packet final=%v poll=%v, want its own poll", next.Final, next.Poll)
	}
	a.Receive(fin, t0)
	if p := a.Packet(); p.Poll {
		t.Error("a still polls after the Final")
	}
}

func TestPeerRequiredMinRxPacesUs(t *testing.T) {
	a, b := upPair(t)
	p := b.Packet()
	p.RequiredMinRx = 500 * time.Millisecond
	a.Receive(p, t0)
	if iv := a.TxInterval(); iv != 500*time.Millisecond {
		t.Errorf("tx interval %v, want the peer's 500ms", iv)
	}
	p.RequiredMinRx = 0
	a.Receive(p, t0)
	if iv := a.TxInterval(); iv != 0 {
		t.Errorf("tx interval %v with a peer wanting none, want 0", iv)
	}
}

func TestDetectionTime(t *testing.T) {
	for _, tc := range []struct {
		localRx, remoteTx time.Duration
		mult              uint8
		want              time.Duration
	}{
		{100 * time.Millisecond, 100 * time.Millisecond, 3, 300 * time.Millisecond},
		{100 * time.Millisecond, 300 * time.Millisecond, 3, 900 * time.Millisecond},
		{250 * time.Millisecond, 50 * time.Millisecond, 5, 1250 * time.Millisecond},
	} {
		s := NewSession(Config{DesiredMinTx: 100 * time.Millisecond, RequiredMinRx: tc.localRx, DetectMult: 3}, 1)
		s.Receive(Packet{State: Down, DetectMult: tc.mult, MyDiscriminator: 9, DesiredMinTx: tc.remoteTx, RequiredMinRx: time.Millisecond}, t0)
		if got := s.DetectionTime(); got != tc.want {
			t.Errorf("local rx %v, remote tx %v x%d: detection %v, want %v", tc.localRx, tc.remoteTx, tc.mult, got, tc.want)
		}
	}
}

func TestSilentPeerExpires(t *testing.T) {
	a, b := upPair(t)
	// a's last packet from b came at t0 with b's slow DesiredMinTx (b was Init): the
	// detection time is b's multiplier x 1 s until b's poll brings the fast rate.
	a.Receive(b.Packet(), t0)
	det := a.DetectionTime()
	if det != 300*time.Millisecond {
		t.Fatalf("detection %v after b's fast packet, want 300ms", det)
	}
	if a.Expire(t0.Add(det - time.Millisecond)) {
		t.Fatal("expired before the detection time")
	}
	if !a.Expire(t0.Add(det)) {
		t.Fatal("did not expire at the detection time")
	}
	if a.State() != Down || a.Diag() != DiagDetectionExpired {
		t.Errorf("after expiry %s/%s, want Down/%s", a.State(), a.Diag(), DiagDetectionExpired)
	}
	if p := a.Packet(); p.YourDiscriminator != 0 {
		t.Errorf("peer discriminator %d kept after expiry, want 0 (section 6.8.4)", p.YourDiscriminator)
	}
	if a.TxInterval() != time.Second {
		t.Errorf("down session sends every %v, want 1s", a.TxInterval())
	}
	// Down does not expire again.
	if a.Expire(t0.Add(time.Hour)) {
		t.Error("a Down session expired again")
	}
}

func TestNeighborSignalsDown(t *testing.T) {
	a, b := upPair(t)
	b.Expire(t0.Add(time.Hour)) // b lost a
	if changed, _ := exchange(b, a, t0.Add(time.Second)); !changed || a.State() != Down || a.Diag() != DiagNeighborDown {
		t.Fatalf("a after b's Down: %s/%s, want Down/%s", a.State(), a.Diag(), DiagNeighborDown)
	}
	ev := Event{From: Up, To: a.State(), Diag: a.Diag(), RemoteDiag: a.RemoteDiag()}
	if !ev.Lost() {
		t.Error("a peer that lost us is not reported lost")
	}
	// And the pair comes back through the handshake.
	exchange(a, b, t0) // b Down -> Init (a is Down)
	exchange(b, a, t0) // a Down -> Up
	exchange(a, b, t0)
	if a.State() != Up || b.State() != Up {
		t.Errorf("after recovery %s %s, want Up Up", a.State(), b.State())
	}
}

func TestAdminDownIsNotALoss(t *testing.T) {
	a, b := upPair(t)
	b.SetAdminDown()
	p := b.Packet()
	if p.State != AdminDown || p.Diag != DiagAdminDown {
		t.Fatalf("admin-down packet %s/%s", p.State, p.Diag)
	}
	changed, _ := a.Receive(p, t0)
	if !changed || a.State() != Down {
		t.Fatalf("a after AdminDown: %s, want Down", a.State())
	}
	ev := Event{From: Up, To: Down, Diag: a.Diag(), RemoteDiag: a.RemoteDiag()}
	if ev.Lost() {
		t.Error("a peer going AdminDown is reported lost (RFC 5882 3.2: it must not take BGP down)")
	}
	// An AdminDown session ignores what it receives.
	if changed, now := b.Receive(a.Packet(), t0); changed || now || b.State() != AdminDown {
		t.Errorf("AdminDown session reacted: changed=%v now=%v state=%s", changed, now, b.State())
	}
	// A Down session receiving AdminDown stays Down, no event.
	if changed, _ := a.Receive(p, t0); changed {
		t.Error("a Down session changed on a second AdminDown")
	}
}

// TestTransitionTable is section 6.8.6's state table: every local state against every
// state the peer reports.
func TestTransitionTable(t *testing.T) {
	want := map[State]map[State]State{
		Down: {AdminDown: Down, Down: Init, Init: Up, Up: Down},
		Init: {AdminDown: Down, Down: Init, Init: Up, Up: Up},
		Up:   {AdminDown: Down, Down: Down, Init: Up, Up: Up},
	}
	for local, row := range want {
		for remote, next := range row {
			s := NewSession(DefaultConfig, 1)
			s.state = local
			yd := uint32(1)
			if remote == Down || remote == AdminDown {
				yd = 0
			}
			s.Receive(Packet{State: remote, DetectMult: 3, MyDiscriminator: 7, YourDiscriminator: yd, DesiredMinTx: time.Second, RequiredMinRx: time.Second}, t0)
			if s.State() != next {
				t.Errorf("local %s, peer %s: %s, want %s", local, remote, s.State(), next)
			}
		}
	}
}

func TestResumedSession(t *testing.T) {
	a, b := upPair(t)
	sv, ok := a.Save()
	if !ok {
		t.Fatal("an Up session has nothing to save")
	}
	// a's process restarts within b's detection time: the resumed a sends Up with the same
	// discriminators, and b stays Up.
	a2 := ResumeSession(DefaultConfig, sv, t0)
	p := a2.Packet()
	if p.State != Up || p.MyDiscriminator != 1 || p.YourDiscriminator != 2 {
		t.Fatalf("resumed packet %+v, want Up 1->2", p)
	}
	if changed, _ := b.Receive(p, t0); changed || b.State() != Up {
		t.Fatalf("b took the resumed session for a change: %s", b.State())
	}
	exchange(b, a2, t0)
	if a2.Resumed() {
		t.Error("still resumed after the peer's Up")
	}
	// Confirmed, a later Down is a loss again.
	b.Expire(t0.Add(time.Hour))
	exchange(b, a2, t0.Add(time.Second))
	if ev := (Event{From: Up, To: a2.State(), Diag: a2.Diag(), RemoteDiag: a2.RemoteDiag(), Resumed: a2.Resumed()}); !ev.Lost() {
		t.Errorf("a confirmed session's Down is not a loss: %+v", ev)
	}

	// The restart outlasted b's detection time: b answers Down; that ends the resumed
	// session without it counting as a loss, and the handshake starts over.
	a3 := ResumeSession(DefaultConfig, sv, t0)
	c := NewSession(DefaultConfig, 2) // b starting over
	resumed := a3.Resumed()
	changed, _ := a3.Receive(c.Packet(), t0)
	if !changed || a3.State() != Down {
		t.Fatalf("resumed session after the peer's Down: %s", a3.State())
	}
	if ev := (Event{From: Up, To: Down, Diag: a3.Diag(), RemoteDiag: a3.RemoteDiag(), Resumed: resumed}); ev.Lost() {
		t.Error("a resumed session the peer had let go is reported lost")
	}
	// Silence after a resume is not a loss either.
	a4 := ResumeSession(DefaultConfig, sv, t0)
	if !a4.Expire(t0.Add(time.Hour)) || a4.State() != Down || a4.Resumed() {
		t.Errorf("resumed session did not expire cleanly: %s resumed=%v", a4.State(), a4.Resumed())
	}
}
