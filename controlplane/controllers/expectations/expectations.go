// Package expectations is the bookkeeping upstream's ReplicaSet and ReplicationController
// controllers keep between a sync's pod writes and the informer showing them.
package expectations

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Expectations remember, per controller key, the pod creations and deletions a sync
// asked for that the pod informer has not shown yet. Until they are seen the cache is behind
// the API, and acting on it would create (or delete) pods a second time. Creations are
// counted; deletions are tracked by pod UID, as upstream, because a pod's deletion is seen
// twice (its deletionTimestamp, then its removal) and counting both would call the controller
// satisfied while another victim still looks alive, and a second victim would die for it.
// An expectation expires after ttl, as upstream's, so a missed event cannot wedge a controller.
type Expectations struct {
	mu      sync.Mutex
	pending map[string]*expectation
	ttl     time.Duration
	now     func() time.Time
}

type expectation struct {
	adds int
	dels map[types.UID]bool
	at   time.Time
}

// New returns empty expectations that expire after 5 minutes, as upstream's.
func New() *Expectations {
	return &Expectations{pending: map[string]*expectation{}, ttl: 5 * time.Minute, now: time.Now}
}

// SetClock replaces the clock expectations are dated and expired by (tests).
func (e *Expectations) SetClock(now func() time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = now
}

// Pending says whether anything is recorded for key, satisfied or not.
func (e *Expectations) Pending(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.pending[key]
	return ok
}

// Expect records the creations and the deletions (by pod UID) about to be made for key. It
// replaces what was there: it is only called once the previous expectation was satisfied.
func (e *Expectations) Expect(key string, adds int, dels []types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := &expectation{adds: adds, dels: make(map[types.UID]bool, len(dels)), at: e.now()}
	for _, uid := range dels {
		x.dels[uid] = true
	}
	e.pending[key] = x
}

// Created lowers key's expected creations by n: the informer showed new pods, or the calls
// failed or were never made, so no pod will show.
func (e *Expectations) Created(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.pending[key]; ok {
		x.adds -= n
	}
}

// Deleted marks the deletion of pod uid as seen (or as not going to happen); a pod the sync
// did not ask to delete changes nothing, and seeing one twice counts once.
func (e *Expectations) Deleted(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.pending[key]; ok {
		delete(x.dels, uid)
	}
}

// Satisfied is true when nothing is pending for key, or what is pending has expired.
func (e *Expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.pending[key]
	if !ok || (x.adds <= 0 && len(x.dels) == 0) || e.now().Sub(x.at) > e.ttl {
		delete(e.pending, key)
		return true
	}
	return false
}

// Forget drops key's expectation: its controller was deleted, or replaced under the same name.
func (e *Expectations) Forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pending, key)
}
