package scheduler

import (
	"container/heap"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// queue holds pods waiting to be scheduled: an active heap (higher priority first, then
// first come), and pods that failed and wait for their backoff or for a cluster change that
// may make them fit (a node added or updated, a pod removed).
type queue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	active podHeap
	items  map[string]*entry
	closed bool
	now    func() time.Time
	// initialBackoff and maxBackoff bound the retry delay of a failing pod (1 s .. 10 s).
	initialBackoff, maxBackoff time.Duration
}

type entry struct {
	pod      *corev1.Pod
	key      string
	added    time.Time
	attempts int
	// state: inActive (in the heap), inFlight (popped, being scheduled), waiting (failed).
	state        int
	backoffUntil time.Time
	index        int
}

const (
	inActive = iota
	inFlight
	waiting
)

func newQueue() *queue {
	q := &queue{items: map[string]*entry{}, now: time.Now, initialBackoff: time.Second, maxBackoff: 10 * time.Second}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func keyOf(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// Add queues a pod or refreshes the queued copy.
func (q *queue) Add(p *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := keyOf(p)
	if e, ok := q.items[k]; ok {
		e.pod = p
		return
	}
	e := &entry{pod: p, key: k, added: q.now(), state: inActive}
	q.items[k] = e
	heap.Push(&q.active, e)
	q.cond.Signal()
}

// Delete forgets a pod (deleted, or bound by someone else).
func (q *queue) Delete(p *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := keyOf(p)
	e, ok := q.items[k]
	if !ok {
		return
	}
	if e.state == inActive {
		heap.Remove(&q.active, e.index)
	}
	delete(q.items, k)
}

// Pop blocks until a pod is active, marks it in flight and returns it; ok is false once the
// queue is closed.
func (q *queue) Pop() (*corev1.Pod, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.active) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return nil, false
	}
	e := heap.Pop(&q.active).(*entry)
	e.state = inFlight
	return e.pod, true
}

// Done finishes a popped pod: on success it leaves the queue; on failure it waits.
func (q *queue) Done(p *corev1.Pod, failed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := keyOf(p)
	e, ok := q.items[k]
	if !ok || e.state != inFlight {
		return
	}
	if !failed {
		delete(q.items, k)
		return
	}
	e.attempts++
	d := q.initialBackoff << min(e.attempts-1, 10)
	if d > q.maxBackoff {
		d = q.maxBackoff
	}
	e.state = waiting
	e.backoffUntil = q.now().Add(d)
}

// MoveAll wakes waiting pods whose backoff has passed; the rest are woken when it does.
func (q *queue) MoveAll() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	var later time.Duration
	for _, e := range q.items {
		if e.state != waiting {
			continue
		}
		if !e.backoffUntil.After(now) {
			e.state = inActive
			heap.Push(&q.active, e)
			q.cond.Signal()
		} else if d := e.backoffUntil.Sub(now); later == 0 || d < later {
			later = d
		}
	}
	if later > 0 {
		time.AfterFunc(later, q.MoveAll)
	}
}

// Waiting counts failed pods.
func (q *queue) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, e := range q.items {
		if e.state == waiting {
			n++
		}
	}
	return n
}

// Close wakes every Pop.
func (q *queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Broadcast()
}

// podHeap orders active pods by priority, then by time added.
type podHeap []*entry

func (h podHeap) Len() int { return len(h) }
func (h podHeap) Less(i, j int) bool {
	pi, pj := priority(h[i].pod), priority(h[j].pod)
	if pi != pj {
		return pi > pj
	}
	return h[i].added.Before(h[j].added)
}
func (h podHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *podHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *podHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func priority(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}
