// Package supervisor runs a process's long-running parts — each a Run(ctx) error — so that a
// failure is never only a log line: a part that must not stop (Fatal) ends the whole process
// with its error, one that can be retried (Restart) is restarted with exponential backoff,
// and either way its state is what the process's /healthz, metrics and Node conditions
// report (Health, Statuses).
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"
)

// Policy says what a part's return means.
type Policy int

const (
	// Fatal: the part returning before the process's context ends — with an error or not —
	// stops every part, and Wait returns its error.
	Fatal Policy = iota
	// Restart: the part is started again after a backoff that doubles from MinBackoff to
	// MaxBackoff (and starts over once the part has run for MaxBackoff without failing).
	Restart
)

// ErrRestartProcess, wrapped in a part's error, ends the process as a Fatal part does,
// whatever the part's policy, and asks its command to start the process again (the same
// binary, arguments and PID): the part changed something every part must load from the
// start, such as the cluster's CA bundle.
var ErrRestartProcess = errors.New("the process must start again")

// Part is one long-running part of the process.
type Part struct {
	Name   string
	Policy Policy
	Run    func(ctx context.Context) error
}

// Status is a part's state as last seen.
type Status struct {
	Name string
	// Running is false while a restarted part waits out its backoff, and once a part ended.
	Running  bool
	Restarts int
	// LastError is the error of its last return, "" if it never failed.
	LastError string
	// Since is when the part entered its current state.
	Since time.Time
}

// Supervisor runs parts until its context ends or a fatal part fails.
type Supervisor struct {
	log                    *slog.Logger
	ctx                    context.Context
	cancel                 context.CancelCauseFunc
	wg                     sync.WaitGroup
	MinBackoff, MaxBackoff time.Duration

	mu     sync.Mutex
	status map[string]*Status
}

// New makes a supervisor whose parts run under ctx.
func New(ctx context.Context, log *slog.Logger) *Supervisor {
	ctx, cancel := context.WithCancelCause(ctx)
	return &Supervisor{log: log, ctx: ctx, cancel: cancel, MinBackoff: time.Second, MaxBackoff: 30 * time.Second,
		status: map[string]*Status{}}
}

// Context ends when the supervisor stops (its parent ended or a fatal part failed).
func (s *Supervisor) Context() context.Context { return s.ctx }

// Go starts a part.
func (s *Supervisor) Go(p Part) {
	s.set(p.Name, func(st *Status) { st.Running = true })
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		backoff := s.MinBackoff
		for {
			started := time.Now()
			// Each attempt has its own context, ended when it returns: whatever it started
			// with that context stops, instead of running beside the next attempt.
			attempt, cancel := context.WithCancel(s.ctx)
			err := run(attempt, p)
			cancel()
			if s.ctx.Err() != nil {
				s.set(p.Name, func(st *Status) { st.Running = false })
				return
			}
			if err == nil {
				err = errors.New("stopped")
			}
			if p.Policy == Fatal || errors.Is(err, ErrRestartProcess) {
				s.set(p.Name, func(st *Status) { st.Running, st.LastError = false, err.Error() })
				if errors.Is(err, ErrRestartProcess) {
					s.log.Info("a part asks for the process to start again; stopping", "part", p.Name, "reason", err)
				} else {
					s.log.Error("a required part failed; stopping", "part", p.Name, "err", err)
				}
				s.cancel(fmt.Errorf("%s: %w", p.Name, err))
				return
			}
			if time.Since(started) >= s.MaxBackoff {
				backoff = s.MinBackoff
			}
			var restarts int
			s.set(p.Name, func(st *Status) {
				st.Running, st.LastError = false, err.Error()
				st.Restarts++
				restarts = st.Restarts
			})
			s.log.Error("part failed; restarting", "part", p.Name, "err", err, "in", backoff, "restarts", restarts)
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, s.MaxBackoff)
			s.set(p.Name, func(st *Status) { st.Running = true })
		}
	}()
}

// run calls the part, turning a panic into its error so that one part's bug is handled by
// its policy rather than taking the process down without a word.
func run(ctx context.Context, p Part) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return p.Run(ctx)
}

func (s *Supervisor) set(name string, f func(*Status)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status[name]
	if st == nil {
		st = &Status{Name: name}
		s.status[name] = st
	}
	was := *st
	f(st)
	if was.Running != st.Running || was.Since.IsZero() {
		st.Since = time.Now()
	}
}

// Wait blocks until every part has returned: after the parent context ended (nil), or after
// a fatal part failed (that part's error, the others stopped).
func (s *Supervisor) Wait() error {
	<-s.ctx.Done()
	s.wg.Wait()
	if cause := context.Cause(s.ctx); cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
		return cause
	}
	return nil
}

// Stop ends every part (as the parent context ending would) and waits for them.
func (s *Supervisor) Stop() {
	s.cancel(context.Canceled)
	s.wg.Wait()
}

// Statuses lists every part's state, by name.
func (s *Supervisor) Statuses() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, 0, len(s.status))
	for _, st := range s.status {
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// down describes a part that does not run: its last error (or "not running") and restarts.
func down(st Status) string {
	reason := st.LastError
	if reason == "" {
		reason = "not running"
	}
	if st.Restarts > 0 {
		reason += fmt.Sprintf(" (restarted %d times)", st.Restarts)
	}
	return reason
}

// Health is nil while every part runs, else an error naming each part that does not and
// why, e.g. "bgp: listen tcp :179: address already in use (restarted 3 times)".
func (s *Supervisor) Health() error {
	var bad []string
	for _, st := range s.Statuses() {
		if !st.Running {
			bad = append(bad, st.Name+": "+down(st))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return errors.New(strings.Join(bad, "; "))
}

// Report is the /healthz?verbose body, as the API server prints its checks: "[+]name ok" or
// "[-]name failed: reason", one a line.
func (s *Supervisor) Report() string {
	var b strings.Builder
	for _, st := range s.Statuses() {
		if st.Running {
			fmt.Fprintf(&b, "[+]%s ok\n", st.Name)
		} else {
			fmt.Fprintf(&b, "[-]%s failed: %s\n", st.Name, down(st))
		}
	}
	return b.String()
}
