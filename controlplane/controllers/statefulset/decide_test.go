package statefulset

import (
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

var now = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

type setOpt func(*appsv1.StatefulSet)

func newSet(replicas int32, opts ...setOpt) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "web-uid", Generation: 1},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: "nginx",
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1"}}},
			},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func parallel(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement }
func onDelete(s *appsv1.StatefulSet) {
	s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
}
func withPartition(n int32) setOpt {
	return func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
		if s.Spec.UpdateStrategy.RollingUpdate == nil {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
		s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(n)
	}
}
func withMaxUnavailable(v intstr.IntOrString) setOpt {
	return func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
		if s.Spec.UpdateStrategy.RollingUpdate == nil {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
		s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &v
	}
}
func withStart(n int32) setOpt {
	return func(s *appsv1.StatefulSet) { s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: n} }
}
func withMinReady(n int32) setOpt { return func(s *appsv1.StatefulSet) { s.Spec.MinReadySeconds = n } }

// pod states: "ready" (Running, Ready for an hour), "running" (Running, not ready),
// "pending", "failed", "succeeded", "terminating" (ready but being deleted), "fresh"
// (Running, Ready 5 s ago).
func pod(ordinal int, revision, state string) *corev1.Pod {
	name := "web-" + itoa(ordinal)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid"),
			Labels: map[string]string{"app": "web", appsv1.StatefulSetRevisionLabel: revision,
				appsv1.StatefulSetPodNameLabel: name, appsv1.PodIndexLabel: itoa(ordinal)}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	ready := func(since time.Time) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(since)}}
	}
	switch state {
	case "ready":
		ready(now.Add(-time.Hour))
	case "fresh":
		ready(now.Add(-5 * time.Second))
	case "running":
	case "pending":
		p.Status.Phase = corev1.PodPending
	case "failed":
		p.Status.Phase = corev1.PodFailed
	case "succeeded":
		p.Status.Phase = corev1.PodSucceeded
	case "terminating":
		ready(now.Add(-time.Hour))
		t := metav1.NewTime(now)
		p.DeletionTimestamp = &t
	default:
		panic(state)
	}
	return p
}

func itoa(i int) string { return strconv.Itoa(i) }

func creations(p Plan) string {
	var s []string
	for _, c := range p.Create {
		s = append(s, itoa(c.Ordinal)+"@"+c.Revision)
	}
	return strings.Join(s, ",")
}

func podNames(pods []*corev1.Pod) string {
	var s []string
	for _, p := range pods {
		s = append(s, p.Name)
	}
	return strings.Join(s, ",")
}

var revs = Revisions{Current: "r1", Update: "r1"}
var rolling = Revisions{Current: "r1", Update: "r2"}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name    string
		set     *appsv1.StatefulSet
		pods    []*corev1.Pod
		rev     Revisions
		stale   map[int]bool
		create  string
		delete  string
		relabel string
	}{
		// OrderedReady scale up: one at a time, in order, each once its predecessors are
		// running, ready and available.
		{name: "ordered creates the first", set: newSet(3), rev: revs, create: "0@r1"},
		{name: "ordered waits for pending", set: newSet(3), pods: []*corev1.Pod{pod(0, "r1", "pending")}, rev: revs},
		{name: "ordered waits for not ready", set: newSet(3), pods: []*corev1.Pod{pod(0, "r1", "running")}, rev: revs},
		{name: "ordered creates the next", set: newSet(3), pods: []*corev1.Pod{pod(0, "r1", "ready")}, rev: revs, create: "1@r1"},
		{name: "ordered waits for availability", set: newSet(3, withMinReady(30)), pods: []*corev1.Pod{pod(0, "r1", "fresh")}, rev: revs},
		{name: "ordered available after minReadySeconds", set: newSet(3, withMinReady(30)), pods: []*corev1.Pod{pod(0, "r1", "ready")}, rev: revs, create: "1@r1"},
		{name: "ordered fills a gap first", set: newSet(3), pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(2, "r1", "ready")}, rev: revs, create: "1@r1"},
		{name: "ordered waits for terminating", set: newSet(3), pods: []*corev1.Pod{pod(0, "r1", "terminating")}, rev: revs},
		{name: "ordered waits on stale claims", set: newSet(3), rev: revs, stale: map[int]bool{0: true}},
		{name: "ordinals.start", set: newSet(2, withStart(5)), pods: []*corev1.Pod{pod(5, "r1", "ready")}, rev: revs, create: "6@r1"},
		{name: "ordinals.start condemns below start", set: newSet(2, withStart(5)),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(5, "r1", "ready"), pod(6, "r1", "ready")}, rev: revs, delete: "web-0"},

		// Parallel: everything at once.
		{name: "parallel bursts", set: newSet(3, parallel), rev: revs, create: "0@r1,1@r1,2@r1"},
		{name: "parallel does not wait", set: newSet(3, parallel), pods: []*corev1.Pod{pod(0, "r1", "pending")}, rev: revs, create: "1@r1,2@r1"},
		{name: "parallel skips only stale", set: newSet(3, parallel), rev: revs, stale: map[int]bool{1: true}, create: "0@r1,2@r1"},
		{name: "parallel scale down at once", set: newSet(1, parallel),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "running"), pod(2, "r1", "ready")}, rev: revs, delete: "web-2,web-1"},

		// Failed and succeeded pods are deleted, to be recreated with the same name.
		{name: "failed pod deleted", set: newSet(2), pods: []*corev1.Pod{pod(0, "r1", "failed"), pod(1, "r1", "ready")}, rev: revs, delete: "web-0"},
		{name: "succeeded pod deleted", set: newSet(2), pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "succeeded")}, rev: revs, delete: "web-1"},
		{name: "deleted pod recreated", set: newSet(3), pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(2, "r1", "ready")}, rev: revs, create: "1@r1"},
		{name: "parallel failed deleted and rest created", set: newSet(3, parallel), pods: []*corev1.Pod{pod(1, "r1", "failed")}, rev: revs, create: "0@r1,2@r1", delete: "web-1"},

		// OrderedReady scale down: highest first, one at a time, halting while unhealthy.
		{name: "ordered scale down highest first", set: newSet(1),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "ready"), pod(2, "r1", "ready")}, rev: revs, delete: "web-2"},
		{name: "scale down halts on unhealthy replica", set: newSet(1),
			pods: []*corev1.Pod{pod(0, "r1", "running"), pod(1, "r1", "ready"), pod(2, "r1", "ready")}, rev: revs},
		{name: "scale down waits for terminating", set: newSet(1),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "ready"), pod(2, "r1", "terminating")}, rev: revs},
		{name: "scale down: an unhealthy condemned pod waits for the first unhealthy", set: newSet(1),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "running"), pod(2, "r1", "running")}, rev: revs},
		{name: "scale down: the first unhealthy goes", set: newSet(1),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "running")}, rev: revs, delete: "web-1"},
		{name: "scale down before update", set: newSet(2),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "ready"), pod(2, "r1", "ready")}, rev: rolling, delete: "web-2"},

		// Rolling update: highest ordinal first, one at a time by default.
		{name: "rolling deletes the highest old pod", set: newSet(3),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "ready"), pod(2, "r1", "ready")}, rev: rolling, delete: "web-2"},
		{name: "rolling recreates at update revision", set: newSet(3),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "ready")}, rev: rolling, create: "2@r2"},
		{name: "rolling waits for the updated pod", set: newSet(3),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "ready"), pod(2, "r2", "running")}, rev: rolling},
		{name: "rolling goes on down", set: newSet(3),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "ready"), pod(2, "r2", "ready")}, rev: rolling, delete: "web-1"},
		{name: "rolling done", set: newSet(2), pods: []*corev1.Pod{pod(0, "r2", "ready"), pod(1, "r2", "ready")}, rev: rolling},
		{name: "partition stops the update", set: newSet(3, withPartition(2)),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "ready"), pod(2, "r2", "ready")}, rev: rolling},
		{name: "partition: below it created at current", set: newSet(3, withPartition(2)),
			pods: []*corev1.Pod{pod(0, "r1", "ready")}, rev: rolling, create: "1@r1"},
		{name: "partition: above it created at update", set: newSet(3, withPartition(2)),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "ready")}, rev: rolling, create: "2@r2"},
		{name: "partition relative to ordinals.start", set: newSet(3, withStart(10), withPartition(1)),
			pods: []*corev1.Pod{pod(10, "r1", "ready"), pod(11, "r2", "ready"), pod(12, "r1", "ready")}, rev: rolling, delete: "web-12"},
		{name: "partition beyond replicas updates nothing", set: newSet(2, withPartition(5)),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "ready")}, rev: rolling},
		{name: "rolling: maxUnavailable 2 ordered", set: newSet(4, withMaxUnavailable(intstr.FromInt32(2))),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "ready"), pod(2, "r1", "ready"), pod(3, "r1", "ready")}, rev: rolling, delete: "web-3,web-2"},
		{name: "rolling: parallel maxUnavailable 2", set: newSet(4, parallel, withMaxUnavailable(intstr.FromInt32(2))),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "ready"), pod(2, "r1", "ready"), pod(3, "r1", "ready")}, rev: rolling, delete: "web-3,web-2"},
		{name: "rolling: parallel budget spent by an updated unready pod", set: newSet(4, parallel, withMaxUnavailable(intstr.FromInt32(2))),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "ready"), pod(2, "r1", "ready"), pod(3, "r2", "running")}, rev: rolling, delete: "web-2"},
		{name: "rolling: parallel deletes old unavailable first, without budget", set: newSet(4, parallel, withMaxUnavailable(intstr.FromInt32(1))),
			pods: []*corev1.Pod{pod(0, "r1", "running"), pod(1, "r1", "ready"), pod(2, "r1", "ready"), pod(3, "r1", "ready")}, rev: rolling, delete: "web-0"},
		{name: "rolling: maxUnavailable percentage rounds down", set: newSet(4, parallel, withMaxUnavailable(intstr.FromString("60%"))),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "ready"), pod(2, "r1", "ready"), pod(3, "r1", "ready")}, rev: rolling, delete: "web-3,web-2"},
		{name: "rolling: small percentage is still 1", set: newSet(4, parallel, withMaxUnavailable(intstr.FromString("10%"))),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "ready"), pod(2, "r1", "ready"), pod(3, "r1", "ready")}, rev: rolling, delete: "web-3"},
		{name: "rolling with parallel create", set: newSet(3, parallel),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "ready")}, rev: rolling, create: "2@r2"},

		// OnDelete: nothing deleted for the update; deleted pods come back at the update revision.
		{name: "ondelete leaves old pods", set: newSet(2, onDelete),
			pods: []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "ready")}, rev: rolling},
		{name: "ondelete recreates at update", set: newSet(2, onDelete),
			pods: []*corev1.Pod{pod(0, "r1", "ready")}, rev: rolling, create: "1@r2"},

		// Identity labels are restored.
		{name: "relabel", set: newSet(1), pods: []*corev1.Pod{func() *corev1.Pod {
			p := pod(0, "r1", "ready")
			delete(p.Labels, appsv1.StatefulSetPodNameLabel)
			return p
		}()}, rev: revs, relabel: "web-0"},
		// A set being deleted does nothing.
		{name: "set being deleted", set: newSet(3, func(s *appsv1.StatefulSet) { t := metav1.NewTime(now); s.DeletionTimestamp = &t }), rev: revs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(tc.set, tc.pods, tc.rev, tc.stale, now)
			if got := creations(p); got != tc.create {
				t.Errorf("create %q, want %q", got, tc.create)
			}
			if got := podNames(p.Delete); got != tc.delete {
				t.Errorf("delete %q, want %q", got, tc.delete)
			}
			if got := podNames(p.Relabel); got != tc.relabel {
				t.Errorf("relabel %q, want %q", got, tc.relabel)
			}
		})
	}
}

func TestDecideStatus(t *testing.T) {
	set := newSet(3, withMinReady(30))
	set.Generation = 4
	pods := []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r2", "fresh"), pod(2, "r2", "running"), pod(3, "r1", "terminating")}
	p := Decide(set, pods, Revisions{Current: "r1", Update: "r2", CollisionCount: 2}, nil, now)
	st := p.Status
	if st.ObservedGeneration != 4 || st.Replicas != 4 || st.ReadyReplicas != 3 || st.AvailableReplicas != 2 ||
		st.CurrentReplicas != 1 || st.UpdatedReplicas != 2 || st.CurrentRevision != "r1" || st.UpdateRevision != "r2" || *st.CollisionCount != 2 {
		t.Fatalf("status %+v", st)
	}
	// web-1 became ready 5 s ago: available in 25 s.
	if p.RequeueAfter != 25*time.Second {
		t.Fatalf("requeue after %v", p.RequeueAfter)
	}
}

func TestDecideCompletesRollout(t *testing.T) {
	set := newSet(2)
	p := Decide(set, []*corev1.Pod{pod(0, "r2", "ready"), pod(1, "r2", "ready")}, rolling, nil, now)
	if p.Status.CurrentRevision != "r2" || p.Status.CurrentReplicas != 2 || p.Status.UpdatedReplicas != 2 {
		t.Fatalf("status %+v", p.Status)
	}
	// Not complete while a replica is not ready.
	p = Decide(set, []*corev1.Pod{pod(0, "r2", "ready"), pod(1, "r2", "running")}, rolling, nil, now)
	if p.Status.CurrentRevision != "r1" || p.Status.CurrentReplicas != 0 {
		t.Fatalf("status %+v", p.Status)
	}
	// A rolling update deletion lowers currentReplicas at once, as upstream.
	p = Decide(newSet(2), []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "ready")}, rolling, nil, now)
	if podNames(p.Delete) != "web-1" || p.Status.CurrentReplicas != 1 {
		t.Fatalf("delete %s status %+v", podNames(p.Delete), p.Status)
	}
}

func TestDecideClaims(t *testing.T) {
	withClaims := func(s *appsv1.StatefulSet) {
		s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
	}
	// Pending pods and healthy replicas get their claims checked; condemned ones too,
	// before their deletion.
	p := Decide(newSet(1, withClaims), []*corev1.Pod{pod(0, "r1", "ready"), pod(1, "r1", "ready")}, revs, nil, now)
	if podNames(p.Claims) != "web-0,web-1" || podNames(p.Delete) != "web-1" {
		t.Fatalf("claims %s delete %s", podNames(p.Claims), podNames(p.Delete))
	}
	p = Decide(newSet(2, withClaims), []*corev1.Pod{pod(0, "r1", "pending")}, revs, nil, now)
	if podNames(p.Claims) != "web-0" || len(p.Create) != 0 {
		t.Fatalf("claims %s create %v", podNames(p.Claims), p.Create)
	}
	// Without templates there is nothing to check.
	p = Decide(newSet(1), []*corev1.Pod{pod(0, "r1", "ready")}, revs, nil, now)
	if len(p.Claims) != 0 {
		t.Fatalf("claims %s", podNames(p.Claims))
	}
}
