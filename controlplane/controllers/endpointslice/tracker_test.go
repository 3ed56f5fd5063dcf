package endpointslice

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTracker(t *testing.T) {
	s := func(name, rv string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
	}
	// Each case: created a-1 at resourceVersion 10, deleted a-old; then the cache shows cached.
	for _, c := range []struct {
		what   string
		cached []*discoveryv1.EndpointSlice
		stale  bool
	}{
		{"our new slice not in the cache yet", []*discoveryv1.EndpointSlice{}, true},
		{"the cache has it at an older version", []*discoveryv1.EndpointSlice{s("a-1", "9")}, true},
		{"the deleted one still cached", []*discoveryv1.EndpointSlice{s("a-1", "10"), s("a-old", "5")}, true},
		{"caught up", []*discoveryv1.EndpointSlice{s("a-1", "10")}, false},
		{"caught up, updated by someone since", []*discoveryv1.EndpointSlice{s("a-1", "12")}, false},
	} {
		tr := newTracker()
		tr.record("ns/a", "a-1", "10")
		tr.record("ns/a", "a-old", "")
		if got := tr.stale("ns/a", c.cached); got != c.stale {
			t.Errorf("%s: stale %v, want %v", c.what, got, c.stale)
		}
		if !c.stale && tr.stale("ns/a", nil) {
			t.Errorf("%s: the writes caught up with are not forgotten", c.what)
		}
	}
	tr := newTracker()
	if tr.stale("ns/a", nil) {
		t.Error("stale with no writes")
	}
	tr.record("ns/b", "b-1", "3")
	tr.forget("ns/b")
	if tr.stale("ns/b", nil) {
		t.Error("a forgotten Service still tracked")
	}
}
