package bfd

import "time"

// Config are a session's timers.
type Config struct {
	// DesiredMinTx is how often this end would send once Up; RequiredMinRx how often it
	// can take packets. The peer's detection time of this end is DetectMult x the larger
	// of DesiredMinTx and the peer's RequiredMinRx.
	DesiredMinTx, RequiredMinRx time.Duration
	DetectMult                  uint8
}

// DefaultConfig detects a lost peer in 300 ms, as FRR's bfdd with 100 ms timers does.
var DefaultConfig = Config{DesiredMinTx: 100 * time.Millisecond, RequiredMinRx: 100 * time.Millisecond, DetectMult: 3}

// slowTx is the most often a session that is not Up may send (section 6.8.3).
const slowTx = time.Second

// Session is one BFD session's state (section 6.8.1) without I/O: Receive takes the peer's
// packets, Expire the passing of time, Packet says what to send and TxInterval how often.
type Session struct {
	cfg                   Config
	state                 State
	diag                  Diag
	localDisc, remoteDisc uint32
	remoteState           State
	remoteMinRx           time.Duration
	remoteDesiredTx       time.Duration
	remoteDetectMult      uint8
	remoteDiag            Diag
	remoteCBit            bool
	desiredTx             time.Duration // bfd.DesiredMinTxInterval, as advertised
	txInUse               time.Duration // what paces this end (lags desiredTx during a poll)
	polling, finalPending bool
	lastRx                time.Time
	// resumed: the session was restored Up from before a restart and the peer has not yet
	// answered; going Down from there is the peer not knowing it, not a loss.
	resumed bool
}

// Saved is what a session keeps across a restart of its process.
type Saved struct {
	LocalDiscriminator  uint32        `json:"localDiscriminator"`
	RemoteDiscriminator uint32        `json:"remoteDiscriminator"`
	RemoteDesiredMinTx  time.Duration `json:"remoteDesiredMinTx"`
	RemoteRequiredMinRx time.Duration `json:"remoteRequiredMinRx"`
	RemoteDetectMult    uint8         `json:"remoteDetectMult"`
}

// Save is the session's state to resume from, if it is Up.
func (s *Session) Save() (Saved, bool) {
	if s.state != Up {
		return Saved{}, false
	}
	return Saved{LocalDiscriminator: s.localDisc, RemoteDiscriminator: s.remoteDisc, RemoteDesiredMinTx: s.remoteDesiredTx,
		RemoteRequiredMinRx: s.remoteMinRx, RemoteDetectMult: s.remoteDetectMult}, true
}

// ResumeSession continues a session that was Up before its process restarted, at now:
// the peer, whose session never noticed if the restart was shorter than its detection time,
// keeps getting Up packets with the discriminators it knows. If it had noticed, it answers
// Down and the session starts over, which is not reported as a loss.
func ResumeSession(cfg Config, sv Saved, now time.Time) *Session {
	s := NewSession(cfg, sv.LocalDiscriminator)
	s.remoteDisc, s.remoteState = sv.RemoteDiscriminator, Up
	s.remoteDesiredTx, s.remoteMinRx, s.remoteDetectMult = sv.RemoteDesiredMinTx, sv.RemoteRequiredMinRx, sv.RemoteDetectMult
	s.lastRx, s.resumed = now, true
	s.state = Up
	s.desiredTx, s.txInUse = s.cfg.DesiredMinTx, s.cfg.DesiredMinTx
	return s
}

// Resumed reports whether the session is a resumed one the peer has not yet confirmed.
func (s *Session) Resumed() bool { return s.resumed }

// NewSession is a session in Down with local discriminator disc (nonzero, unique on the node).
func NewSession(cfg Config, disc uint32) *Session {
	if cfg.DetectMult == 0 {
		cfg.DetectMult = DefaultConfig.DetectMult
	}
	return &Session{cfg: cfg, state: Down, localDisc: disc, remoteState: Down,
		// bfd.RemoteMinRxInterval starts at 1 µs: send at our own (slow) pace until told.
		remoteMinRx: time.Microsecond, desiredTx: max(slowTx, cfg.DesiredMinTx), txInUse: max(slowTx, cfg.DesiredMinTx)}
}

// State is the session's state; Diag why it last went down.
func (s *Session) State() State { return s.state }
func (s *Session) Diag() Diag   { return s.diag }

// RemoteState is the state the peer last reported, and RemoteDiag its diagnostic.
func (s *Session) RemoteState() State { return s.remoteState }
func (s *Session) RemoteDiag() Diag   { return s.remoteDiag }

// RemoteControlPlaneIndependent is the peer's C bit: its BFD survives a restart of its
// routing daemon, so its loss is a forwarding failure even while that daemon restarts.
func (s *Session) RemoteControlPlaneIndependent() bool { return s.remoteCBit }

// LocalDiscriminator identifies the session in the peer's packets.
func (s *Session) LocalDiscriminator() uint32 { return s.localDisc }

// Receive applies a packet from the peer (already checked by Parse and matched to this
// session) received at now. It returns whether the state changed and whether a packet
// should go out at once (a state change, or the Final answering a Poll).
func (s *Session) Receive(p Packet, now time.Time) (changed, sendNow bool) {
	if s.state == AdminDown {
		return false, false // section 6.8.6: discard
	}
	s.remoteDisc = p.MyDiscriminator
	s.remoteState = p.State
	s.remoteDiag = p.Diag
	s.remoteCBit = p.ControlPlaneIndependent
	s.remoteDesiredTx = p.DesiredMinTx
	s.remoteMinRx = p.RequiredMinRx
	s.remoteDetectMult = p.DetectMult
	s.lastRx = now
	// The peer answering Up or Init confirms a resumed session; Down means it had let it go.
	confirmed := p.State == Up || p.State == Init
	defer func() {
		if confirmed || s.state != Up {
			s.resumed = false
		}
	}()
	if p.Final && s.polling {
		s.polling = false
		s.txInUse = s.desiredTx
	}
	if p.Poll {
		s.finalPending, sendNow = true, true
	}
	old := s.state
	if p.State == AdminDown {
		if s.state != Down {
			s.diag = DiagNeighborDown
			s.setState(Down)
		}
	} else {
		switch s.state {
		case Down:
			switch p.State {
			case Down:
				s.setState(Init)
			case Init:
				s.setState(Up)
			}
		case Init:
			if p.State == Init || p.State == Up {
				s.setState(Up)
			}
		case Up:
			if p.State == Down {
				s.diag = DiagNeighborDown
				s.setState(Down)
			}
		}
	}
	if s.state != old {
		return true, true
	}
	return false, sendNow
}

// setState moves to state and sets the timers that go with it: slow (1 s) unless Up; on
// reaching Up the configured rate, announced with a poll sequence.
func (s *Session) setState(state State) {
	s.state = state
	if state == Up {
		s.diag = DiagNone
		s.desiredTx = s.cfg.DesiredMinTx
		// A faster rate may be used at once (section 6.8.3); the poll tells the peer.
		s.txInUse = min(s.txInUse, s.desiredTx)
		s.polling = s.desiredTx != slowTx
		return
	}
	s.desiredTx, s.txInUse, s.polling = max(slowTx, s.cfg.DesiredMinTx), max(slowTx, s.cfg.DesiredMinTx), false
}

// DetectionTime is how long the peer may be silent before the session goes down: its
// multiplier times the larger of our RequiredMinRx and its DesiredMinTx (section 6.8.4).
func (s *Session) DetectionTime() time.Duration {
	return time.Duration(s.remoteDetectMult) * max(s.cfg.RequiredMinRx, s.remoteDesiredTx)
}

// Deadline is when the session expires without another packet; zero when nothing would.
func (s *Session) Deadline() time.Time {
	if s.lastRx.IsZero() || s.remoteDisc == 0 && s.state == Down {
		return time.Time{}
	}
	return s.lastRx.Add(s.DetectionTime())
}

// Expire applies the passing of time: a session in Init or Up whose peer has been silent
// for the detection time goes Down (diagnostic 1), and the peer's discriminator is forgotten.
// It returns whether the state changed.
func (s *Session) Expire(now time.Time) bool {
	d := s.Deadline()
	if d.IsZero() || now.Before(d) {
		return false
	}
	s.remoteDisc = 0
	s.remoteState = Down
	s.lastRx = time.Time{}
	defer func() { s.resumed = false }()
	if s.state == Init || s.state == Up {
		s.diag = DiagDetectionExpired
		s.setState(Down)
		return true
	}
	return false
}

// SetAdminDown takes the session out of service (diagnostic 7): the peer is told, and must
// not take its routing session down for it (RFC 5882 section 3.2).
func (s *Session) SetAdminDown() {
	s.diag = DiagAdminDown
	s.setState(AdminDown)
}

// Packet is the next control packet to send. A pending Final goes out before any Poll:
// one packet never carries both.
func (s *Session) Packet() Packet {
	p := Packet{Diag: s.diag, State: s.state, DetectMult: s.cfg.DetectMult, MyDiscriminator: s.localDisc,
		YourDiscriminator: s.remoteDisc, DesiredMinTx: s.desiredTx, RequiredMinRx: s.cfg.RequiredMinRx}
	if s.finalPending {
		p.Final, s.finalPending = true, false
	} else if s.polling {
		p.Poll = true
	}
	return p
}

// TxInterval is the period of this end's packets before jitter: the larger of its own
// pace and the peer's RequiredMinRx; zero when the peer wants none (RequiredMinRx 0).
func (s *Session) TxInterval() time.Duration {
	if s.remoteMinRx == 0 {
		return 0
	}
	return max(s.txInUse, s.remoteMinRx)
}
