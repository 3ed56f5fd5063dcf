package garbagecollector

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

var (
	podsGVR        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	configmapsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	nodesGVR       = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	replicasetsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

var verbs = []string{"delete", "get", "list", "patch", "watch"}

var resources = []*metav1.APIResourceList{
	{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: verbs},
		{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: verbs},
		{Name: "nodes", Namespaced: false, Kind: "Node", Verbs: verbs},
	}},
	{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
		{Name: "replicasets", Namespaced: true, Kind: "ReplicaSet", Verbs: verbs},
		{Name: "deployments", Namespaced: true, Kind: "Deployment", Verbs: verbs},
	}},
}

type fixture struct {
	c  *Controller
	md *metadatafake.FakeMetadataClient
}

// newFixture stores objs in the fake API (metadata only); none is in the graph until observed.
func newFixture(t *testing.T, objs ...*metav1.PartialObjectMetadata) *fixture {
	t.Helper()
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var ros []runtime.Object
	for _, o := range objs {
		ros = append(ros, o)
	}
	md := metadatafake.NewSimpleMetadataClient(scheme, ros...)
	disc := &fakediscovery.FakeDiscovery{Fake: &ktesting.Fake{Resources: resources}}
	return &fixture{c: New(md, disc, nil, slog.New(slog.NewTextHandler(io.Discard, nil))), md: md}
}

func gvrOf(o *metav1.PartialObjectMetadata) schema.GroupVersionResource {
	switch o.Kind {
	case "Pod":
		return podsGVR
	case "ConfigMap":
		return configmapsGVR
	case "Node":
		return nodesGVR
	case "ReplicaSet":
		return replicasetsGVR
	case "Deployment":
		return deploymentsGVR
	}
	panic(o.Kind)
}

// observe feeds objects to the graph as informer add/update events.
func (f *fixture) observe(objs ...*metav1.PartialObjectMetadata) {
	for _, o := range objs {
		f.c.observe(gvrOf(o), o, false)
	}
}

func (f *fixture) sync(t *testing.T, o *metav1.PartialObjectMetadata) {
	t.Helper()
	if err := f.c.sync(context.Background(), string(o.UID)); err != nil {
		t.Fatalf("sync %s: %v", o.Name, err)
	}
}

func (f *fixture) writes() []ktesting.Action {
	var out []ktesting.Action
	for _, a := range f.md.Actions() {
		if a.GetVerb() == "delete" || a.GetVerb() == "patch" {
			out = append(out, a)
		}
	}
	return out
}

type patchBody struct {
	Metadata struct {
		UID             types.UID                `json:"uid"`
		OwnerReferences *[]metav1.OwnerReference `json:"ownerReferences"`
		Finalizers      *[]string                `json:"finalizers"`
	} `json:"metadata"`
	raw map[string]map[string]json.RawMessage
}

func decodePatch(t *testing.T, a ktesting.Action) patchBody {
	t.Helper()
	p := a.(ktesting.PatchAction)
	if p.GetPatchType() != types.MergePatchType {
		t.Fatalf("patch type %s", p.GetPatchType())
	}
	var b patchBody
	if err := json.Unmarshal(p.GetPatch(), &b); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(p.GetPatch(), &b.raw); err != nil {
		t.Fatal(err)
	}
	return b
}

func ref(owner *metav1.PartialObjectMetadata, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(block)}
}

func obj(apiVersion, kind, ns, name string, owners ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(kind + "-" + name), OwnerReferences: owners}}
}

func rs(name string) *metav1.PartialObjectMetadata {
	return obj("apps/v1", "ReplicaSet", "default", name)
}
func pod(name string, owners ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return obj("v1", "Pod", "default", name, owners...)
}

func deleting(o *metav1.PartialObjectMetadata, finalizers ...string) *metav1.PartialObjectMetadata {
	o = o.DeepCopy()
	ts := metav1.Now()
	o.DeletionTimestamp = &ts
	o.Finalizers = finalizers
	return o
}

func assertDelete(t *testing.T, a ktesting.Action, o *metav1.PartialObjectMetadata, policy metav1.DeletionPropagation) {
	t.Helper()
	d, ok := a.(ktesting.DeleteAction)
	if !ok || a.GetResource() != gvrOf(o) || a.GetNamespace() != o.Namespace || d.GetName() != o.Name {
		t.Fatalf("action %v, want delete of %s %s/%s", a, gvrOf(o).Resource, o.Namespace, o.Name)
	}
	opts := d.GetDeleteOptions()
	if opts.PropagationPolicy == nil || *opts.PropagationPolicy != policy {
		t.Errorf("propagation %v, want %s", opts.PropagationPolicy, policy)
	}
	if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != o.UID {
		t.Errorf("preconditions %+v, want UID %s", opts.Preconditions, o.UID)
	}
}

func TestDeletesDependentOfGoneOwner(t *testing.T) {
	owner := rs("web-1")
	dep := pod("web-1-abc", ref(owner, true))
	dep.ResourceVersion = "9"
	f := newFixture(t, dep) // the owner is not in the API any more
	f.observe(dep)
	f.sync(t, dep)
	w := f.writes()
	if len(w) != 1 {
		t.Fatalf("writes %v, want one delete", w)
	}
	assertDelete(t, w[0], dep, metav1.DeletePropagationBackground)
	// The delete is conditional on the live object not having changed since it was read.
	if rv := w[0].(ktesting.DeleteAction).GetDeleteOptions().Preconditions.ResourceVersion; rv == nil || *rv != "9" {
		t.Errorf("delete precondition resourceVersion %v, want the live object's 9", rv)
	}
	// The owner was looked up in the API, by kind, in the dependent's namespace.
	var got bool
	for _, a := range f.md.Actions() {
		if a.GetVerb() == "get" && a.GetResource() == replicasetsGVR && a.GetNamespace() == "default" && a.(ktesting.GetAction).GetName() == "web-1" {
			got = true
		}
	}
	if !got {
		t.Fatalf("owner not looked up: %v", f.md.Actions())
	}
}

func TestDeletesDependentOfRecreatedOwner(t *testing.T) {
	owner := rs("web-1")
	recreated := owner.DeepCopy()
	recreated.UID = "another-uid"
	dep := pod("web-1-abc", ref(owner, true))
	f := newFixture(t, dep, recreated)
	f.observe(dep)
	f.sync(t, dep)
	if w := f.writes(); len(w) != 1 {
		t.Fatalf("writes %v, want the dependent deleted: its owner's UID is gone", w)
	} else {
		assertDelete(t, w[0], dep, metav1.DeletePropagationBackground)
	}
}

func TestDeletesDependentOfUnknownKind(t *testing.T) {
	dep := pod("p", metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "w", UID: "w-uid"})
	f := newFixture(t, dep)
	f.observe(dep)
	f.sync(t, dep)
	if w := f.writes(); len(w) != 1 {
		t.Fatalf("writes %v, want delete", w)
	}
}

func TestKeepsDependentOfLiveOwner(t *testing.T) {
	for _, tc := range []struct {
		name    string
		inGraph bool
	}{
		{"owner in the graph", true},
		{"owner only in the API", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner := rs("web-1")
			dep := pod("web-1-abc", ref(owner, true))
			f := newFixture(t, owner, dep)
			if tc.inGraph {
				f.observe(owner)
			}
			f.observe(dep)
			f.sync(t, dep)
			if w := f.writes(); len(w) != 0 {
				t.Fatalf("writes %v for a dependent with a live owner", w)
			}
			if tc.inGraph && len(f.md.Actions()) != 0 {
				t.Fatalf("API calls %v although the owner is in the graph", f.md.Actions())
			}
		})
	}
}

func TestClusterScopedOwnerIsLookedUpWithoutNamespace(t *testing.T) {
	owner := obj("v1", "Node", "", "n1")
	dep := obj("v1", "ConfigMap", "default", "cm", ref(owner, false))
	f := newFixture(t, owner, dep)
	f.observe(dep)
	f.sync(t, dep)
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("writes %v: the cluster-scoped owner exists", w)
	}
}

func TestDropsOnlyDanglingReference(t *testing.T) {
	alive, gone := rs("alive"), rs("gone")
	dep := pod("p", ref(alive, true), ref(gone, true))
	dep.OwnerReferences[1].Controller = nil
	f := newFixture(t, alive, dep)
	f.observe(alive, dep)
	f.sync(t, dep)
	w := f.writes()
	if len(w) != 1 || w[0].GetVerb() != "patch" || w[0].(ktesting.PatchAction).GetName() != "p" || w[0].GetNamespace() != "default" {
		t.Fatalf("writes %v, want one patch of p", w)
	}
	b := decodePatch(t, w[0])
	if b.Metadata.UID != dep.UID {
		t.Errorf("patch not guarded by uid: %s", b.Metadata.UID)
	}
	if b.Metadata.OwnerReferences == nil || len(*b.Metadata.OwnerReferences) != 1 || (*b.Metadata.OwnerReferences)[0].UID != alive.UID {
		t.Fatalf("ownerReferences %v, want only the live owner", b.Metadata.OwnerReferences)
	}
	stored, err := f.md.Resource(podsGVR).Namespace("default").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil || len(stored.OwnerReferences) != 1 || stored.OwnerReferences[0].UID != alive.UID {
		t.Fatalf("stored owners %v %v", stored, err)
	}
}

func TestOrphanFinalizer(t *testing.T) {
	owner := deleting(rs("web-1"), metav1.FinalizerOrphanDependents, "example.com/other")
	other := rs("other")
	onlyChild := pod("only", ref(owner, true))
	shared := pod("shared", ref(owner, true), ref(other, false))
	f := newFixture(t, owner, other, onlyChild, shared)
	f.observe(other, onlyChild, shared, owner)

	// A dependent of an owner being orphan-deleted is left alone by attemptToDelete.
	f.sync(t, onlyChild)
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("dependent of an orphaning owner touched: %v", w)
	}

	f.sync(t, owner)
	w := f.writes()
	if len(w) != 3 {
		t.Fatalf("writes %v, want two dependent patches then the owner's", w)
	}
	deps := map[string]patchBody{}
	for _, a := range w[:2] {
		deps[a.(ktesting.PatchAction).GetName()] = decodePatch(t, a)
	}
	if b, ok := deps["only"]; !ok || string(b.raw["metadata"]["ownerReferences"]) != "null" {
		t.Fatalf("only child patch %s, want ownerReferences null", b.raw["metadata"]["ownerReferences"])
	}
	if b, ok := deps["shared"]; !ok || b.Metadata.OwnerReferences == nil || len(*b.Metadata.OwnerReferences) != 1 ||
		(*b.Metadata.OwnerReferences)[0].UID != other.UID {
		t.Fatalf("shared child patch %+v, want only the other owner", deps["shared"].Metadata.OwnerReferences)
	}
	last := w[2].(ktesting.PatchAction)
	if last.GetName() != "web-1" || last.GetResource() != replicasetsGVR {
		t.Fatalf("last write %v, want the owner", last)
	}
	if b := decodePatch(t, last); b.Metadata.Finalizers == nil || len(*b.Metadata.Finalizers) != 1 || (*b.Metadata.Finalizers)[0] != "example.com/other" {
		t.Fatalf("owner finalizers %v, want only example.com/other", b.Metadata.Finalizers)
	}
	stored, _ := f.md.Resource(podsGVR).Namespace("default").Get(context.Background(), "only", metav1.GetOptions{})
	if len(stored.OwnerReferences) != 0 {
		t.Fatalf("stored only child still owned: %v", stored.OwnerReferences)
	}
}

// TestOrphanSeenLateIsKept is the race of an orphaning owner: the collector dropped the
// owner's reference from its dependent and let the owner go, and the owner's deletion reaches
// the graph before the dependent's patch does. The dependent, still owned by a gone owner in
// the graph, is read again and kept.
func TestOrphanSeenLateIsKept(t *testing.T) {
	owner := obj("apps/v1", "Deployment", "default", "web") // gone from the API
	staleRS := obj("apps/v1", "ReplicaSet", "default", "web-1", ref(owner, true))
	orphan := staleRS.DeepCopy()
	orphan.OwnerReferences = nil // what the API holds after the orphaning patch
	orphan.ResourceVersion = "7"
	f := newFixture(t, orphan)
	f.observe(staleRS)
	f.sync(t, staleRS)
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("an orphaned dependent the graph saw late was written: %v", w)
	}
}

func TestOrphanFinalizerLastFinalizerPatchesNull(t *testing.T) {
	owner := deleting(rs("web-1"), metav1.FinalizerOrphanDependents)
	f := newFixture(t, owner)
	f.observe(owner)
	f.sync(t, owner)
	w := f.writes()
	if len(w) != 1 || string(decodePatch(t, w[0]).raw["metadata"]["finalizers"]) != "null" {
		t.Fatalf("writes %v, want the finalizers cleared", w)
	}
}

func TestForegroundDeletion(t *testing.T) {
	owner := deleting(rs("web-1"), metav1.FinalizerDeleteDependents)
	blocking := pod("blocking", ref(owner, true))
	nonBlocking := pod("non-blocking", ref(owner, false))
	f := newFixture(t, owner, blocking, nonBlocking)
	f.observe(blocking, nonBlocking, owner)

	// The owner waits for its blocking dependent.
	f.sync(t, owner)
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("owner finalized with a blocking dependent left: %v", w)
	}
	// Dependents are deleted in the foreground, too.
	for _, d := range []*metav1.PartialObjectMetadata{blocking, nonBlocking} {
		f.md.ClearActions()
		f.sync(t, d)
		w := f.writes()
		if len(w) != 1 {
			t.Fatalf("writes %v, want %s deleted", w, d.Name)
		}
		assertDelete(t, w[0], d, metav1.DeletePropagationForeground)
	}
	// The non-blocking one alone does not hold the owner: once the blocking one is gone...
	f.md.ClearActions()
	f.c.observe(podsGVR, blocking, true)
	f.sync(t, owner)
	w := f.writes()
	if len(w) != 1 || w[0].(ktesting.PatchAction).GetName() != "web-1" {
		t.Fatalf("writes %v, want the owner's finalizer removed", w)
	}
	if b := decodePatch(t, w[0]); string(b.raw["metadata"]["finalizers"]) != "null" {
		t.Fatalf("finalizers %s, want null", b.raw["metadata"]["finalizers"])
	}
}

func TestForegroundOwnerNotStuckOnDependentWithAnotherLiveOwner(t *testing.T) {
	owner := deleting(rs("web-1"), metav1.FinalizerDeleteDependents)
	other := rs("other")
	dep := pod("shared", ref(owner, true), ref(other, false))
	dep.OwnerReferences[1].Controller = nil
	f := newFixture(t, owner, other, dep)
	f.observe(other, dep, owner)

	// The dependent survives (another owner is alive) but must stop blocking the owner.
	f.sync(t, dep)
	w := f.writes()
	if len(w) != 1 || w[0].GetVerb() != "patch" {
		t.Fatalf("writes %v, want the reference to the foreground owner dropped", w)
	}
	b := decodePatch(t, w[0])
	if b.Metadata.OwnerReferences == nil || len(*b.Metadata.OwnerReferences) != 1 || (*b.Metadata.OwnerReferences)[0].UID != other.UID {
		t.Fatalf("ownerReferences %v, want only the live owner", b.Metadata.OwnerReferences)
	}
	// The informer delivers the patched dependent; the owner can go.
	patched, err := f.md.Resource(podsGVR).Namespace("default").Get(context.Background(), "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patched.APIVersion, patched.Kind = "v1", "Pod"
	f.observe(patched)
	f.md.ClearActions()
	f.sync(t, owner)
	if w := f.writes(); len(w) != 1 || w[0].(ktesting.PatchAction).GetName() != "web-1" {
		t.Fatalf("writes %v, want the owner's finalizer removed", w)
	}
}

func TestGraph(t *testing.T) {
	g := newGraph()
	a := &object{uid: "a"}
	b := &object{uid: "b"}
	c := &object{uid: "c", owners: []metav1.OwnerReference{{UID: "a", BlockOwnerDeletion: ptr.To(true)}, {UID: "b"}}}
	for _, o := range []*object{a, b, c} {
		g.upsert(o)
	}
	if d := g.dependentsOf("a"); len(d) != 1 || d[0].uid != "c" {
		t.Fatalf("dependents of a: %v", d)
	}
	if g.blockingDependents("a") != 1 || g.blockingDependents("b") != 0 {
		t.Fatalf("blocking a=%d b=%d", g.blockingDependents("a"), g.blockingDependents("b"))
	}
	// c drops owner a.
	g.upsert(&object{uid: "c", owners: []metav1.OwnerReference{{UID: "b"}}})
	if len(g.dependentsOf("a")) != 0 || len(g.dependentsOf("b")) != 1 {
		t.Fatalf("after re-owning: a=%v b=%v", g.dependentsOf("a"), g.dependentsOf("b"))
	}
	// Removing the owner keeps its dependents (pointing at a missing owner).
	g.remove("b")
	if _, ok := g.get("b"); ok {
		t.Fatal("b still in the graph")
	}
	if d := g.dependentsOf("b"); len(d) != 1 {
		t.Fatalf("dependents of removed b: %v", d)
	}
	g.remove("c")
	if len(g.dependentsOf("b")) != 0 {
		t.Fatal("removed dependent still listed")
	}
}

func TestSyncUnknownUID(t *testing.T) {
	f := newFixture(t)
	if err := f.c.sync(context.Background(), "nope"); err != nil {
		t.Fatal(err)
	}
	if len(f.md.Actions()) != 0 {
		t.Fatal("actions for an unknown uid")
	}
}

// preferred serves ServerPreferredResources from the fake's lists (the fake answers nil).
type preferred struct{ *fakediscovery.FakeDiscovery }

func (p preferred) ServerPreferredResources() ([]*metav1.APIResourceList, error) {
	return discovery.ServerPreferredResources(p.FakeDiscovery)
}

// expectOrphanCollected waits for the pod "orphan" (its owner gone) to be deleted and checks
// that "kept" (its owner alive) is not.
func expectOrphanCollected(ctx context.Context, t *testing.T, md *metadatafake.FakeMetadataClient) {
	t.Helper()
	pods := md.Resource(podsGVR).Namespace("default")
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := pods.Get(ctx, "orphan", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan not collected: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := pods.Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Fatalf("pod with a live owner: %v", err)
	}
}

func TestRunWatchesCollectableResourcesAndCollects(t *testing.T) {
	lists := append([]*metav1.APIResourceList{}, resources...)
	lists[0] = lists[0].DeepCopy()
	lists[0].APIResources = append(lists[0].APIResources,
		metav1.APIResource{Name: "pods/status", Namespaced: true, Kind: "Pod", Verbs: []string{"get", "patch", "update"}},
		metav1.APIResource{Name: "events", Namespaced: true, Kind: "Event", Verbs: verbs},
		metav1.APIResource{Name: "bindings", Namespaced: true, Kind: "Binding", Verbs: []string{"create"}},
		metav1.APIResource{Name: "componentstatuses", Namespaced: false, Kind: "ComponentStatus", Verbs: []string{"get", "list"}})
	lists = append(lists, &metav1.APIResourceList{GroupVersion: "coordination.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "leases", Namespaced: true, Kind: "Lease", Verbs: verbs}}})

	owner := rs("alive")
	orphan := pod("orphan", ref(rs("gone"), true))
	kept := pod("kept", ref(owner, true))
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	md := metadatafake.NewSimpleMetadataClient(scheme, owner, orphan, kept)
	disc := preferred{&fakediscovery.FakeDiscovery{Fake: &ktesting.Fake{Resources: lists}}}
	c := New(md, disc, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	defer func() { cancel(); <-done }()

	expectOrphanCollected(ctx, t, md)
	c.mu.Lock()
	defer c.mu.Unlock()
	want := sets.New(podsGVR, configmapsGVR, nodesGVR, replicasetsGVR, deploymentsGVR)
	if !c.watched.Equal(want) {
		t.Fatalf("watched %v, want %v", c.watched.UnsortedList(), want.UnsortedList())
	}
}

// Upstream's "should not be blocked by dependency circle": pod1 owns pod2 owns pod3 owns pod1,
// every reference blocking, and pod1 is deleted in the foreground. A dependent whose own
// dependent waits in the foreground stops blocking before it is deleted, so the circle opens.
func TestForegroundDeletionThroughACircle(t *testing.T) {
	p1, p2, p3 := pod("pod1"), pod("pod2"), pod("pod3")
	p1.OwnerReferences = []metav1.OwnerReference{ref(p3, true)}
	p2.OwnerReferences = []metav1.OwnerReference{ref(p1, true)}
	p3.OwnerReferences = []metav1.OwnerReference{ref(p2, true)}
	d1 := deleting(p1, metav1.FinalizerDeleteDependents)
	d2 := deleting(p2, metav1.FinalizerDeleteDependents)
	f := newFixture(t, d1, d2, p3)
	f.observe(d1, d2, p3)

	// pod3: its owner pod2 waits in the foreground, and its dependent pod1 does too.
	f.sync(t, p3)
	w := f.writes()
	if len(w) != 2 || w[0].GetVerb() != "patch" {
		t.Fatalf("writes %v, want pod3's references unblocked, then pod3 deleted", w)
	}
	b := decodePatch(t, w[0])
	if b.Metadata.OwnerReferences == nil || len(*b.Metadata.OwnerReferences) != 1 || *(*b.Metadata.OwnerReferences)[0].BlockOwnerDeletion {
		t.Fatalf("ownerReferences %v, want pod2's, not blocking", b.Metadata.OwnerReferences)
	}
	assertDelete(t, w[1], p3, metav1.DeletePropagationForeground)

	// A dependent of a foreground deletion with no waiting dependent keeps its references.
	lone := pod("lone", ref(d1, true))
	f2 := newFixture(t, d1, lone)
	f2.observe(d1, lone)
	f2.sync(t, lone)
	if w := f2.writes(); len(w) != 1 || w[0].GetVerb() != "delete" {
		t.Fatalf("writes %v, want only the foreground delete", w)
	}
}

// A resource another part already watches (a controller's typed informer) is watched through
// that informer: the collector opens no metadata watch of its own for it, and still collects
// what it sees there.
func TestRunWatchesThroughSharedInformers(t *testing.T) {
	owner := rs("alive")
	orphan := pod("orphan", ref(rs("gone"), true))
	kept := pod("kept", ref(owner, true))
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	md := metadatafake.NewSimpleMetadataClient(scheme, owner, orphan, kept)
	disc := preferred{&fakediscovery.FakeDiscovery{Fake: &ktesting.Fake{Resources: resources}}}

	typedPod := func(o *metav1.PartialObjectMetadata) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: *o.ObjectMeta.DeepCopy(), Spec: corev1.PodSpec{NodeName: "n1"}}
	}
	client := kubefake.NewClientset(typedPod(orphan), typedPod(kept))
	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer := factory.Core().V1().Pods().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())

	var asked []schema.GroupVersionKind
	var mu sync.Mutex
	shared := func(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind) cache.SharedIndexInformer {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, gvk)
		if gvr == podsGVR && gvk == corev1.SchemeGroupVersion.WithKind("Pod") {
			return podInformer
		}
		return nil
	}
	c := New(md, disc, shared, slog.New(slog.NewTextHandler(io.Discard, nil)))
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	defer func() { cancel(); <-done }()

	expectOrphanCollected(ctx, t, md)
	for _, a := range md.Actions() {
		if (a.GetVerb() == "list" || a.GetVerb() == "watch") && a.GetResource() == podsGVR {
			t.Fatalf("the collector opened its own %s of pods: %v", a.GetVerb(), a)
		}
	}
	if _, ok := c.graph.get(kept.UID); !ok {
		t.Fatal("a pod of the shared informer is not in the graph")
	}
	mu.Lock()
	defer mu.Unlock()
	want := sets.New(corev1.SchemeGroupVersion.WithKind("Pod"), corev1.SchemeGroupVersion.WithKind("ConfigMap"),
		corev1.SchemeGroupVersion.WithKind("Node"), appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), appsv1.SchemeGroupVersion.WithKind("Deployment"))
	if got := sets.New(asked...); !got.Equal(want) {
		t.Fatalf("asked for %v, want %v", got.UnsortedList(), want.UnsortedList())
	}
}
