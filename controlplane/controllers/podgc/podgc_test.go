package podgc

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
)

func pod(name, node string, phase corev1.PodPhase, age time.Duration) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name),
		CreationTimestamp: metav1.NewTime(time.Unix(1e9, 0).Add(-age))},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
}

func names(ps []*corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func TestDecide(t *testing.T) {
	deleting := pod("unscheduled", "", corev1.PodPending, 0)
	deleting.DeletionTimestamp = &metav1.Time{}
	pods := []*corev1.Pod{
		pod("live", "n1", corev1.PodRunning, 0), pod("orphan", "gone", corev1.PodRunning, 0), deleting,
		pod("pending", "", corev1.PodPending, 0),
		pod("old-done", "n1", corev1.PodSucceeded, 3*time.Hour), pod("mid-done", "n1", corev1.PodFailed, 2*time.Hour), pod("new-done", "n1", corev1.PodSucceeded, time.Hour),
	}
	p := Decide(pods, map[string]bool{"n1": true}, 1)
	if got := names(p.Orphans); len(got) != 1 || got[0] != "orphan" {
		t.Errorf("orphans %v", got)
	}
	if got := names(p.Unscheduled); len(got) != 1 || got[0] != "unscheduled" {
		t.Errorf("unscheduled %v", got)
	}
	if got := names(p.Terminated); len(got) != 2 || got[0] != "old-done" || got[1] != "mid-done" {
		t.Errorf("terminated %v, want the two oldest", got)
	}
	if p := Decide(pods, map[string]bool{"n1": true}, 10); len(p.Terminated) != 0 {
		t.Errorf("under the threshold: %v", names(p.Terminated))
	}
}

// An orphan is marked and force-deleted once the node is confirmed gone; a node only the
// cache lacks keeps its pods.
func TestCollect(t *testing.T) {
	orphan, fresh := pod("orphan", "gone", corev1.PodRunning, 0), pod("fresh", "new-node", corev1.PodRunning, 0)
	client := fake.NewClientset(orphan, fresh, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "new-node"}})
	factory := informers.NewSharedInformerFactory(client, 0)
	for _, o := range []runtime.Object{orphan, fresh} {
		_ = factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
	}
	c := New(client, factory.Core().V1().Pods(), factory.Core().V1().Nodes(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	clock := time.Unix(1e9, 0)
	c.now = func() time.Time { return clock }
	if err := c.collect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if acts := client.Actions(); len(acts) != 0 {
		t.Fatalf("collected within the quarantine: %v", acts)
	}
	clock = clock.Add(quarantine)
	if err := c.collect(context.Background()); err != nil {
		t.Fatal(err)
	}
	var patched, deleted []string
	for _, a := range client.Actions() {
		switch a := a.(type) {
		case ktesting.PatchAction:
			if a.GetSubresource() == "status" {
				patched = append(patched, a.GetName())
			}
		case ktesting.DeleteAction:
			if a.GetResource().Resource == "pods" {
				deleted = append(deleted, a.GetName())
			}
		}
	}
	if len(deleted) != 1 || deleted[0] != "orphan" || len(patched) != 1 || patched[0] != "orphan" {
		t.Errorf("patched %v deleted %v, want the orphan only", patched, deleted)
	}
}
