package flows

import (
	"sync"
	"sync/atomic"
)

// store keeps the newest flows in a ring of fixed size and hands new ones to followers. A
// follower that does not keep up loses flows (counted), never slows the reader.
type store struct {
	mu        sync.Mutex
	ring      []Flow
	next      int
	full      bool
	followers map[*follower]struct{}
	// followerLost counts flows followers lost, for the metrics.
	followerLost atomic.Uint64
}

// follower receives the flows its filter picks as they come.
type follower struct {
	ch     chan Flow
	filter Filter
	lost   atomic.Uint64
}

func newStore(capacity int) *store {
	return &store{ring: make([]Flow, capacity), followers: map[*follower]struct{}{}}
}

func (s *store) add(f Flow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ring[s.next] = f
	s.next++
	if s.next == len(s.ring) {
		s.next, s.full = 0, true
	}
	for fl := range s.followers {
		if !fl.filter.Match(&f) {
			continue
		}
		select {
		case fl.ch <- f:
		default:
			fl.lost.Add(1)
			s.followerLost.Add(1)
		}
	}
}

// last is the newest n flows filter picks, oldest first.
func (s *store) last(n int, filter Filter) []Flow {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Flow
	size := s.next
	if s.full {
		size = len(s.ring)
	}
	for i := 0; i < size && len(out) < n; i++ {
		idx := (s.next - 1 - i + len(s.ring)) % len(s.ring)
		if filter.Match(&s.ring[idx]) {
			out = append(out, s.ring[idx])
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// follow returns a follower of the flows from now on, and what ends it.
func (s *store) follow(filter Filter, buffer int) (*follower, func()) {
	fl := &follower{ch: make(chan Flow, buffer), filter: filter}
	s.mu.Lock()
	s.followers[fl] = struct{}{}
	s.mu.Unlock()
	return fl, func() {
		s.mu.Lock()
		delete(s.followers, fl)
		s.mu.Unlock()
	}
}
