// Package gctune lowers the garbage collector's target while a skiff process is idle and puts
// Go's default back the moment it is busy.
//
// Go sizes the heap at (1 + GOGC/100) times what survived the last collection: at the
// default GOGC=100 an idle API server holding 40 MB carries up to 40 MB more of garbage
// between collections, most of the difference between its live heap and its anonymous
// memory. A lower GOGC shrinks that headroom but costs CPU in proportion to the allocation
// rate (collections come GOGC/100 × live bytes apart), so a fixed low GOGC makes every burst
// of requests slower (BenchmarkGCTarget: GOGC=50 costs 1.13-1.46x the CPU of a burst). At
// idle the allocation rate is a megabyte or so a second, and a collection every several
// seconds is a fraction of a percent of a core; under load it is a hundred times that. So the
// Tuner watches the allocation rate: once its average has been below IdleRate with no burst
// for IdleAfter, the process is idle and runs at IdlePercent, giving what the heap grew to
// back to the system at once; BusyRate's worth allocated within BusyWindow (or an average
// twice IdleRate) makes it busy again at the next quarter-second tick, at BusyPercent (Go's
// default). An operator's own GOGC turns
// the tuner off: their choice stands.
package gctune

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Policy decides the target from the allocation rate; it does no I/O.
type Policy struct {
	// IdlePercent and BusyPercent are the GOGC values while idle and while busy.
	IdlePercent, BusyPercent int
	// BusyRate is the allocation rate (bytes a second, over the last BusyWindow) at which
	// the process is busy at once. The window is longer than the tuner's interval so that a
	// spike of a few megabytes in one interval (a metrics scrape) is not a burst, while a
	// real burst is seen within the interval it starts in.
	BusyRate   float64
	BusyWindow time.Duration
	// IdleRate is what the average rate over the last IdleAfter must fall below, with the
	// rate not at BusyRate for IdleAfter, before the process is idle; it is busy again when
	// the average reaches twice IdleRate. An idle server's work comes in spikes (a lease
	// renewed, a watch bookmark, a metrics scrape, a resync), so it is the average that
	// tells idle from busy, not any one second; and the band between the two thresholds
	// keeps a process at the edge from flipping back and forth.
	IdleRate  float64
	IdleAfter time.Duration
}

// DefaultIdlePercent is the idle target of `skiff server` and `skiff agent`.
const DefaultIdlePercent = 25

// DefaultPolicy is skiff's: an idle server allocates about 1.4 MB a second on average
// (leases, watch bookmarks, metrics scrapes), an idle agent less; a client listing or
// creating a few objects a second is busy.
func DefaultPolicy(idlePercent int) Policy {
	return Policy{IdlePercent: idlePercent, BusyPercent: 100,
		IdleRate: 2 << 20, BusyRate: 16 << 20, BusyWindow: time.Second, IdleAfter: 30 * time.Second}
}

// Validate rejects a policy that cannot work.
func (p Policy) Validate() error {
	switch {
	case p.IdlePercent <= 0 || p.BusyPercent <= 0:
		return fmt.Errorf("GC percents must be positive (idle %d, busy %d)", p.IdlePercent, p.BusyPercent)
	case p.IdlePercent > p.BusyPercent:
		return fmt.Errorf("idle GC percent %d is above the busy one %d", p.IdlePercent, p.BusyPercent)
	case p.IdleRate <= 0 || p.BusyRate < 2*p.IdleRate:
		return fmt.Errorf("idle rate %.0f must be positive and at most half the busy rate %.0f", p.IdleRate, p.BusyRate)
	case p.IdleAfter <= 0:
		return fmt.Errorf("idle delay %v is not positive", p.IdleAfter)
	case p.BusyWindow <= 0 || p.BusyWindow > p.IdleAfter:
		return fmt.Errorf("busy window %v must be positive and at most the idle delay %v", p.BusyWindow, p.IdleAfter)
	}
	return nil
}

// State is what the policy remembers between intervals.
type State struct {
	Idle bool
	// LastBusy is when the rate last reached BusyRate, or when the process started.
	LastBusy time.Time
	// Window holds the intervals that ended within IdleAfter, oldest first.
	Window []Interval
}

// Interval is one interval's end and the bytes allocated in it.
type Interval struct {
	End   time.Time
	Bytes float64
}

// Average is the allocation rate over the IdleAfter before the last interval's end.
func (p Policy) Average(s State) float64 { return p.rate(s, p.IdleAfter) }

// rate is the allocation rate over the d before the last interval's end.
func (p Policy) rate(s State, d time.Duration) float64 {
	if len(s.Window) == 0 {
		return 0
	}
	end := s.Window[len(s.Window)-1].End
	var sum float64
	for _, i := range s.Window {
		if end.Sub(i.End) < d {
			sum += i.Bytes
		}
	}
	return sum / d.Seconds()
}

// Next is the state after an interval ending at now in which the process allocated bytes.
func (p Policy) Next(s State, now time.Time, bytes float64) State {
	if s.LastBusy.IsZero() { // start-up counts as busy
		s.LastBusy = now
	}
	// Window is oldest first: drop the intervals that ended IdleAfter ago or more.
	old := 0
	for old < len(s.Window) && now.Sub(s.Window[old].End) >= p.IdleAfter {
		old++
	}
	s.Window = append(s.Window[old:], Interval{End: now, Bytes: bytes})
	busy := p.rate(s, p.BusyWindow) >= p.BusyRate
	if busy {
		s.LastBusy = now
	}
	average := p.Average(s)
	if s.Idle {
		s.Idle = !busy && average < 2*p.IdleRate
	} else {
		s.Idle = average < p.IdleRate && now.Sub(s.LastBusy) >= p.IdleAfter
	}
	return s
}

// Percent is the GOGC for a state.
func (p Policy) Percent(s State) int {
	if s.Idle {
		return p.IdlePercent
	}
	return p.BusyPercent
}

// Runtime is what the tuner reads and sets; the Go runtime's by default, a fake in tests.
type Runtime struct {
	// AllocatedBytes is the total of bytes ever allocated on the heap.
	AllocatedBytes func() uint64
	// SetPercent sets GOGC.
	SetPercent func(int)
	// Release collects and returns every free page to the system (debug.FreeOSMemory).
	Release func()
}

// GoRuntime is the process's own runtime.
func GoRuntime() Runtime {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	return Runtime{
		AllocatedBytes: func() uint64 {
			metrics.Read(sample)
			if sample[0].Value.Kind() != metrics.KindUint64 {
				return 0
			}
			return sample[0].Value.Uint64()
		},
		SetPercent: func(p int) { debug.SetGCPercent(p) },
		Release:    debug.FreeOSMemory,
	}
}

// Tuner applies a Policy to a Runtime every Interval.
type Tuner struct {
	Policy   Policy
	Runtime  Runtime
	Interval time.Duration
	Log      *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// New is a tuner of this process with DefaultPolicy(idlePercent), or nil when it should not
// run: idlePercent 0 (off), or GOGC set in the environment (the operator's target stands).
func New(idlePercent int, log *slog.Logger) (*Tuner, error) {
	if idlePercent == 0 {
		return nil, nil
	}
	if v, ok := os.LookupEnv("GOGC"); ok {
		log.Info("GOGC is set: the garbage collector's target is left as set", "GOGC", v)
		return nil, nil
	}
	p := DefaultPolicy(idlePercent)
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("--idle-gc-percent: %w", err)
	}
	return &Tuner{Policy: p, Runtime: GoRuntime(), Interval: 250 * time.Millisecond, Log: log}, nil
}

// Run tunes until ctx ends, and leaves the busy target set when it returns.
func (t *Tuner) Run(ctx context.Context) error {
	now := t.Now
	if now == nil {
		now = time.Now
	}
	ticker := time.NewTicker(t.Interval)
	defer ticker.Stop()
	var s State
	t.Runtime.SetPercent(t.Policy.BusyPercent)
	defer t.Runtime.SetPercent(t.Policy.BusyPercent)
	lastBytes := t.Runtime.AllocatedBytes()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		bytes, at := t.Runtime.AllocatedBytes(), now()
		next := t.Policy.Next(s, at, float64(bytes-lastBytes))
		lastBytes = bytes
		if next.Idle != s.Idle {
			t.Runtime.SetPercent(t.Policy.Percent(next))
			if next.Idle {
				// The heap grew to the busy target; give back what it no longer needs now
				// rather than as the runtime's scavenger gets to it.
				t.Runtime.Release()
			}
			if t.Log != nil {
				t.Log.Debug("garbage collector target", "GOGC", t.Policy.Percent(next), "idle", next.Idle, "averageMiBps", t.Policy.Average(next)/(1<<20))
			}
		}
		s = next
	}
}
