package scheduler

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func qpod(name string, prio int32) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{Priority: ptr.To(prio)}}
}

func TestQueueOrderAndBackoff(t *testing.T) {
	q := newQueue()
	now := time.Unix(1000, 0)
	q.now = func() time.Time { return now }
	q.Add(qpod("low", 0))
	now = now.Add(time.Millisecond)
	q.Add(qpod("high", 10))
	now = now.Add(time.Millisecond)
	q.Add(qpod("low2", 0))
	q.Add(qpod("low", 0)) // re-adding does not duplicate
	var order []string
	for i := 0; i < 3; i++ {
		p, _ := q.Pop()
		order = append(order, p.Name)
	}
	if got := order[0] + "," + order[1] + "," + order[2]; got != "high,low,low2" {
		t.Fatalf("pop order %s", got)
	}
	if len(q.active) != 0 {
		t.Fatalf("%d left active", len(q.active))
	}
	q.Done(qpod("high", 10), false)
	q.Done(qpod("low", 0), true)
	q.Done(qpod("low2", 0), true)
	if q.Waiting() != 2 {
		t.Fatalf("waiting %d, want 2", q.Waiting())
	}
	q.MoveAll() // backoff (1 s) not over yet
	if len(q.active) != 0 {
		t.Fatal("pods left backoff early")
	}
	now = now.Add(1100 * time.Millisecond)
	q.MoveAll()
	if len(q.active) != 2 || q.Waiting() != 0 {
		t.Fatalf("after backoff: active %d waiting %d", len(q.active), q.Waiting())
	}
	p, _ := q.Pop()
	q.Done(p, true)
	q.Done(p, true) // a second Done is ignored
	if e := q.items[keyOf(p)]; e.attempts != 2 || e.backoffUntil.Sub(now) != 2*time.Second {
		t.Fatalf("second failure: attempts %d backoff %s", e.attempts, e.backoffUntil.Sub(now))
	}
	q.Delete(p)
	q.Delete(qpod("low2", 0))
	if len(q.items) != 0 || len(q.active) != 0 {
		t.Fatalf("items %d active %d after deletes", len(q.items), len(q.active))
	}
	q.Close()
	if _, ok := q.Pop(); ok {
		t.Fatal("Pop after Close")
	}
}
