package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newFast(ctx context.Context) *Supervisor {
	s := New(ctx, quiet)
	s.MinBackoff, s.MaxBackoff = time.Millisecond, 8*time.Millisecond
	return s
}

// blocker runs until its context ends and records that it was stopped.
func blocker(stopped *atomic.Bool) func(context.Context) error {
	return func(ctx context.Context) error {
		<-ctx.Done()
		stopped.Store(true)
		return nil
	}
}

func TestFatalFailureStopsEverything(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(context.Context) error
		want string
	}{
		{"error", func(context.Context) error { return errors.New("listen :179: address in use") }, "bgp: listen :179: address in use"},
		{"returned nil early", func(context.Context) error { return nil }, "bgp: stopped"},
		{"panic", func(context.Context) error { panic("boom") }, "bgp: panic: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFast(context.Background())
			var other atomic.Bool
			s.Go(Part{Name: "pods", Policy: Fatal, Run: blocker(&other)})
			s.Go(Part{Name: "bgp", Policy: Fatal, Run: tc.run})
			err := s.Wait()
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Wait() = %v, want %q", err, tc.want)
			}
			if !other.Load() {
				t.Fatal("the other part was not stopped before Wait returned")
			}
			if h := s.Health(); h == nil || !strings.Contains(h.Error(), "bgp: ") {
				t.Fatalf("Health() = %v", h)
			}
		})
	}
}

// TestRestartProcessEndsEverything: a restartable part that asks for the process to start
// again (ErrRestartProcess) is not restarted alone: every part stops and Wait says why.
func TestRestartProcessEndsEverything(t *testing.T) {
	s := newFast(context.Background())
	var other atomic.Bool
	var runs atomic.Int32
	s.Go(Part{Name: "pods", Policy: Fatal, Run: blocker(&other)})
	s.Go(Part{Name: "ca-trust", Policy: Restart, Run: func(context.Context) error {
		runs.Add(1)
		return fmt.Errorf("the CA bundle changed: %w", ErrRestartProcess)
	}})
	err := s.Wait()
	if !errors.Is(err, ErrRestartProcess) || !strings.HasPrefix(err.Error(), "ca-trust: the CA bundle changed") {
		t.Fatalf("Wait() = %v, want ca-trust's ErrRestartProcess", err)
	}
	if !other.Load() || runs.Load() != 1 {
		t.Fatalf("other part stopped: %v; ca-trust ran %d times, want once", other.Load(), runs.Load())
	}
}

// TestRestartWithBackoffIsVisible: a restartable part that fails is restarted; while it is
// down, Health and Report name it and its error; once it runs again, Health is nil and the
// restarts are counted.
func TestRestartWithBackoffIsVisible(t *testing.T) {
	s := newFast(context.Background())
	s.MinBackoff, s.MaxBackoff = 30*time.Millisecond, 30*time.Millisecond
	var attempts atomic.Int32
	release := make(chan struct{})
	s.Go(Part{Name: "service-proxy", Policy: Restart, Run: func(ctx context.Context) error {
		if attempts.Add(1) <= 2 {
			return errors.New("maps: no such file")
		}
		<-ctx.Done()
		return nil
	}})
	s.Go(Part{Name: "pods", Policy: Fatal, Run: func(ctx context.Context) error {
		select {
		case <-ctx.Done():
		case <-release:
		}
		<-ctx.Done()
		return nil
	}})
	deadline := time.Now().Add(5 * time.Second)
	sawDown := false
	for time.Now().Before(deadline) {
		seen := attempts.Load()
		if h := s.Health(); h != nil {
			if !strings.Contains(h.Error(), "service-proxy: maps: no such file") {
				t.Fatalf("Health() = %v", h)
			}
			// Health and Report are two looks: on a loaded machine the part's next attempt
			// may start between them, and only then may Report call it ok.
			r := s.Report()
			down := strings.Contains(r, "[-]service-proxy failed: maps: no such file")
			restarted := strings.Contains(r, "[+]service-proxy ok") && attempts.Load() > seen
			if !(down || restarted) || !strings.Contains(r, "[+]pods ok") {
				t.Fatalf("Report() = %q after %d attempts", r, attempts.Load())
			}
			sawDown = true
		} else if attempts.Load() >= 3 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if !sawDown {
		t.Fatal("the failing part never showed in Health")
	}
	if h := s.Health(); h != nil || attempts.Load() != 3 {
		t.Fatalf("after recovery: Health() = %v, attempts %d", h, attempts.Load())
	}
	for _, st := range s.Statuses() {
		if st.Name == "service-proxy" && (st.Restarts != 2 || !st.Running || st.LastError != "maps: no such file") {
			t.Fatalf("status %+v", st)
		}
	}
	close(release)
	s.Stop()
	if err := s.Wait(); err != nil {
		t.Fatalf("Wait after Stop = %v", err)
	}
}

func TestParentCancelIsACleanStop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := newFast(ctx)
	var a, b atomic.Bool
	s.Go(Part{Name: "a", Policy: Fatal, Run: blocker(&a)})
	s.Go(Part{Name: "b", Policy: Restart, Run: blocker(&b)})
	cancel()
	if err := s.Wait(); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	if !a.Load() || !b.Load() {
		t.Fatal("a part was still running")
	}
}

// TestAttemptContextEndsWithTheAttempt: what a failed attempt started with its context stops
// before the next attempt runs.
func TestAttemptContextEndsWithTheAttempt(t *testing.T) {
	s := newFast(context.Background())
	leftover := make(chan struct{})
	var attempts atomic.Int32
	s.Go(Part{Name: "bgp", Policy: Restart, Run: func(ctx context.Context) error {
		if attempts.Add(1) == 1 {
			go func() { <-ctx.Done(); close(leftover) }()
			return errors.New("watch failed")
		}
		select {
		case <-leftover:
		case <-time.After(5 * time.Second):
			t.Error("the first attempt's goroutine still ran when the second started")
		}
		<-ctx.Done()
		return nil
	}})
	deadline := time.Now().Add(5 * time.Second)
	for attempts.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	s.Stop()
	if attempts.Load() < 2 {
		t.Fatal("never restarted")
	}
}
