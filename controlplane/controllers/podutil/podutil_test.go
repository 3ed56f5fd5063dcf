package podutil

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

type podOpt func(*corev1.Pod)

func mkPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: metav1.NewTime(t0)},
		Spec: corev1.PodSpec{NodeName: "node-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func ready(since time.Time) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(since)})
	}
}

func notReady(p *corev1.Pod) {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse})
}

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func unscheduled(p *corev1.Pod)       { p.Spec.NodeName = "" }
func created(at time.Time) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(at) }
}
func restarts(n int32) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a", RestartCount: 0}, {Name: "b", RestartCount: n}}
	}
}

func TestIsReady(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"no conditions", mkPod("p"), false},
		{"ready true", mkPod("p", ready(t0)), true},
		{"ready false", mkPod("p", notReady), false},
		{"ready unknown", mkPod("p", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionUnknown}}
		}), false},
		{"only other conditions true", mkPod("p", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsReady(tc.pod); got != tc.want {
				t.Fatalf("IsReady = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIsAvailable(t *testing.T) {
	now := t0.Add(time.Hour)
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		minReady int32
		want     bool
	}{
		{"not ready", mkPod("p", notReady), 0, false},
		{"no condition", mkPod("p"), 0, false},
		{"ready, minReadySeconds 0", mkPod("p", ready(now)), 0, true},
		{"ready for 5s of 10", mkPod("p", ready(now.Add(-5*time.Second))), 10, false},
		{"ready for exactly 10s of 10", mkPod("p", ready(now.Add(-10*time.Second))), 10, false},
		{"ready for 11s of 10", mkPod("p", ready(now.Add(-11*time.Second))), 10, true},
		{"ready without transition time", mkPod("p", ready(time.Time{})), 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsAvailable(tc.pod, tc.minReady, now); got != tc.want {
				t.Fatalf("IsAvailable = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIsActive(t *testing.T) {
	deleting := func(p *corev1.Pod) { ts := metav1.NewTime(t0); p.DeletionTimestamp = &ts }
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"running", mkPod("p"), true},
		{"pending", mkPod("p", phase(corev1.PodPending)), true},
		{"unknown", mkPod("p", phase(corev1.PodUnknown)), true},
		{"succeeded", mkPod("p", phase(corev1.PodSucceeded)), false},
		{"failed", mkPod("p", phase(corev1.PodFailed)), false},
		{"being deleted", mkPod("p", deleting), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsActive(tc.pod); got != tc.want {
				t.Fatalf("IsActive = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIsControlledBy(t *testing.T) {
	yes := true
	p := mkPod("p")
	p.OwnerReferences = []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "Node", Name: "n", UID: "owner-not-controller"},
		{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: &yes},
	}
	for uid, want := range map[types.UID]bool{"rs-uid": true, "owner-not-controller": false, "other": false} {
		if got := IsControlledBy(p, uid); got != want {
			t.Errorf("IsControlledBy(%s) = %v, want %v", uid, got, want)
		}
	}
	if IsControlledBy(mkPod("orphan"), "rs-uid") {
		t.Error("a pod without owners is controlled by nobody")
	}
}

func TestSortForDeletionPairs(t *testing.T) {
	for _, tc := range []struct {
		name         string
		first, later *corev1.Pod
	}{
		{"unassigned before assigned", mkPod("a", unscheduled, ready(t0)), mkPod("b", phase(corev1.PodPending))},
		{"pending before unknown", mkPod("a", phase(corev1.PodPending)), mkPod("b", phase(corev1.PodUnknown))},
		{"unknown before running", mkPod("a", phase(corev1.PodUnknown)), mkPod("b")},
		{"pending before running", mkPod("a", phase(corev1.PodPending), ready(t0)), mkPod("b")},
		{"not ready before ready", mkPod("a", notReady, restarts(0)), mkPod("b", ready(t0), restarts(9))},
		{"recently ready before long ready", mkPod("a", ready(t0.Add(time.Minute))), mkPod("b", ready(t0))},
		{"more restarts first", mkPod("a", restarts(3)), mkPod("b", restarts(1))},
		{"newer before older", mkPod("a", created(t0.Add(time.Second))), mkPod("b", created(t0))},
		{"readiness beats restarts and age", mkPod("a", notReady, created(t0)), mkPod("b", ready(t0), restarts(5), created(t0.Add(time.Hour)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, in := range [][]*corev1.Pod{{tc.first, tc.later}, {tc.later, tc.first}} {
				SortForDeletion(in)
				if in[0] != tc.first {
					t.Fatalf("got order %s,%s, want %s first", in[0].Name, in[1].Name, tc.first.Name)
				}
			}
		})
	}
}

func TestSortForDeletionFullOrder(t *testing.T) {
	pods := []*corev1.Pod{
		mkPod("old-long-ready", ready(t0), created(t0)),
		mkPod("running-not-ready", notReady),
		mkPod("unscheduled", unscheduled, phase(corev1.PodPending)),
		mkPod("new-long-ready", ready(t0), created(t0.Add(time.Minute))),
		mkPod("pending", phase(corev1.PodPending)),
		mkPod("recently-ready", ready(t0.Add(time.Hour))),
		mkPod("unknown", phase(corev1.PodUnknown)),
		mkPod("restarting-ready", ready(t0), restarts(4)),
	}
	SortForDeletion(pods)
	want := []string{"unscheduled", "pending", "unknown", "running-not-ready", "recently-ready", "restarting-ready", "new-long-ready", "old-long-ready"}
	for i, p := range pods {
		if p.Name != want[i] {
			got := make([]string, len(pods))
			for j, q := range pods {
				got[j] = q.Name
			}
			t.Fatalf("order %v, want %v", got, want)
		}
	}
}
