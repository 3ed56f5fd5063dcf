package statefulset

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/controlplane/controllers/history"
)

type fixture struct {
	c        *Controller
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	recorder *record.FakeRecorder
}

// newFixture builds the controller over a fake clientset seeded with objs; resync copies
// what the clientset holds into the informer caches, as the informers would.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewSimpleClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(100)
	c := New(client, factory.Apps().V1().StatefulSets(), factory.Core().V1().Pods(), factory.Apps().V1().ControllerRevisions(),
		factory.Core().V1().PersistentVolumeClaims(), recorder, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c.now = func() time.Time { return now }
	f := &fixture{c: c, client: client, factory: factory, recorder: recorder}
	f.resync(t)
	return f
}

func (f *fixture) resync(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	replace := func(inf cache.SharedIndexInformer, items []any) {
		if err := inf.GetIndexer().Replace(items, ""); err != nil {
			t.Fatal(err)
		}
	}
	sets, _ := f.client.AppsV1().StatefulSets("").List(ctx, metav1.ListOptions{})
	pods, _ := f.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	revs, _ := f.client.AppsV1().ControllerRevisions("").List(ctx, metav1.ListOptions{})
	pvcs, _ := f.client.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	var items []any
	for i := range sets.Items {
		items = append(items, &sets.Items[i])
	}
	replace(f.factory.Apps().V1().StatefulSets().Informer(), items)
	items = nil
	for i := range pods.Items {
		items = append(items, &pods.Items[i])
	}
	replace(f.factory.Core().V1().Pods().Informer(), items)
	items = nil
	for i := range revs.Items {
		items = append(items, &revs.Items[i])
	}
	replace(f.factory.Apps().V1().ControllerRevisions().Informer(), items)
	items = nil
	for i := range pvcs.Items {
		items = append(items, &pvcs.Items[i])
	}
	replace(f.factory.Core().V1().PersistentVolumeClaims().Informer(), items)
}

func (f *fixture) sync(t *testing.T) {
	t.Helper()
	f.client.ClearActions()
	if err := f.c.sync(context.Background(), "default/web"); err != nil {
		t.Fatal(err)
	}
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

func (f *fixture) set(t *testing.T) *appsv1.StatefulSet {
	t.Helper()
	s, err := f.client.AppsV1().StatefulSets("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *fixture) revisions(t *testing.T) []*appsv1.ControllerRevision {
	t.Helper()
	l, err := f.client.AppsV1().ControllerRevisions("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*appsv1.ControllerRevision
	for i := range l.Items {
		out = append(out, &l.Items[i])
	}
	history.Sort(out)
	return out
}

func withClaims(s *appsv1.StatefulSet) {
	s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: map[string]string{"kind": "data"}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}}
}

func withRetention(whenDeleted, whenScaled appsv1.PersistentVolumeClaimRetentionPolicyType) setOpt {
	return func(s *appsv1.StatefulSet) {
		s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: whenDeleted, WhenScaled: whenScaled}
	}
}

// revisionOfSet is the revision the controller makes for set, for seeding.
func revisionOfSet(t *testing.T, set *appsv1.StatefulSet, n int64) *appsv1.ControllerRevision {
	t.Helper()
	r, err := NewRevision(set, n, ptr.To[int32](0))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func ownedPod(set *appsv1.StatefulSet, ordinal int, revision, state string) *corev1.Pod {
	p := pod(ordinal, revision, state)
	p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(set, setKind)}
	return p
}

func TestSyncCreatesFirstPodWithClaims(t *testing.T) {
	set := newSet(3, withClaims, withRetention(appsv1.DeletePersistentVolumeClaimRetentionPolicyType, appsv1.RetainPersistentVolumeClaimRetentionPolicyType))
	f := newFixture(t, set)
	f.sync(t)

	revs := f.revisions(t)
	if len(revs) != 1 || revs[0].Revision != 1 || !strings.HasPrefix(revs[0].Name, "web-") || revs[0].Labels[history.HashLabel] == "" ||
		revs[0].Labels["app"] != "web" || metav1.GetControllerOf(revs[0]).UID != set.UID {
		t.Fatalf("revisions %+v", revs)
	}
	rev := revs[0].Name
	// The data is upstream's patch, which `kubectl rollout undo` applies.
	if data := string(revs[0].Data.Raw); !strings.HasPrefix(data, `{"spec":{"template":{"$patch":"replace","metadata":{`) {
		t.Fatalf("revision data %s", data)
	}
	var data struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(revs[0].Data.Raw, &data); err != nil || data.Spec.Template.Spec.Containers[0].Image != "nginx:1" {
		t.Fatalf("revision data %s (%v)", revs[0].Data.Raw, err)
	}

	pvcs := f.actions("create", "persistentvolumeclaims")
	if len(pvcs) != 1 {
		t.Fatalf("%d claim creations, want 1", len(pvcs))
	}
	pvc := pvcs[0].(ktesting.CreateAction).GetObject().(*corev1.PersistentVolumeClaim)
	if pvc.Name != "data-web-0" || pvc.Labels["kind"] != "data" || pvc.Labels["app"] != "web" || pvc.Spec.Resources.Requests.Storage().String() != "1Gi" {
		t.Fatalf("claim %+v", pvc.ObjectMeta)
	}
	// whenDeleted=Delete: the set controls the claim.
	if ref := metav1.GetControllerOf(pvc); ref == nil || ref.UID != set.UID || ref.Kind != "StatefulSet" || len(pvc.OwnerReferences) != 1 {
		t.Fatalf("claim owners %+v", pvc.OwnerReferences)
	}

	creates := f.actions("create", "pods")
	if len(creates) != 1 {
		t.Fatalf("%d pod creations, want 1 (OrderedReady)", len(creates))
	}
	p := creates[0].(ktesting.CreateAction).GetObject().(*corev1.Pod)
	if p.Name != "web-0" || p.Namespace != "default" || p.Spec.Hostname != "web-0" || p.Spec.Subdomain != "nginx" {
		t.Fatalf("pod %s/%s hostname %s subdomain %s", p.Namespace, p.Name, p.Spec.Hostname, p.Spec.Subdomain)
	}
	if p.Labels[appsv1.StatefulSetPodNameLabel] != "web-0" || p.Labels[appsv1.PodIndexLabel] != "0" || p.Labels[appsv1.StatefulSetRevisionLabel] != rev || p.Labels["app"] != "web" {
		t.Fatalf("pod labels %v", p.Labels)
	}
	if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != set.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Fatalf("pod owner %+v", ref)
	}
	if len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].Name != "data" || p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "data-web-0" {
		t.Fatalf("pod volumes %+v", p.Spec.Volumes)
	}
	// Claim before pod.
	var order []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "create" {
			order = append(order, a.GetResource().Resource)
		}
	}
	if !slices.Equal(order, []string{"controllerrevisions", "persistentvolumeclaims", "pods"}) {
		t.Fatalf("creation order %v", order)
	}

	st := f.set(t).Status
	if st.ObservedGeneration != 1 || st.CurrentRevision != rev || st.UpdateRevision != rev || ptr.Deref(st.CollisionCount, -1) != 0 || st.Replicas != 0 {
		t.Fatalf("status %+v", st)
	}
	want := []string{"Normal SuccessfulCreate Create Claim data-web-0 Pod web-0 in StatefulSet web success",
		"Normal SuccessfulCreate Create Pod web-0 in StatefulSet web successful"}
	if ev := f.events(); !slices.Equal(ev, want) {
		t.Fatalf("events %q", ev)
	}

	// The next sync, with web-0 not ready yet, creates nothing and writes no status.
	f.resync(t)
	f.sync(t)
	if n := len(f.actions("create", "pods")); n != 0 {
		t.Fatalf("%d creations while web-0 is not ready", n)
	}
}

func TestSyncSteadyWritesNothing(t *testing.T) {
	set := newSet(2)
	rev := revisionOfSet(t, set, 1)
	set.Status = appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, CurrentReplicas: 2, UpdatedReplicas: 2,
		CurrentRevision: rev.Name, UpdateRevision: rev.Name, CollisionCount: ptr.To[int32](0)}
	f := newFixture(t, set, rev, ownedPod(set, 0, rev.Name, "ready"), ownedPod(set, 1, rev.Name, "ready"))
	f.sync(t)
	for _, a := range f.client.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" && a.GetVerb() != "get" {
			t.Errorf("unexpected %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

func TestSyncRollingUpdate(t *testing.T) {
	old := newSet(3)
	r1 := revisionOfSet(t, old, 1)
	set := newSet(3)
	set.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	set.Generation = 2
	set.Status = appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: 3, CurrentRevision: r1.Name, UpdateRevision: r1.Name, CollisionCount: ptr.To[int32](0)}
	f := newFixture(t, set, r1, ownedPod(set, 0, r1.Name, "ready"), ownedPod(set, 1, r1.Name, "ready"), ownedPod(set, 2, r1.Name, "ready"))
	f.sync(t)

	revs := f.revisions(t)
	if len(revs) != 2 || revs[0].Name != r1.Name || revs[1].Revision != 2 {
		t.Fatalf("revisions %v", revs)
	}
	r2 := revs[1].Name
	dels := f.actions("delete", "pods")
	if len(dels) != 1 || dels[0].(ktesting.DeleteAction).GetName() != "web-2" {
		t.Fatalf("deletions %v", dels)
	}
	st := f.set(t).Status
	if st.CurrentRevision != r1.Name || st.UpdateRevision != r2 || st.CurrentReplicas != 2 || st.UpdatedReplicas != 0 || st.ObservedGeneration != 2 {
		t.Fatalf("status %+v", st)
	}
	if ev := f.events(); !slices.Equal(ev, []string{"Normal SuccessfulDelete Delete Pod web-2 in StatefulSet web successful"}) {
		t.Fatalf("events %q", ev)
	}

	// web-2 is gone: recreated from the new template.
	f.resync(t)
	f.sync(t)
	creates := f.actions("create", "pods")
	if len(creates) != 1 {
		t.Fatalf("%d creations", len(creates))
	}
	p := creates[0].(ktesting.CreateAction).GetObject().(*corev1.Pod)
	if p.Name != "web-2" || p.Labels[appsv1.StatefulSetRevisionLabel] != r2 || p.Spec.Containers[0].Image != "nginx:2" {
		t.Fatalf("recreated %s at %s image %s", p.Name, p.Labels[appsv1.StatefulSetRevisionLabel], p.Spec.Containers[0].Image)
	}
}

func TestSyncPartitionKeepsCurrentTemplate(t *testing.T) {
	old := newSet(2)
	r1 := revisionOfSet(t, old, 1)
	set := newSet(2, withPartition(1))
	set.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	set.Status = appsv1.StatefulSetStatus{CurrentRevision: r1.Name, UpdateRevision: r1.Name}
	// web-0, below the partition, was deleted: it comes back at the current revision.
	f := newFixture(t, set, r1, ownedPod(set, 1, r1.Name, "ready"))
	f.sync(t)
	creates := f.actions("create", "pods")
	if len(creates) != 1 {
		t.Fatalf("%d creations", len(creates))
	}
	p := creates[0].(ktesting.CreateAction).GetObject().(*corev1.Pod)
	if p.Name != "web-0" || p.Labels[appsv1.StatefulSetRevisionLabel] != r1.Name || p.Spec.Containers[0].Image != "nginx:1" {
		t.Fatalf("created %s at %s image %s", p.Name, p.Labels[appsv1.StatefulSetRevisionLabel], p.Spec.Containers[0].Image)
	}
}

func TestSyncRollbackRenumbers(t *testing.T) {
	a := newSet(1)
	b := newSet(1)
	b.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	r1, r2 := revisionOfSet(t, a, 1), revisionOfSet(t, b, 2)
	set := newSet(1) // back to template a, as `kubectl rollout undo` leaves it
	set.Status = appsv1.StatefulSetStatus{CurrentRevision: r2.Name, UpdateRevision: r2.Name}
	f := newFixture(t, set, r1, r2, ownedPod(set, 0, r2.Name, "ready"))
	f.sync(t)
	if n := len(f.actions("create", "controllerrevisions")); n != 0 {
		t.Fatalf("%d revisions created for a rollback", n)
	}
	revs := f.revisions(t)
	if revs[len(revs)-1].Name != r1.Name || revs[len(revs)-1].Revision != 3 {
		t.Fatalf("newest %s #%d, want %s #3", revs[len(revs)-1].Name, revs[len(revs)-1].Revision, r1.Name)
	}
	if st := f.set(t).Status; st.UpdateRevision != r1.Name || st.CurrentRevision != r2.Name {
		t.Fatalf("status %+v", st)
	}
}

func TestSyncTruncatesHistory(t *testing.T) {
	set := newSet(1)
	set.Spec.RevisionHistoryLimit = ptr.To[int32](1)
	var objs []runtime.Object
	var names []string
	for i, img := range []string{"a", "b", "c", "d"} {
		s := newSet(1)
		s.Spec.Template.Spec.Containers[0].Image = img
		r := revisionOfSet(t, s, int64(i+1))
		objs = append(objs, r)
		names = append(names, r.Name)
	}
	cur := revisionOfSet(t, set, 5)
	set.Status = appsv1.StatefulSetStatus{CurrentRevision: cur.Name, UpdateRevision: cur.Name}
	// A pod still runs revision "b": it stays, however old.
	objs = append(objs, set, cur, ownedPod(set, 0, names[1], "ready"))
	f := newFixture(t, objs...)
	f.sync(t)
	var deleted []string
	for _, a := range f.actions("delete", "controllerrevisions") {
		deleted = append(deleted, a.(ktesting.DeleteAction).GetName())
	}
	// Not live: a, c, d; limit 1 keeps d.
	if !slices.Equal(deleted, []string{names[0], names[2]}) {
		t.Fatalf("deleted %v, want %v", deleted, []string{names[0], names[2]})
	}
}

func TestSyncRetentionScaleDown(t *testing.T) {
	set := newSet(1, withClaims, withRetention(appsv1.DeletePersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType))
	rev := revisionOfSet(t, set, 1)
	set.Status = appsv1.StatefulSetStatus{CurrentRevision: rev.Name, UpdateRevision: rev.Name}
	claim := func(name string, refs ...metav1.OwnerReference) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", OwnerReferences: refs}}
	}
	web1 := ownedPod(set, 1, rev.Name, "ready")
	f := newFixture(t, set, rev, ownedPod(set, 0, rev.Name, "ready"), web1,
		claim("data-web-0"), claim("data-web-1", *metav1.NewControllerRef(set, setKind)))
	f.sync(t)
	updates := map[string][]metav1.OwnerReference{}
	for _, a := range f.actions("update", "persistentvolumeclaims") {
		c := a.(ktesting.UpdateAction).GetObject().(*corev1.PersistentVolumeClaim)
		updates[c.Name] = c.OwnerReferences
	}
	// In range: the set owns it. Condemned: the pod does (and the set no longer).
	if refs := updates["data-web-0"]; len(refs) != 1 || refs[0].UID != set.UID || !*refs[0].Controller {
		t.Fatalf("data-web-0 owners %+v", refs)
	}
	if refs := updates["data-web-1"]; len(refs) != 1 || refs[0].UID != web1.UID || refs[0].Kind != "Pod" || !*refs[0].Controller {
		t.Fatalf("data-web-1 owners %+v", refs)
	}
	// The claim is handed over before the pod goes.
	var order []string
	for _, a := range f.client.Actions() {
		if r := a.GetResource().Resource; (a.GetVerb() == "update" || a.GetVerb() == "delete") && r != "statefulsets" {
			order = append(order, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	if !slices.Equal(order, []string{"update persistentvolumeclaims", "update persistentvolumeclaims", "delete pods"}) {
		t.Fatalf("order %v", order)
	}
	if dels := f.actions("delete", "pods"); len(dels) != 1 || dels[0].(ktesting.DeleteAction).GetName() != "web-1" {
		t.Fatalf("deletions %v", dels)
	}
}

func TestSyncStaleClaimWaits(t *testing.T) {
	set := newSet(1, withClaims, withRetention(appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType))
	// data-web-0 still belongs to a previous web-0, being garbage collected.
	stale := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-web-0", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web-0", UID: "old-web-0", Controller: ptr.To(true)}}}}
	f := newFixture(t, set, stale)
	f.sync(t)
	if n := len(f.actions("create", "pods")); n != 0 {
		t.Fatalf("%d pods created on a stale claim", n)
	}
}

func TestSyncFailedPodRecreated(t *testing.T) {
	set := newSet(1)
	rev := revisionOfSet(t, set, 1)
	set.Status = appsv1.StatefulSetStatus{CurrentRevision: rev.Name, UpdateRevision: rev.Name}
	f := newFixture(t, set, rev, ownedPod(set, 0, rev.Name, "failed"))
	f.sync(t)
	if dels := f.actions("delete", "pods"); len(dels) != 1 || dels[0].(ktesting.DeleteAction).GetName() != "web-0" {
		t.Fatalf("deletions %v", dels)
	}
	f.resync(t)
	f.sync(t)
	if c := f.actions("create", "pods"); len(c) != 1 || c[0].(ktesting.CreateAction).GetObject().(*corev1.Pod).Name != "web-0" {
		t.Fatalf("creations %v", c)
	}
}

func TestSyncClaimsPods(t *testing.T) {
	set := newSet(2)
	rev := revisionOfSet(t, set, 1)
	set.Status = appsv1.StatefulSetStatus{CurrentRevision: rev.Name, UpdateRevision: rev.Name}
	orphan := pod(0, rev.Name, "ready")
	relabelled := ownedPod(set, 1, rev.Name, "ready")
	relabelled.Labels["app"] = "debug"
	strange := pod(0, rev.Name, "ready")
	strange.Name = "other-0" // matches the selector, but not one of web's names
	f := newFixture(t, set, rev, orphan, relabelled, strange)
	f.sync(t)
	patched := map[string]string{}
	for _, a := range f.actions("patch", "pods") {
		patched[a.(ktesting.PatchAction).GetName()] = string(a.(ktesting.PatchAction).GetPatch())
	}
	if !strings.Contains(patched["web-0"], `"uid":"web-uid"`) || !strings.Contains(patched["web-1"], `"$patch":"delete"`) || patched["other-0"] != "" {
		t.Fatalf("patches %v", patched)
	}
	// web-1 left the set: it is recreated... once web-0 (now adopted) is counted.
	if st := f.set(t).Status; st.Replicas != 1 {
		t.Fatalf("status %+v", st)
	}
}
