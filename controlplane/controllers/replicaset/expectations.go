package replicaset

import (
	"sync"
	"time"
)

// expectations remember how many pod creations and deletions a sync asked for and have not
// been observed through the informer yet, so the next sync does not act on a stale cache and
// create the same pods twice. They expire, as upstream's do, in case an event was missed.
type expectations struct {
	mu      sync.Mutex
	pending map[string]*expectation
	ttl     time.Duration
	now     func() time.Time
}

type expectation struct {
	adds, dels int
	at         time.Time
}

func newExpectations() *expectations {
	return &expectations{pending: map[string]*expectation{}, ttl: 5 * time.Minute, now: time.Now}
}

// Expect records creations and deletions about to be made for key.
func (e *expectations) Expect(key string, adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pending[key] = &expectation{adds: adds, dels: dels, at: e.now()}
}

// Observed lowers the expectation after an informer event or a failed call.
func (e *expectations) Observed(key string, adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.pending[key]; ok {
		x.adds -= adds
		x.dels -= dels
	}
}

// Satisfied is true when nothing is pending for key (or the expectation expired).
func (e *expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.pending[key]
	if !ok || (x.adds <= 0 && x.dels <= 0) || e.now().Sub(x.at) > e.ttl {
		delete(e.pending, key)
		return true
	}
	return false
}

// Forget drops the expectation of a deleted controller.
func (e *expectations) Forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pending, key)
}
