package endpointslice

import (
	"strconv"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// tracker remembers the controller's own writes to each Service's slices, so a sync never
// acts on an informer cache that has not caught up with them (upstream's
// endpointSliceTracker does the same): a slice it created that the cache lacks, or holds at
// an older version, or one it deleted that the cache still holds, makes the cache stale, and
// the sync waits for it instead of creating the same endpoints twice.
type tracker struct {
	mu sync.Mutex
	// written maps a Service key to its slices by name: the resourceVersion the controller
	// wrote, or "" for one it deleted.
	written map[string]map[string]string
}

func newTracker() *tracker { return &tracker{written: map[string]map[string]string{}} }

func (t *tracker) record(svc, slice, rv string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.written[svc] == nil {
		t.written[svc] = map[string]string{}
	}
	t.written[svc][slice] = rv
}

// stale says whether cached lacks one of svc's writes; the writes it has caught up with are
// forgotten.
func (t *tracker) stale(svc string, cached []*discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.written[svc]
	if len(w) == 0 {
		return false
	}
	have := map[string]string{}
	for _, s := range cached {
		have[s.Name] = s.ResourceVersion
	}
	behind := false
	for name, rv := range w {
		cur, present := have[name]
		switch {
		case rv == "" && !present, rv != "" && present && !older(cur, rv):
			delete(w, name) // caught up
		default:
			behind = true
		}
	}
	if len(w) == 0 {
		delete(t.written, svc)
	}
	return behind
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
