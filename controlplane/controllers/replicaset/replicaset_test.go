package replicaset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/controlplane/controllers/podutil"
)

var now = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	c        *Controller
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	recorder *record.FakeRecorder
}

// newFixture builds the controller over a fake clientset seeded with objs; the same objects
// are put straight into the informer caches, so sync sees them without running informers.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewSimpleClientset(objs...)
	var n atomic.Int32
	// The fake tracker does not implement generateName: name created pods as the API would.
	client.PrependReactor("create", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
		p := a.(ktesting.CreateAction).GetObject().(*corev1.Pod)
		if p.Name == "" && p.GenerateName != "" {
			p.Name = fmt.Sprintf("%s%05d", p.GenerateName, n.Add(1))
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(100)
	c := New(client, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), recorder, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c.now = func() time.Time { return now }
	c.exp.SetClock(func() time.Time { return now })
	f := &fixture{c: c, client: client, factory: factory, recorder: recorder}
	for _, o := range objs {
		f.cache(o)
	}
	return f
}

func (f *fixture) cache(o runtime.Object) {
	switch o := o.(type) {
	case *appsv1.ReplicaSet:
		_ = f.factory.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(o)
	case *corev1.Pod:
		_ = f.factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
	}
}

func (f *fixture) sync(t *testing.T, key string) error {
	t.Helper()
	return f.c.sync(context.Background(), key)
}

func (f *fixture) actions(verb, resource string) []ktesting.Action {
	var out []ktesting.Action
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			out = append(out, a)
		}
	}
	return out
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func newRS(name string, replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid"), Generation: 1},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "front"}, Annotations: map[string]string{"note": "x"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
		Status: appsv1.ReplicaSetStatus{ObservedGeneration: 1},
	}
}

type podOpt func(*corev1.Pod)

func ownedPod(rs *appsv1.ReplicaSet, name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rs.Namespace, UID: types.UID(name + "-uid"), Labels: map[string]string{"app": "web", "tier": "front"},
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
		Spec:   corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func readySince(t time.Time) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t)}}
	}
}

var isReady = readySince(now.Add(-time.Hour))

func notReady(p *corev1.Pod) {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
}

func TestSyncCreatesMissingPods(t *testing.T) {
	rs := newRS("web", 3)
	rs.Generation = 2
	f := newFixture(t, rs)
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	creates := f.actions("create", "pods")
	if len(creates) != 3 {
		t.Fatalf("%d pod creations, want 3", len(creates))
	}
	for _, a := range creates {
		p := a.(ktesting.CreateAction).GetObject().(*corev1.Pod)
		if a.GetNamespace() != "default" || p.Namespace != "default" {
			t.Errorf("pod created in %q/%q", a.GetNamespace(), p.Namespace)
		}
		if p.GenerateName != "web-" || p.Name != "" {
			t.Errorf("name %q generateName %q, want generateName web-", p.Name, p.GenerateName)
		}
		if p.Labels["app"] != "web" || p.Labels["tier"] != "front" || len(p.Labels) != 2 {
			t.Errorf("labels %v, want the template's", p.Labels)
		}
		if p.Annotations["note"] != "x" {
			t.Errorf("annotations %v, want the template's", p.Annotations)
		}
		if len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Image != "nginx" {
			t.Errorf("spec %+v, want the template's", p.Spec)
		}
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.UID != rs.UID || ref.Kind != "ReplicaSet" || ref.APIVersion != "apps/v1" || ref.Name != "web" ||
			!ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Errorf("controller ref %+v", ref)
		}
	}
	// Status: the generation moved on, so it is written even with no pods yet.
	upd := f.actions("update", "replicasets")
	if len(upd) != 1 || upd[0].GetSubresource() != "status" {
		t.Fatalf("replicaset updates %v, want one status update", upd)
	}
	st := upd[0].(ktesting.UpdateAction).GetObject().(*appsv1.ReplicaSet).Status
	if st.ObservedGeneration != 2 || st.Replicas != 0 {
		t.Errorf("status %+v", st)
	}
	if ev := f.events(); len(ev) != 1 || ev[0] != "Normal SuccessfulCreate Created 3 pod(s)" {
		t.Errorf("events %q", ev)
	}
}

func TestSyncExpectationsPreventDoubleCreate(t *testing.T) {
	rs := newRS("web", 3)
	f := newFixture(t, rs)
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("create", "pods")); n != 3 {
		t.Fatalf("%d creations, want 3", n)
	}
	// The informer has not delivered the new pods yet: a second sync must not create more.
	f.client.ClearActions()
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("create", "pods")); n != 0 {
		t.Fatalf("second sync created %d pods while the first creations were unobserved", n)
	}
	// Two of three observed: still waiting.
	for i := 1; i <= 2; i++ {
		p := ownedPod(rs, fmt.Sprintf("web-%d", i))
		f.cache(p)
		f.c.podEvent(p, true, false)
	}
	if f.c.exp.Satisfied("default/web") {
		t.Fatal("expectations satisfied with one creation unobserved")
	}
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("create", "pods")); n != 0 {
		t.Fatalf("created %d pods with one creation still unobserved", n)
	}
	// The third arrives: the cache is complete and nothing is missing.
	p := ownedPod(rs, "web-3")
	f.cache(p)
	f.c.podEvent(p, true, false)
	if !f.c.exp.Satisfied("default/web") {
		t.Fatal("expectations not satisfied after all creations were observed")
	}
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("create", "pods")); n != 0 {
		t.Fatalf("created %d pods with all 3 present", n)
	}
}

func TestSyncExpectationsExpire(t *testing.T) {
	rs := newRS("web", 2)
	f := newFixture(t, rs)
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	// The creations were never observed (a missed event): after the TTL the controller acts again.
	f.c.exp.SetClock(func() time.Time { return now.Add(5*time.Minute + time.Second) })
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("create", "pods")); n != 2 {
		t.Fatalf("%d creations after expectations expired, want 2", n)
	}
}

func TestSyncCreateFailureLowersExpectations(t *testing.T) {
	rs := newRS("web", 5)
	f := newFixture(t, rs)
	var calls atomic.Int32
	f.client.PrependReactor("create", "pods", func(ktesting.Action) (bool, runtime.Object, error) {
		if calls.Add(1) == 2 {
			return true, nil, errors.New("quota exceeded")
		}
		return false, nil, nil
	})
	err := f.sync(t, "default/web")
	if err == nil || !strings.Contains(err.Error(), "quota exceeded") {
		t.Fatalf("sync error %v, want the creation error", err)
	}
	// Slow start: a batch of 1 succeeded, the batch of 2 had one failure, and no batch of 4 was tried.
	if n := len(f.actions("create", "pods")); n != 3 {
		t.Fatalf("%d creation attempts, want 3 (batches 1 and 2)", n)
	}
	ev := f.events()
	if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning FailedCreate Error creating: quota exceeded") {
		t.Fatalf("events %q", ev)
	}
	// Two pods were created and are unobserved; the failed and untried ones are not expected.
	f.c.podEvent(ownedPod(rs, "a"), true, false)
	if f.c.exp.Satisfied("default/web") {
		t.Fatal("satisfied with one successful creation unobserved")
	}
	f.c.podEvent(ownedPod(rs, "b"), true, false)
	if !f.c.exp.Satisfied("default/web") {
		t.Fatal("not satisfied once both successful creations were observed")
	}
}

func TestSyncDeletesSurplusPreferringUnscheduledAndNotReady(t *testing.T) {
	rs := newRS("web", 2)
	rs.Status = appsv1.ReplicaSetStatus{ObservedGeneration: 1, Replicas: 4, FullyLabeledReplicas: 4, ReadyReplicas: 2, AvailableReplicas: 2}
	objs := []runtime.Object{rs,
		ownedPod(rs, "ready-old", isReady),
		ownedPod(rs, "unscheduled", func(p *corev1.Pod) { p.Spec.NodeName = ""; p.Status.Phase = corev1.PodPending }),
		ownedPod(rs, "ready-new", isReady, func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute)) }),
		ownedPod(rs, "not-ready", notReady),
		// Not counted: finished, being deleted, or someone else's.
		ownedPod(rs, "succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		ownedPod(newRS("other", 1), "stray"),
	}
	f := newFixture(t, objs...)
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	dels := f.actions("delete", "pods")
	var names []string
	for _, a := range dels {
		d := a.(ktesting.DeleteAction)
		names = append(names, d.GetName())
		pre := d.GetDeleteOptions().Preconditions
		if pre == nil || pre.UID == nil || string(*pre.UID) != d.GetName()+"-uid" {
			t.Errorf("delete of %s without its UID precondition: %+v", d.GetName(), pre)
		}
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "not-ready,unscheduled" {
		t.Fatalf("deleted %v, want the unscheduled and the not-ready pod", names)
	}
	if n := len(f.actions("create", "pods")); n != 0 {
		t.Fatalf("%d creations while scaling down", n)
	}
	if ev := f.events(); len(ev) != 2 || !strings.HasPrefix(ev[0], "Normal SuccessfulDelete Deleted pod: ") {
		t.Errorf("events %q", ev)
	}
	// Deletions are expected until observed, each by its own pod: one victim's deletion
	// seen twice (its deletionTimestamp, then its removal) does not stand for the other's.
	if f.c.exp.Satisfied("default/web") {
		t.Fatal("deletions not expected")
	}
	var victim *corev1.Pod
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.Name == "unscheduled" {
			victim = p
		}
	}
	f.c.podEvent(victim, false, true)
	f.c.podEvent(victim, false, true)
	if f.c.exp.Satisfied("default/web") {
		t.Fatal("one victim seen twice satisfied both deletions")
	}
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.Name == "not-ready" {
			f.c.podEvent(p, false, true)
		}
	}
	if !f.c.exp.Satisfied("default/web") {
		t.Fatal("both deletions seen, still expecting")
	}
}

func TestSyncDeletesNewestAmongEquals(t *testing.T) {
	rs := newRS("web", 1)
	f := newFixture(t, rs,
		ownedPod(rs, "older", isReady),
		ownedPod(rs, "newer", isReady, func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute)) }))
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	dels := f.actions("delete", "pods")
	if len(dels) != 1 || dels[0].(ktesting.DeleteAction).GetName() != "newer" {
		t.Fatalf("deletions %v, want only the newer pod", dels)
	}
}

func TestSyncStatusOnlyWhenChanged(t *testing.T) {
	rs := newRS("web", 2)
	rs.Status = appsv1.ReplicaSetStatus{ObservedGeneration: 1, Replicas: 2, FullyLabeledReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	a, b := ownedPod(rs, "a", isReady), ownedPod(rs, "b", isReady)
	f := newFixture(t, rs, a, b)
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	if acts := f.client.Actions(); len(acts) != 0 {
		t.Fatalf("steady state produced actions: %v", acts)
	}
	b = b.DeepCopy()
	notReady(b)
	f.cache(b)
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	acts := f.client.Actions()
	if len(acts) != 1 || acts[0].GetVerb() != "update" || acts[0].GetSubresource() != "status" {
		t.Fatalf("actions %v, want one status update", acts)
	}
	st := acts[0].(ktesting.UpdateAction).GetObject().(*appsv1.ReplicaSet).Status
	want := appsv1.ReplicaSetStatus{ObservedGeneration: 1, Replicas: 2, FullyLabeledReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("status %+v, want %+v", st, want)
	}
}

func TestSyncReadyButNotYetAvailable(t *testing.T) {
	rs := newRS("web", 1)
	rs.Spec.MinReadySeconds = 30
	f := newFixture(t, rs, ownedPod(rs, "a", readySince(now.Add(-10*time.Second))))
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	st := f.actions("update", "replicasets")[0].(ktesting.UpdateAction).GetObject().(*appsv1.ReplicaSet).Status
	if st.ReadyReplicas != 1 || st.AvailableReplicas != 0 {
		t.Fatalf("status %+v: the pod is ready but not yet available", st)
	}
}

func TestSyncDeletedOrDeletingReplicaSet(t *testing.T) {
	f := newFixture(t)
	f.c.exp.Expect("default/gone", 3, nil)
	if err := f.sync(t, "default/gone"); err != nil {
		t.Fatal(err)
	}
	if len(f.client.Actions()) != 0 {
		t.Fatalf("actions for a missing replica set: %v", f.client.Actions())
	}
	if f.c.exp.Pending("default/gone") {
		t.Fatal("expectations of a deleted replica set kept")
	}

	rs := newRS("web", 3)
	ts := metav1.NewTime(now)
	rs.DeletionTimestamp = &ts
	f = newFixture(t, rs)
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("create", "pods")); n != 0 {
		t.Fatalf("%d pods created for a replica set being deleted", n)
	}
}

func TestDiff(t *testing.T) {
	for _, tc := range []struct {
		replicas *int32
		active   int
		want     int
	}{
		{nil, 0, 1},
		{nil, 1, 0},
		{ptr.To[int32](3), 1, 2},
		{ptr.To[int32](1), 3, -2},
		{ptr.To[int32](0), 2, -2},
		{ptr.To[int32](2), 2, 0},
		{ptr.To[int32](1000), 0, 500},
		{ptr.To[int32](0), 1000, -500},
	} {
		rs := newRS("x", 0)
		rs.Spec.Replicas = tc.replicas
		if got := Diff(rs, tc.active); got != tc.want {
			t.Errorf("Diff(replicas=%v, active=%d) = %d, want %d", ptr.Deref(tc.replicas, -1), tc.active, got, tc.want)
		}
	}
}

func TestComputeStatus(t *testing.T) {
	rs := newRS("web", 5)
	rs.Generation = 7
	rs.Spec.MinReadySeconds = 10
	cond := appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate"}
	rs.Status.Conditions = []appsv1.ReplicaSetCondition{cond}
	deleting := func(p *corev1.Pod) { ts := metav1.NewTime(now); p.DeletionTimestamp = &ts }
	pods := []*corev1.Pod{
		ownedPod(rs, "available", isReady),
		ownedPod(rs, "ready-not-yet-available", readySince(now.Add(-5*time.Second))),
		ownedPod(rs, "not-ready", notReady),
		ownedPod(rs, "relabeled", isReady, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} }),
		ownedPod(rs, "terminating", isReady, deleting),
		ownedPod(rs, "terminating-2", deleting),
		ownedPod(rs, "failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
	}
	s := ComputeStatus(rs, pods, now)
	if s.ObservedGeneration != 7 {
		t.Errorf("observedGeneration %d", s.ObservedGeneration)
	}
	if s.Replicas != 4 || s.FullyLabeledReplicas != 3 || s.ReadyReplicas != 3 || s.AvailableReplicas != 2 {
		t.Errorf("counts replicas=%d fullyLabeled=%d ready=%d available=%d, want 4/3/3/2",
			s.Replicas, s.FullyLabeledReplicas, s.ReadyReplicas, s.AvailableReplicas)
	}
	if s.TerminatingReplicas == nil || *s.TerminatingReplicas != 2 {
		t.Errorf("terminatingReplicas %v, want 2", s.TerminatingReplicas)
	}
	if len(s.Conditions) != 1 || s.Conditions[0] != cond {
		t.Errorf("conditions %v, want kept", s.Conditions)
	}
	if empty := ComputeStatus(rs, nil, now); empty.Replicas != 0 || empty.TerminatingReplicas != nil {
		t.Errorf("no pods: %+v", empty)
	}
}

// TestSyncAdoptsOrphansAndReleasesStrays: an orphan pod the selector matches is adopted and
// counted (one creation fewer), one the ReplicaSet controls that no longer matches is
// released, a pod another controller owns is left alone — as upstream's ControllerRefManager.
func TestSyncAdoptsOrphansAndReleasesStrays(t *testing.T) {
	rs := newRS("web", 2)
	orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "default", UID: "orphan-uid", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "node-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	relabelled := ownedPod(rs, "relabelled", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "debug"} })
	theirs := ownedPod(newRS("other", 1), "theirs")
	f := newFixture(t, rs, orphan, relabelled, theirs)
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	patched := map[string]string{}
	for _, a := range f.actions("patch", "pods") {
		pa := a.(ktesting.PatchAction)
		patched[pa.GetName()] = string(pa.GetPatch())
	}
	if len(patched) != 2 || !strings.Contains(patched["orphan"], `"uid":"web-uid"`) || !strings.Contains(patched["relabelled"], `"$patch":"delete"`) {
		t.Fatalf("patches %v, want the orphan adopted and the relabelled pod released", patched)
	}
	p, err := f.client.CoreV1().Pods("default").Get(context.Background(), "orphan", metav1.GetOptions{})
	if err != nil || !podutil.IsControlledBy(p, rs.UID) {
		t.Fatalf("the orphan after the sync: %+v %v", p.OwnerReferences, err)
	}
	if n := len(f.actions("create", "pods")); n != 1 {
		t.Fatalf("%d pods created, want 1 (2 replicas, the adopted orphan counts)", n)
	}
}
