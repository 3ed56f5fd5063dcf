package endpointslice

import (
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTracker(t *testing.T) {
	s := func(name, rv string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
	}
	now := time.Unix(1000, 0)
	tr := newTracker()
	tr.now = func() time.Time { return now }
	// The cache as it stands: our create not in it yet, our delete still in it.
	cached := []*discoveryv1.EndpointSlice{s("a-old", "5")}
	if tr.stale("ns/a", cached) {
		t.Fatal("stale with no writes")
	}
	tr.record("ns/a", "a-1", "10") // created
	tr.record("ns/a", "a-old", "") // deleted
	tr.observe("ns/a", s("a-1", "9"), false)
	if !tr.stale("ns/a", cached) {
		t.Error("an event older than our create settled it")
	}
	tr.observe("ns/a", s("a-1", "10"), false)
	tr.observe("ns/a", s("a-old", "5"), false) // an update of the slice we deleted: not its deletion
	if !tr.stale("ns/a", cached) {
		t.Error("our delete settled before its deletion was seen")
	}
	tr.observe("ns/a", s("a-old", "5"), true)
	if tr.stale("ns/a", cached) {
		t.Error("stale after every write was seen")
	}
	// The cache alone settles what it shows: the create's event came before its response.
	tr.record("ns/a", "a-3", "30")
	tr.record("ns/a", "a-4", "")
	if tr.stale("ns/a", []*discoveryv1.EndpointSlice{s("a-3", "31")}) {
		t.Error("writes the cache already shows kept the sync waiting")
	}
	// A slice of ours deleted by someone else settles the write too.
	tr.record("ns/a", "a-2", "20")
	tr.observe("ns/a", s("a-2", "20"), true)
	if tr.stale("ns/a", cached) {
		t.Error("a deleted slice's write still tracked")
	}
	// A write whose event never comes is dropped after maxWait.
	tr.record("ns/b", "b-1", "3")
	now = now.Add(maxWait + time.Second)
	if tr.stale("ns/b", nil) {
		t.Error("a write tracked past maxWait")
	}
	tr.record("ns/c", "c-1", "3")
	tr.forget("ns/c")
	if tr.stale("ns/c", nil) {
		t.Error("a forgotten Service still tracked")
	}
}
