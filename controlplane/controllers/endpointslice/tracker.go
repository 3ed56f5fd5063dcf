package endpointslice

import (
	"strconv"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// tracker remembers the controller's own writes to each Service's slices until the slice
// informer has delivered them, so a sync never acts on a cache that has not caught up with
// them (upstream's endpointSliceTracker does the same): while a create, update or delete of
// its own is not yet seen, the sync waits instead of creating the same endpoints twice. A
// write is forgotten when its event arrives, when the slice is deleted by anyone, or after
// maxWait, so a missed event never stalls a Service.
type tracker struct {
	mu sync.Mutex
	// written maps a Service key to its slices by name: the resourceVersion the controller
	// wrote ("" for a delete) and when.
	written map[string]map[string]write
	now     func() time.Time
}

type write struct {
	rv string
	at time.Time
}

// maxWait bounds how long a sync waits for the cache to show a write.
const maxWait = 5 * time.Second

func newTracker() *tracker { return &tracker{written: map[string]map[string]write{}, now: time.Now} }

func (t *tracker) record(svc, slice, rv string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.written[svc] == nil {
		t.written[svc] = map[string]write{}
	}
	t.written[svc][slice] = write{rv: rv, at: t.now()}
}

// observe is the informer's event for a slice of svc: it settles a tracked write the event
// is at least as new as (any event for a delete of ours settles only with the deletion).
func (t *tracker) observe(svc string, s *discoveryv1.EndpointSlice, deleted bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.written[svc][s.Name]
	if !ok {
		return
	}
	if deleted || (w.rv != "" && !older(s.ResourceVersion, w.rv)) {
		delete(t.written[svc], s.Name)
		if len(t.written[svc]) == 0 {
			delete(t.written, svc)
		}
	}
}

// stale says whether a write of svc's is not yet in the cache, whose slices of svc are
// cached: the cache itself settles what it already shows (an event may come before the
// write's response did).
func (t *tracker) stale(svc string, cached []*discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	have := map[string]string{}
	for _, s := range cached {
		have[s.Name] = s.ResourceVersion
	}
	for name, w := range t.written[svc] {
		cur, present := have[name]
		if t.now().Sub(w.at) > maxWait || (w.rv == "" && !present) || (w.rv != "" && present && !older(cur, w.rv)) {
			delete(t.written[svc], name)
		}
	}
	if len(t.written[svc]) == 0 {
		delete(t.written, svc)
		return false
	}
	return true
}

// forget drops what is tracked for svc (the Service is gone).
func (t *tracker) forget(svc string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.written, svc)
}

// older compares resourceVersions, which the API server writes as etcd revisions.
func older(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return a != b
	}
	return x < y
}
