package replicationcontroller

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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
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
			p.UID = types.UID(p.Name + "-uid")
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(100)
	c := New(client, factory.Core().V1().ReplicationControllers(), factory.Core().V1().Pods(), recorder, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
	case *corev1.ReplicationController:
		_ = f.factory.Core().V1().ReplicationControllers().Informer().GetIndexer().Add(o)
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

// statusUpdates are the RC objects the controller wrote to the status subresource.
func (f *fixture) statusUpdates(t *testing.T) []*corev1.ReplicationController {
	t.Helper()
	var out []*corev1.ReplicationController
	for _, a := range f.actions("update", "replicationcontrollers") {
		if a.GetSubresource() != "status" {
			t.Fatalf("update of %q, want only status updates", a.GetSubresource())
		}
		out = append(out, a.(ktesting.UpdateAction).GetObject().(*corev1.ReplicationController))
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

func newRC(name string, replicas int32) *corev1.ReplicationController {
	return &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid"), Generation: 1},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: ptr.To(replicas),
			Selector: map[string]string{"app": name},
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name, "tier": "front"}, Annotations: map[string]string{"note": "x"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
		Status: corev1.ReplicationControllerStatus{ObservedGeneration: 1},
	}
}

type podOpt func(*corev1.Pod)

func ownedPod(rc *corev1.ReplicationController, name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rc.Namespace, UID: types.UID(name + "-uid"), ResourceVersion: "1",
			Labels:            map[string]string{"app": rc.Name, "tier": "front"},
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(rc, controllerKind)}},
		Spec:   corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func orphan(name string, lbls map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid"), Labels: lbls},
		Spec: corev1.PodSpec{NodeName: "node-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
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

func deleting(p *corev1.Pod) { ts := metav1.NewTime(now); p.DeletionTimestamp = &ts }

// createdPods are the pods the controller created, as stored (named, unlike the recorded
// create actions, which are copied before the naming reactor runs).
func createdPods(t *testing.T, f *fixture) []*corev1.Pod {
	t.Helper()
	list, err := f.client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*corev1.Pod
	for i := range list.Items {
		if list.Items[i].GenerateName != "" {
			out = append(out, &list.Items[i])
		}
	}
	return out
}

func TestSyncCreatesMissingPods(t *testing.T) {
	rc := newRC("web", 3)
	rc.Generation = 2
	rc.Spec.Template.Finalizers = []string{"example.com/keep"}
	f := newFixture(t, rc)
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	pods := createdPods(t, f)
	if n := len(f.actions("create", "pods")); len(pods) != 3 || n != 3 {
		t.Fatalf("%d pods from %d creations, want 3", len(pods), n)
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
		if p.Namespace != "default" {
			t.Errorf("pod created in %q", p.Namespace)
		}
		if p.GenerateName != "web-" {
			t.Errorf("generateName %q, want web-", p.GenerateName)
		}
		if !reflect.DeepEqual(p.Labels, map[string]string{"app": "web", "tier": "front"}) || p.Annotations["note"] != "x" ||
			!reflect.DeepEqual(p.Finalizers, []string{"example.com/keep"}) {
			t.Errorf("metadata labels=%v annotations=%v finalizers=%v, want the template's", p.Labels, p.Annotations, p.Finalizers)
		}
		if len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Image != "nginx" {
			t.Errorf("spec %+v, want the template's", p.Spec)
		}
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.UID != rc.UID || ref.Kind != "ReplicationController" || ref.APIVersion != "v1" || ref.Name != "web" ||
			!ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Errorf("controller ref %+v", ref)
		}
	}
	// The pods are not the template's: mutating one must not reach the cached RC.
	pods[0].Labels["tier"] = "changed"
	if rc.Spec.Template.Labels["tier"] != "front" {
		t.Fatal("created pod shares the template's label map")
	}
	// Upstream's per-pod event message, one per created pod.
	sort.Strings(names)
	ev := f.events()
	sort.Strings(ev)
	var want []string
	for _, n := range names {
		want = append(want, "Normal SuccessfulCreate Created pod: "+n)
	}
	if !reflect.DeepEqual(ev, want) {
		t.Errorf("events %q, want %q", ev, want)
	}
	// The generation moved on, so the status is written even with no pods counted yet.
	upd := f.statusUpdates(t)
	if len(upd) != 1 {
		t.Fatalf("%d status updates, want 1", len(upd))
	}
	if st := upd[0].Status; st.ObservedGeneration != 2 || st.Replicas != 0 || len(st.Conditions) != 0 {
		t.Errorf("status %+v", st)
	}
}

func TestSyncExpectationsPreventDoubleCreate(t *testing.T) {
	rc := newRC("web", 3)
	f := newFixture(t, rc)
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	created := createdPods(t, f)
	if len(created) != 3 {
		t.Fatalf("%d creations, want 3", len(created))
	}
	// The informer has not delivered the new pods yet: a second sync must not create more.
	f.client.ClearActions()
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("create", "pods")); n != 0 {
		t.Fatalf("second sync created %d pods while the first creations were unobserved", n)
	}
	// The pods arrive through the informer one by one.
	for i, p := range created {
		if f.c.exp.Satisfied("default/web") {
			t.Fatalf("satisfied after %d of 3 creations were observed", i)
		}
		f.cache(p)
		f.c.podEvent(p, true, false)
	}
	if !f.c.exp.Satisfied("default/web") {
		t.Fatal("not satisfied after all creations were observed")
	}
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("create", "pods")); n != 0 {
		t.Fatalf("created %d pods with all 3 present", n)
	}
	// And after the TTL an unobserved expectation no longer holds the RC back.
	f = newFixture(t, newRC("web", 2))
	_ = f.sync(t, "default/web")
	f.client.ClearActions()
	f.c.exp.SetClock(func() time.Time { return now.Add(5*time.Minute + time.Second) })
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("create", "pods")); n != 2 {
		t.Fatalf("%d creations after the expectations expired, want 2", n)
	}
}

func TestSyncDeletesSurplusInDeletionOrder(t *testing.T) {
	rc := newRC("web", 2)
	rc.Status = corev1.ReplicationControllerStatus{ObservedGeneration: 1, Replicas: 4, FullyLabeledReplicas: 4, ReadyReplicas: 2, AvailableReplicas: 2}
	objs := []runtime.Object{rc,
		ownedPod(rc, "ready-old", isReady),
		ownedPod(rc, "unscheduled", func(p *corev1.Pod) { p.Spec.NodeName = ""; p.Status.Phase = corev1.PodPending }),
		ownedPod(rc, "ready-new", isReady, func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute)) }),
		ownedPod(rc, "not-ready", notReady),
		// Not counted and not deleted: finished, already terminating, or another RC's.
		ownedPod(rc, "succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		ownedPod(rc, "terminating", isReady, deleting),
		ownedPod(newRC("other", 1), "stray"),
	}
	f := newFixture(t, objs...)
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range f.actions("delete", "pods") {
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
	ev := f.events()
	sort.Strings(ev)
	if want := []string{"Normal SuccessfulDelete Deleted pod: not-ready", "Normal SuccessfulDelete Deleted pod: unscheduled"}; !reflect.DeepEqual(ev, want) {
		t.Errorf("events %q, want %q", ev, want)
	}
	// Deletions are tracked by pod: another pod's deletion, or seeing one victim twice (its
	// deletionTimestamp, then its removal), does not satisfy the RC.
	victim := objs[4].(*corev1.Pod)
	f.c.podEvent(objs[1], false, true)
	f.c.podEvent(victim, false, true)
	f.c.podEvent(victim, false, true)
	if f.c.exp.Satisfied("default/web") {
		t.Fatal("satisfied with the unscheduled pod's deletion unobserved")
	}
	f.c.podEvent(objs[2], false, true)
	if !f.c.exp.Satisfied("default/web") {
		t.Fatal("not satisfied once both victims' deletions were observed")
	}
}

func TestSyncDeletesNewestAmongEquals(t *testing.T) {
	rc := newRC("web", 1)
	f := newFixture(t, rc,
		ownedPod(rc, "older", isReady),
		ownedPod(rc, "newer", isReady, func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute)) }))
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	dels := f.actions("delete", "pods")
	if len(dels) != 1 || dels[0].(ktesting.DeleteAction).GetName() != "newer" {
		t.Fatalf("deletions %v, want only the newer pod", dels)
	}
}

func TestSyncDeleteFailure(t *testing.T) {
	rc := newRC("web", 0)
	f := newFixture(t, rc, ownedPod(rc, "a", isReady), ownedPod(rc, "b", isReady))
	f.client.PrependReactor("delete", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
		switch a.(ktesting.DeleteAction).GetName() {
		case "a":
			return true, nil, errors.New("etcd down")
		default:
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "b")
		}
	})
	err := f.sync(t, "default/web")
	if err == nil || !strings.Contains(err.Error(), "etcd down") {
		t.Fatalf("sync error %v, want the deletion error", err)
	}
	// The NotFound is what was wanted: no event for it. Neither deletion will be observed.
	if ev := f.events(); len(ev) != 1 || ev[0] != "Warning FailedDelete Error deleting: etcd down" {
		t.Errorf("events %q", ev)
	}
	if !f.c.exp.Satisfied("default/web") {
		t.Error("failed deletions still expected")
	}
	upd := f.statusUpdates(t)
	if len(upd) != 1 {
		t.Fatalf("%d status updates, want 1", len(upd))
	}
	c := upd[0].Status.Conditions
	if len(c) != 1 || c[0].Type != corev1.ReplicationControllerReplicaFailure || c[0].Reason != "FailedDelete" || !strings.Contains(c[0].Message, "etcd down") {
		t.Errorf("conditions %+v, want ReplicaFailure/FailedDelete", c)
	}
}

// TestSyncAdoptsOrphansAndReleasesStrays: an orphan the selector matches is adopted and
// counted (one creation fewer), a pod the RC controls that no longer matches is released,
// pods owned by another controller, finished orphans and terminating orphans are left alone.
func TestSyncAdoptsOrphansAndReleasesStrays(t *testing.T) {
	rc := newRC("web", 2)
	relabelled := ownedPod(rc, "relabelled", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "debug"} })
	finished := orphan("finished", map[string]string{"app": "web"})
	finished.Status.Phase = corev1.PodFailed
	leaving := orphan("leaving", map[string]string{"app": "web"})
	deleting(leaving)
	f := newFixture(t, rc, orphan("orphan", map[string]string{"app": "web"}), relabelled, ownedPod(newRC("other", 1), "theirs"),
		orphan("unrelated", map[string]string{"app": "db"}), finished, leaving)
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
	// The adoption is guarded by a fresh read of the RC.
	if gets := f.actions("get", "replicationcontrollers"); len(gets) != 1 {
		t.Fatalf("%d fresh reads of the RC before adopting, want 1", len(gets))
	}
	p, err := f.client.CoreV1().Pods("default").Get(context.Background(), "orphan", metav1.GetOptions{})
	if err != nil || !podutil.IsControlledBy(p, rc.UID) {
		t.Fatalf("the orphan after the sync: %+v %v", p.OwnerReferences, err)
	}
	if ref := metav1.GetControllerOf(p); ref.Kind != "ReplicationController" || ref.APIVersion != "v1" {
		t.Fatalf("adopted with %+v", ref)
	}
	p, _ = f.client.CoreV1().Pods("default").Get(context.Background(), "relabelled", metav1.GetOptions{})
	if len(p.OwnerReferences) != 0 {
		t.Fatalf("released pod still has %+v", p.OwnerReferences)
	}
	if n := len(f.actions("create", "pods")); n != 1 {
		t.Fatalf("%d pods created, want 1 (2 replicas, the adopted orphan counts)", n)
	}
	if st := f.statusUpdates(t)[0].Status; st.Replicas != 1 {
		t.Errorf("status replicas %d, want 1 (the adopted orphan, before the new pod shows)", st.Replicas)
	}
}

func TestSyncDoesNotAdoptForAGoneRC(t *testing.T) {
	for name, fresh := range map[string]func(*corev1.ReplicationController){
		"replaced": func(rc *corev1.ReplicationController) { rc.UID = "new-uid" },
		"deleting": func(rc *corev1.ReplicationController) { ts := metav1.NewTime(now); rc.DeletionTimestamp = &ts },
	} {
		t.Run(name, func(t *testing.T) {
			rc := newRC("web", 1)
			f := newFixture(t, rc, orphan("orphan", map[string]string{"app": "web"}))
			// The API has moved on; the cache still shows the old RC.
			stored := rc.DeepCopy()
			fresh(stored)
			if err := f.client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("replicationcontrollers"), stored, "default"); err != nil {
				t.Fatal(err)
			}
			f.client.ClearActions()
			if err := f.sync(t, "default/web"); err == nil {
				t.Fatal("sync succeeded adopting for an RC that is gone")
			}
			if n := len(f.actions("patch", "pods")) + len(f.actions("create", "pods")); n != 0 {
				t.Fatalf("%d pod patches/creations for an RC that is gone", n)
			}
		})
	}
	// And with the RC deleted outright, the orphan is not skipped as if it were the one gone.
	rc := newRC("web", 1)
	f := newFixture(t, rc, orphan("orphan", map[string]string{"app": "web"}))
	_ = f.client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("replicationcontrollers"), "default", "web")
	if err := f.sync(t, "default/web"); err == nil || len(f.actions("create", "pods")) != 0 {
		t.Fatalf("sync for a deleted RC: err %v, %d creations", err, len(f.actions("create", "pods")))
	}
}

func TestSyncDefaultsSelectorToTemplateLabels(t *testing.T) {
	rc := newRC("web", 2)
	rc.Spec.Selector = nil
	f := newFixture(t, rc,
		orphan("full", map[string]string{"app": "web", "tier": "front", "extra": "y"}),
		orphan("partial", map[string]string{"app": "web"}))
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	var adopted []string
	for _, a := range f.actions("patch", "pods") {
		adopted = append(adopted, a.(ktesting.PatchAction).GetName())
	}
	if len(adopted) != 1 || adopted[0] != "full" {
		t.Fatalf("adopted %v, want only the pod with all the template's labels", adopted)
	}
	if n := len(f.actions("create", "pods")); n != 1 {
		t.Fatalf("%d creations, want 1", n)
	}

	// An RC with neither selector nor template labels selects nothing and is left alone.
	bare := newRC("bare", 2)
	bare.Spec.Selector = nil
	bare.Spec.Template.Labels = nil
	f = newFixture(t, bare, orphan("any", nil), orphan("some", map[string]string{"app": "bare"}))
	if err := f.sync(t, "default/bare"); err != nil {
		t.Fatal(err)
	}
	if acts := f.client.Actions(); len(acts) != 0 {
		t.Fatalf("actions for an RC selecting nothing: %v", acts)
	}
}

func TestSyncStatusCounts(t *testing.T) {
	rc := newRC("web", 5)
	rc.Spec.MinReadySeconds = 30
	rc.Generation = 3
	f := newFixture(t, rc,
		ownedPod(rc, "available", isReady),
		ownedPod(rc, "ready-not-yet-available", readySince(now.Add(-10*time.Second))),
		ownedPod(rc, "not-ready", notReady),
		// Matches the selector, not the template: counted, but not fully labelled.
		ownedPod(rc, "partly-labelled", isReady, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} }),
		ownedPod(rc, "extra-labels", isReady, func(p *corev1.Pod) { p.Labels["extra"] = "y" }),
		ownedPod(rc, "terminating", isReady, deleting),
		ownedPod(rc, "failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }))
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	upd := f.statusUpdates(t)
	if len(upd) != 1 {
		t.Fatalf("%d status updates, want 1", len(upd))
	}
	want := corev1.ReplicationControllerStatus{Replicas: 5, FullyLabeledReplicas: 4, ReadyReplicas: 4, AvailableReplicas: 3, ObservedGeneration: 3}
	if got := upd[0].Status; !reflect.DeepEqual(got, want) {
		t.Fatalf("status %+v, want %+v", got, want)
	}
	if n := len(f.actions("create", "pods")) + len(f.actions("delete", "pods")); n != 0 {
		t.Fatalf("%d pod changes with 5 of 5 active", n)
	}

	// Steady state: the status already says so, nothing to write.
	steady := newRC("web", 2)
	steady.Spec.MinReadySeconds = 30
	steady.Status = corev1.ReplicationControllerStatus{Replicas: 2, FullyLabeledReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2, ObservedGeneration: 1}
	f = newFixture(t, steady, ownedPod(steady, "a", isReady),
		ownedPod(steady, "b", isReady, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} }))
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	if acts := f.client.Actions(); len(acts) != 0 {
		t.Fatalf("steady state produced actions: %v", acts)
	}
}

// TestSyncReplicaFailureCondition: a failing creation sets ReplicaFailure (reason
// FailedCreate, the error as message) and leaves it as it is while creation keeps failing;
// the first sync that manages without error removes it.
func TestSyncReplicaFailureCondition(t *testing.T) {
	rc := newRC("web", 3)
	f := newFixture(t, rc)
	var failing atomic.Bool
	failing.Store(true)
	f.client.PrependReactor("create", "pods", func(ktesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("exceeded quota"))
		}
		return false, nil, nil
	})
	err := f.sync(t, "default/web")
	if err == nil || !strings.Contains(err.Error(), "exceeded quota") {
		t.Fatalf("sync error %v, want the creation error", err)
	}
	// Slow start: the first batch of one failed, so no more were tried.
	if n := len(f.actions("create", "pods")); n != 1 {
		t.Fatalf("%d creation attempts, want 1", n)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning FailedCreate Error creating: ") || !strings.Contains(ev[0], "exceeded quota") {
		t.Fatalf("events %q", ev)
	}
	if !f.c.exp.Satisfied("default/web") {
		t.Fatal("failed and untried creations still expected")
	}
	upd := f.statusUpdates(t)
	if len(upd) != 1 {
		t.Fatalf("%d status updates, want 1", len(upd))
	}
	conds := upd[0].Status.Conditions
	if len(conds) != 1 {
		t.Fatalf("conditions %+v, want ReplicaFailure", conds)
	}
	cond := conds[0]
	if cond.Type != "ReplicaFailure" || cond.Status != corev1.ConditionTrue || cond.Reason != "FailedCreate" ||
		cond.Message != err.Error() || !cond.LastTransitionTime.Time.Equal(now) {
		t.Fatalf("condition %+v", cond)
	}

	// Still failing a minute later: the condition stands unchanged, no status write.
	f.cache(upd[0])
	f.client.ClearActions()
	f.c.now = func() time.Time { return now.Add(time.Minute) }
	if err := f.sync(t, "default/web"); err == nil {
		t.Fatal("sync succeeded with creation failing")
	}
	if n := len(f.statusUpdates(t)); n != 0 {
		t.Fatalf("%d status updates with the failure unchanged", n)
	}

	// The quota is raised: pods are created and the condition goes.
	failing.Store(false)
	f.client.ClearActions()
	_ = f.events()
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("create", "pods")); n != 3 {
		t.Fatalf("%d creations, want 3", n)
	}
	upd = f.statusUpdates(t)
	if len(upd) != 1 || len(upd[0].Status.Conditions) != 0 {
		t.Fatalf("status updates %v, want one clearing the condition", upd)
	}
}

func TestSyncNamespaceTerminatingIsNotAFailure(t *testing.T) {
	rc := newRC("web", 2)
	f := newFixture(t, rc)
	f.client.PrependReactor("create", "pods", func(ktesting.Action) (bool, runtime.Object, error) {
		err := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("namespace default is being terminated"))
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
		return true, nil, err
	})
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events %q", ev)
	}
	if !f.c.exp.Satisfied("default/web") {
		t.Error("creations that cannot happen still expected")
	}
	if upd := f.statusUpdates(t); len(upd) != 0 {
		t.Errorf("status updates %+v", upd)
	}
}

func TestSyncWithoutTemplate(t *testing.T) {
	rc := newRC("web", 2)
	rc.Spec.Template = nil
	f := newFixture(t, rc)
	err := f.sync(t, "default/web")
	if err == nil || !strings.Contains(err.Error(), "no labels") {
		t.Fatalf("sync error %v, want upstream's no-labels refusal", err)
	}
	if n := len(f.actions("create", "pods")); n != 0 {
		t.Fatalf("%d creations without a template", n)
	}
	if upd := f.statusUpdates(t); len(upd) != 1 || len(upd[0].Status.Conditions) != 1 || upd[0].Status.Conditions[0].Reason != "FailedCreate" {
		t.Fatalf("status updates %+v, want a FailedCreate condition", upd)
	}
}

func TestSyncDeletedOrDeletingRC(t *testing.T) {
	f := newFixture(t)
	f.c.exp.Expect("default/gone", 3, nil)
	if err := f.sync(t, "default/gone"); err != nil {
		t.Fatal(err)
	}
	if len(f.client.Actions()) != 0 {
		t.Fatalf("actions for a missing RC: %v", f.client.Actions())
	}
	if f.c.exp.Pending("default/gone") {
		t.Fatal("expectations of a deleted RC kept")
	}

	rc := newRC("web", 3)
	ts := metav1.NewTime(now)
	rc.DeletionTimestamp = &ts
	a := ownedPod(rc, "a", isReady)
	f = newFixture(t, rc, a, orphan("orphan", map[string]string{"app": "web"}))
	if err := f.sync(t, "default/web"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("create", "pods")) + len(f.actions("patch", "pods")); n != 0 {
		t.Fatalf("%d pods created or adopted for an RC being deleted", n)
	}
	if st := f.statusUpdates(t); len(st) != 1 || st[0].Status.Replicas != 1 {
		t.Fatalf("status of an RC being deleted: %+v", st)
	}
}

// TestPodEvents: events count against the expectations of the RC the pod's controller
// reference names only while it is that very RC; orphans wake the RCs that match them.
func TestPodEvents(t *testing.T) {
	rc := newRC("web", 1)
	f := newFixture(t, rc, newRC("db", 1))
	f.c.exp.Expect("default/web", 1, nil)
	old := rc.DeepCopy()
	old.UID = "previous-uid"
	f.c.podEvent(ownedPod(old, "stale"), true, false)
	if f.c.exp.Satisfied("default/web") {
		t.Fatal("a pod of a previous RC of the same name lowered the expectations")
	}
	if n := f.c.loop.Len(); n != 0 {
		t.Fatalf("%d keys queued for a pod of a previous RC", n)
	}
	f.c.podEvent(ownedPod(rc, "mine"), true, false)
	if !f.c.exp.Satisfied("default/web") {
		t.Fatal("the RC's own pod did not lower its expectations")
	}
	f.c.podEvent(orphan("o", map[string]string{"app": "db", "x": "y"}), false, false)
	if n := f.c.loop.Len(); n != 2 { // web, then db for the orphan
		t.Fatalf("%d keys queued, want 2", n)
	}
	// A deletion seen only as a tombstone still counts; a deleted orphan wakes nobody.
	f = newFixture(t, rc)
	f.c.exp.Expect("default/web", 0, []types.UID{"gone-uid"})
	f.c.podEvent(cache.DeletedFinalStateUnknown{Key: "default/o", Obj: orphan("o", map[string]string{"app": "web"})}, false, true)
	if n := f.c.loop.Len(); n != 0 {
		t.Fatalf("%d keys queued for a deleted orphan", n)
	}
	f.c.podEvent(cache.DeletedFinalStateUnknown{Key: "default/gone", Obj: ownedPod(rc, "gone")}, false, true)
	if !f.c.exp.Satisfied("default/web") || f.c.loop.Len() != 1 {
		t.Fatal("a tombstoned deletion was not observed")
	}
}

func TestSelector(t *testing.T) {
	for _, tc := range []struct {
		name     string
		selector map[string]string
		template *corev1.PodTemplateSpec
		pod      map[string]string
		want     bool
	}{
		{"selector matches", map[string]string{"app": "web"}, nil, map[string]string{"app": "web", "x": "y"}, true},
		{"selector differs", map[string]string{"app": "web"}, nil, map[string]string{"app": "db"}, false},
		{"selector wins over template", map[string]string{"app": "web"}, tmpl(map[string]string{"app": "web", "t": "1"}), map[string]string{"app": "web"}, true},
		{"empty selector: template labels", map[string]string{}, tmpl(map[string]string{"app": "web", "t": "1"}), map[string]string{"app": "web"}, false},
		{"nil selector: template labels", nil, tmpl(map[string]string{"app": "web", "t": "1"}), map[string]string{"app": "web", "t": "1"}, true},
		{"nothing: no template", nil, nil, map[string]string{}, false},
		{"nothing: no labels", nil, tmpl(nil), map[string]string{"app": "web"}, false},
	} {
		rc := &corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{Selector: tc.selector, Template: tc.template}}
		if got := Selector(rc).Matches(labels.Set(tc.pod)); got != tc.want {
			t.Errorf("%s: matches %v = %v, want %v", tc.name, tc.pod, got, tc.want)
		}
	}
}

func tmpl(l map[string]string) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l}}
}

func TestNewPodPrefix(t *testing.T) {
	long := strings.Repeat("a", 253)
	for name, want := range map[string]string{"web": "web-", long: long, long[:252]: long[:252] + "-"} {
		rc := newRC(name, 1)
		if got := NewPod(rc).GenerateName; got != want {
			t.Errorf("NewPod(%d-char name).GenerateName has %d chars, want %d", len(name), len(got), len(want))
		}
	}
	if p := NewPod(&corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "x"}}); p.Labels != nil || len(p.Spec.Containers) != 0 {
		t.Errorf("pod of an RC without a template: %+v", p)
	}
}

func TestComputeStatus(t *testing.T) {
	rc := newRC("web", 3)
	rc.Generation = 4
	rc.Spec.MinReadySeconds = 10
	other := corev1.ReplicationControllerCondition{Type: "Other", Status: corev1.ConditionTrue}
	earlier := corev1.ReplicationControllerCondition{Type: corev1.ReplicationControllerReplicaFailure, Status: corev1.ConditionTrue,
		Reason: "FailedCreate", Message: "old", LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}
	one := []*corev1.Pod{ownedPod(rc, "a", isReady)}
	four := []*corev1.Pod{ownedPod(rc, "a", isReady), ownedPod(rc, "b", readySince(now.Add(-5*time.Second))),
		ownedPod(rc, "c", notReady), ownedPod(rc, "d", isReady, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} })}
	boom := errors.New("boom")
	fresh := func(reason string) corev1.ReplicationControllerCondition {
		return corev1.ReplicationControllerCondition{Type: corev1.ReplicationControllerReplicaFailure, Status: corev1.ConditionTrue,
			Reason: reason, Message: "boom", LastTransitionTime: metav1.NewTime(now)}
	}
	for _, tc := range []struct {
		name   string
		before []corev1.ReplicationControllerCondition
		pods   []*corev1.Pod
		err    error
		want   []corev1.ReplicationControllerCondition
	}{
		{"healthy", nil, one, nil, nil},
		{"other conditions kept", []corev1.ReplicationControllerCondition{other}, one, nil, []corev1.ReplicationControllerCondition{other}},
		{"create failure", []corev1.ReplicationControllerCondition{other}, one, boom, []corev1.ReplicationControllerCondition{other, fresh("FailedCreate")}},
		{"delete failure", nil, four, boom, []corev1.ReplicationControllerCondition{fresh("FailedDelete")}},
		{"failure at the count: no reason", nil, four[:3], boom, []corev1.ReplicationControllerCondition{fresh("")}},
		{"existing failure kept as is", []corev1.ReplicationControllerCondition{earlier, other}, one, boom, []corev1.ReplicationControllerCondition{earlier, other}},
		{"recovered", []corev1.ReplicationControllerCondition{earlier, other}, one, nil, []corev1.ReplicationControllerCondition{other}},
	} {
		rc := rc.DeepCopy()
		rc.Status.Conditions = tc.before
		s := ComputeStatus(rc, tc.pods, tc.err, now)
		if !reflect.DeepEqual(s.Conditions, tc.want) {
			t.Errorf("%s: conditions %+v, want %+v", tc.name, s.Conditions, tc.want)
		}
		if s.ObservedGeneration != 4 {
			t.Errorf("%s: observedGeneration %d", tc.name, s.ObservedGeneration)
		}
	}
	s := ComputeStatus(rc, four, nil, now)
	if s.Replicas != 4 || s.FullyLabeledReplicas != 3 || s.ReadyReplicas != 3 || s.AvailableReplicas != 2 {
		t.Errorf("counts replicas=%d fullyLabeled=%d ready=%d available=%d, want 4/3/3/2",
			s.Replicas, s.FullyLabeledReplicas, s.ReadyReplicas, s.AvailableReplicas)
	}
	// The status must not share the cached RC's condition slice.
	rc.Status.Conditions = make([]corev1.ReplicationControllerCondition, 1, 4)
	rc.Status.Conditions[0] = other
	_ = ComputeStatus(rc, one, boom, now)
	if got := rc.Status.Conditions[:2][1]; got.Type != "" {
		t.Errorf("ComputeStatus wrote into the RC's condition array: %+v", got)
	}
}

func TestSlowStart(t *testing.T) {
	for _, tc := range []struct {
		count, failAt int // failAt: the call that fails (1-based), 0 for none
		ok, calls     int
	}{
		{0, 0, 0, 0},
		{1, 0, 1, 1},
		{7, 0, 7, 7},
		{10, 0, 10, 10}, // batches 1, 2, 4, 3
		{10, 1, 0, 1},   // the first batch fails: nothing else is tried
		{10, 2, 2, 3},   // the batch of 2 has a failure: its other call still runs
		{10, 4, 6, 7},   // the batch of 4 has a failure: no batch of 3 follows
	} {
		var calls atomic.Int32
		ok, err := slowStart(tc.count, func() error {
			if n := calls.Add(1); int(n) == tc.failAt {
				return errors.New("no")
			}
			return nil
		})
		if ok != tc.ok || int(calls.Load()) != tc.calls || (err != nil) != (tc.failAt != 0) {
			t.Errorf("slowStart(%d) failing call %d: %d ok, %d calls, err %v; want %d ok, %d calls",
				tc.count, tc.failAt, ok, calls.Load(), err, tc.ok, tc.calls)
		}
	}
}

func TestNextAvailabilityCheck(t *testing.T) {
	rc := newRC("web", 1)
	for _, tc := range []struct {
		name     string
		minReady int32
		pods     []*corev1.Pod
		want     time.Duration
		ok       bool
	}{
		{"no minReadySeconds", 0, []*corev1.Pod{ownedPod(rc, "a", readySince(now))}, 0, false},
		{"all available", 30, []*corev1.Pod{ownedPod(rc, "a", isReady)}, 0, false},
		{"not ready only", 30, []*corev1.Pod{ownedPod(rc, "a", notReady)}, 0, false},
		{"earliest of the waiting", 30, []*corev1.Pod{ownedPod(rc, "a", readySince(now.Add(-5*time.Second))),
			ownedPod(rc, "b", readySince(now.Add(-20*time.Second))), ownedPod(rc, "c", isReady)}, 10 * time.Second, true},
		{"at the boundary: fall back", 30, []*corev1.Pod{ownedPod(rc, "a", readySince(now.Add(-30*time.Second)))}, 30 * time.Second, true},
		{"no transition time: fall back", 30, []*corev1.Pod{ownedPod(rc, "a", readySince(time.Time{}))}, 30 * time.Second, true},
	} {
		got, ok := nextAvailabilityCheck(tc.minReady, tc.pods, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %v %v, want %v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// TestRun drives the controller through real (fake-backed) informers, so the event handlers
// carry the creations and deletions into the expectations: an RC gets its pods and its
// status, then scales down, without ever overshooting.
func TestRun(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { f.c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	rcs := f.client.CoreV1().ReplicationControllers("default")
	if _, err := rcs.Create(ctx, newRC("web", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, cond func(pods int, rc *corev1.ReplicationController) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			pods, _ := f.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			rc, _ := rcs.Get(ctx, "web", metav1.GetOptions{})
			if rc != nil && cond(len(pods.Items), rc) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: %d pods, status %+v", what, len(pods.Items), rc.Status)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("3 pods", func(n int, rc *corev1.ReplicationController) bool { return n == 3 && rc.Status.Replicas == 3 })

	rc, err := rcs.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc.Spec.Replicas = ptr.To[int32](1)
	rc.Generation = 2
	if _, err := rcs.Update(ctx, rc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("scale down to 1", func(n int, rc *corev1.ReplicationController) bool {
		return n == 1 && rc.Status.Replicas == 1 && rc.Status.ObservedGeneration == 2
	})
	// Settled: give stray syncs a moment, then check nothing overshot.
	time.Sleep(100 * time.Millisecond)
	if c, d := len(f.actions("create", "pods")), len(f.actions("delete", "pods")); c != 3 || d != 2 {
		t.Fatalf("%d creations and %d deletions, want exactly 3 and 2", c, d)
	}
}
