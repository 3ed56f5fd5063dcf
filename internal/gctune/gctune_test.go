package gctune

import (
	"context"
	"io"
	"log/slog"
	"math/rand"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

var testPolicy = Policy{IdlePercent: 25, BusyPercent: 100, IdleRate: 2, BusyRate: 8, BusyWindow: time.Second, IdleAfter: 3 * time.Second}

// steps feeds a second's allocated bytes at a time to Next, from t0+1s, and returns the states
// after each.
func steps(p Policy, rates []float64) []State {
	t0 := time.Unix(1000, 0)
	var s State
	var out []State
	for i, r := range rates {
		s = p.Next(s, t0.Add(time.Duration(i+1)*time.Second), r)
		out = append(out, s)
	}
	return out
}

func TestNext(t *testing.T) {
	cases := []struct {
		name  string
		rates []float64
		want  string // I idle, B busy, after each
	}{
		{"start-up counts as busy for IdleAfter", []float64{0, 0, 0, 0, 0}, "BBBII"},
		{"a burst at BusyRate makes idle busy at once", []float64{0, 0, 0, 0, 8, 0, 0, 0, 0}, "BBBIBBBII"},
		{"spikes below BusyRate average out", []float64{0, 0, 0, 0, 6, 0, 0, 6, 0, 0}, "BBBIIIIIII"},
		{"a sustained average at twice IdleRate is busy", []float64{0, 0, 0, 0, 5, 5, 5, 5, 5}, "BBBIIIBBB"},
		{"busy stays busy while the average is at IdleRate", []float64{9, 3, 3, 3, 3, 3, 3, 3, 3, 3}, "BBBBBBBBBB"},
		{"a high start counts until it leaves the window", []float64{7, 0, 0, 0, 0, 0, 0}, "BBBIIII"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i, s := range steps(testPolicy, c.rates) {
				got := map[bool]byte{true: 'I', false: 'B'}[s.Idle]
				if got != c.want[i] {
					t.Fatalf("after %v (second %d): %c, want %c (average %.2f)", c.rates[:i+1], i+1, got, c.want[i], testPolicy.Average(s))
				}
				if want := map[bool]int{true: 25, false: 100}[s.Idle]; testPolicy.Percent(s) != want {
					t.Fatalf("percent %d, want %d", testPolicy.Percent(s), want)
				}
			}
		})
	}
}

// TestNextProperties drives random rate sequences through Next and checks the rules that
// must hold whatever the sequence: an interval at BusyRate is never idle; no state is idle
// within IdleAfter of the last interval at BusyRate (or of the start); an idle state's average
// is below twice IdleRate; a busy state that was idle before saw BusyRate or that average.
func TestNextProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	t0 := time.Unix(0, 0)
	for run := 0; run < 3000; run++ {
		var s State
		lastBusy := t0.Add(time.Second)
		for i := 1; i <= 60; i++ {
			now := t0.Add(time.Duration(i) * time.Second)
			r := []float64{0, 0, 0.5, 1, 2, 3, 5, 8, 20}[rng.Intn(9)]
			prev := s
			s = testPolicy.Next(s, now, r)
			if r >= testPolicy.BusyRate {
				lastBusy = now
				if s.Idle {
					t.Fatalf("run %d step %d: idle at rate %v", run, i, r)
				}
			}
			if s.Idle && !prev.Idle && now.Sub(lastBusy) < testPolicy.IdleAfter {
				t.Fatalf("run %d step %d: idle %v after a burst", run, i, now.Sub(lastBusy))
			}
			if len(s.Window) > 3 { // the intervals of the last IdleAfter, no more
				t.Fatalf("run %d step %d: window of %d intervals", run, i, len(s.Window))
			}
			if s.Idle && testPolicy.Average(s) >= 2*testPolicy.IdleRate {
				t.Fatalf("run %d step %d: idle at average %.2f", run, i, testPolicy.Average(s))
			}
			if prev.Idle && !s.Idle && r < testPolicy.BusyRate && testPolicy.Average(s) < 2*testPolicy.IdleRate {
				t.Fatalf("run %d step %d: left idle at rate %v average %.2f", run, i, r, testPolicy.Average(s))
			}
			if !prev.Idle && s.Idle && testPolicy.Average(s) >= testPolicy.IdleRate {
				t.Fatalf("run %d step %d: entered idle at average %.2f", run, i, testPolicy.Average(s))
			}
		}
	}
}

// TestBusyWindow: with intervals shorter than BusyWindow, a spike in one interval counts at
// its share of the window, and a burst that fills the window is busy as soon as it does.
func TestBusyWindow(t *testing.T) {
	p := testPolicy // BusyRate 8/s over 1s, IdleRate 2/s over 3s
	t0 := time.Unix(0, 0)
	q := 250 * time.Millisecond
	var s State
	at := time.Duration(0)
	step := func(bytes float64) {
		at += q
		s = p.Next(s, t0.Add(at), bytes)
	}
	for at < 4*time.Second { // idle after start-up
		step(0)
	}
	if !s.Idle {
		t.Fatal("not idle after start-up")
	}
	step(6) // 6 bytes in a quarter second: 6/s over the window
	if !s.Idle {
		t.Fatal("a spike below BusyRate over the window made it busy")
	}
	for i := 0; i < 4 && s.Idle; i++ {
		step(0)
	}
	if !s.Idle {
		t.Fatal("busy after the spike")
	}
	step(10) // 10 bytes in a quarter second: 10/s over the window
	if s.Idle {
		t.Fatal("a burst above BusyRate over the window left it idle")
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultPolicy(25).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []Policy{
		{IdlePercent: -1, BusyPercent: 100, IdleRate: 1, BusyRate: 2},
		{IdlePercent: 200, BusyPercent: 100, IdleRate: 1, BusyRate: 2},
		{IdlePercent: 25, BusyPercent: 100, IdleRate: 3, BusyRate: 2},
		{IdlePercent: 25, BusyPercent: 100, IdleRate: 2, BusyRate: 3, IdleAfter: time.Second},
		{IdlePercent: 25, BusyPercent: 100, IdleRate: 0, BusyRate: 2},
		{IdlePercent: 25, BusyPercent: 100, IdleRate: 1, BusyRate: 2, IdleAfter: 0},
		{IdlePercent: 25, BusyPercent: 100, IdleRate: 1, BusyRate: 2, IdleAfter: time.Second},
		{IdlePercent: 25, BusyPercent: 100, IdleRate: 1, BusyRate: 2, IdleAfter: time.Second, BusyWindow: 2 * time.Second},
	} {
		if p.Validate() == nil {
			t.Errorf("%+v accepted", p)
		}
	}
}

func TestNewOff(t *testing.T) {
	if tu, err := New(0, nil); tu != nil || err != nil {
		t.Fatalf("0: %v %v", tu, err)
	}
	t.Setenv("GOGC", "80")
	if tu, err := New(25, discard()); tu != nil || err != nil {
		t.Fatalf("with GOGC set: %v %v", tu, err)
	}
}

func TestNewRejectsAboveBusy(t *testing.T) {
	if _, err := New(150, discard()); err == nil {
		t.Fatal("150 accepted")
	}
}

// fakeRuntime records what the tuner sets; the test feeds allocations and the clock.
type fakeRuntime struct {
	mu       sync.Mutex
	bytes    uint64
	percents []int
	releases int
}

func (f *fakeRuntime) runtime() Runtime {
	return Runtime{
		AllocatedBytes: func() uint64 { f.mu.Lock(); defer f.mu.Unlock(); return f.bytes },
		SetPercent:     func(p int) { f.mu.Lock(); defer f.mu.Unlock(); f.percents = append(f.percents, p) },
		Release:        func() { f.mu.Lock(); defer f.mu.Unlock(); f.releases++ },
	}
}

func TestRunSetsAndReleases(t *testing.T) {
	f := &fakeRuntime{}
	var mu sync.Mutex
	clock := time.Unix(0, 0)
	tu := &Tuner{Policy: testPolicy, Runtime: f.runtime(), Interval: time.Millisecond,
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); clock = clock.Add(time.Second); return clock }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- tu.Run(ctx) }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: %+v", what, f)
			}
			time.Sleep(time.Millisecond)
		}
	}
	last := func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.percents) == 0 {
			return 0
		}
		return f.percents[len(f.percents)-1]
	}
	// Nothing allocated: idle after IdleAfter of fake seconds, and released once.
	waitFor("idle", func() bool { return last() == 25 })
	f.mu.Lock()
	if f.releases != 1 || f.percents[0] != 100 {
		t.Fatalf("entering idle: %+v", f)
	}
	// A burst: 100 bytes in a fake second is busy.
	f.bytes += 1000
	f.mu.Unlock()
	waitFor("busy", func() bool { return last() == 100 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Run leaves the busy target; every entry into idle released once.
	idles := 0
	for _, p := range f.percents {
		if p == 25 {
			idles++
		}
	}
	if f.percents[len(f.percents)-1] != 100 || f.releases != idles {
		t.Fatalf("after Run: %+v", f)
	}
}

// TestGoRuntime runs the tuner on this process's runtime: allocating keeps it at the busy
// target, stopping lets it go idle, and the runtime's own GOGC reading follows.
func TestGoRuntime(t *testing.T) {
	gogc := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	p := Policy{IdlePercent: 30, BusyPercent: 100, IdleRate: 8 << 20, BusyRate: 64 << 20, BusyWindow: 20 * time.Millisecond, IdleAfter: 100 * time.Millisecond}
	tu := &Tuner{Policy: p, Runtime: GoRuntime(), Interval: 10 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- tu.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		if g := gogc(); g != 100 {
			t.Errorf("GOGC after Run: %d", g)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for gogc() != 30 {
		if time.Now().After(deadline) {
			t.Fatalf("never idle: GOGC %d", gogc())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Allocate far above BusyRate until the tuner sees it.
	var sink [][]byte
	for gogc() != 100 {
		if time.Now().After(deadline) {
			t.Fatalf("never busy: GOGC %d", gogc())
		}
		for i := 0; i < 64; i++ {
			sink = append(sink, make([]byte, 64<<10))
		}
		if len(sink) > 4096 {
			sink = sink[:0]
		}
	}
	_ = sink
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
