package namespace

import (
	"context"
	"io"
	"log/slog"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	ktesting "k8s.io/client-go/testing"
)

// preferred serves ServerPreferredNamespacedResources from the fake's resource lists (the
// fake itself answers nil), as the real discovery client computes it.
type preferred struct{ *fakediscovery.FakeDiscovery }

func (p preferred) ServerPreferredNamespacedResources() ([]*metav1.APIResourceList, error) {
	return discovery.ServerPreferredNamespacedResources(p.FakeDiscovery)
}

var resources = []*metav1.APIResourceList{
	{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: []string{"create", "delete", "deletecollection", "get", "list", "watch"}},
		{Name: "pods/status", Namespaced: true, Kind: "Pod", Verbs: []string{"get", "update"}},
		{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"delete", "get", "list"}},
		{Name: "bindings", Namespaced: true, Kind: "Binding", Verbs: []string{"create"}},
		{Name: "events", Namespaced: true, Kind: "Event", Verbs: []string{"delete", "deletecollection", "list"}},
		{Name: "namespaces", Namespaced: false, Kind: "Namespace", Verbs: []string{"delete", "list"}},
		{Name: "nodes", Namespaced: false, Kind: "Node", Verbs: []string{"delete", "deletecollection", "list"}},
	}},
	{GroupVersion: "events.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "events", Namespaced: true, Kind: "Event", Verbs: []string{"delete", "deletecollection", "list"}},
	}},
}

type fixture struct {
	c      *Controller
	client *fake.Clientset
	md     *metadatafake.FakeMetadataClient
}

// newFixture seeds the clientset with namespaces and the metadata client with content.
func newFixture(t *testing.T, namespaces []*corev1.Namespace, content ...*metav1.PartialObjectMetadata) *fixture {
	t.Helper()
	var objs []runtime.Object
	for _, n := range namespaces {
		objs = append(objs, n)
	}
	client := fake.NewSimpleClientset(objs...)
	client.Resources = resources
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var mdObjs []runtime.Object
	for _, o := range content {
		mdObjs = append(mdObjs, o)
	}
	md := metadatafake.NewSimpleMetadataClient(scheme, mdObjs...)
	// The tracker has no deletecollection: remove what the API server would remove at once
	// (objects without finalizers that are not already terminating).
	md.PrependReactor("delete-collection", "*", func(a ktesting.Action) (bool, runtime.Object, error) {
		list, err := md.Tracker().List(a.GetResource(), schema.GroupVersionKind{Group: "fake-metadata-client-group", Version: "v1"}, a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return true, nil, err
		}
		for _, it := range items {
			m, _ := meta.Accessor(it)
			if len(m.GetFinalizers()) == 0 && m.GetDeletionTimestamp() == nil {
				if err := md.Tracker().Delete(a.GetResource(), a.GetNamespace(), m.GetName()); err != nil {
					return true, nil, err
				}
			}
		}
		return true, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, md, factory.Core().V1().Namespaces(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	c.discovery = preferred{client.Discovery().(*fakediscovery.FakeDiscovery)}
	for _, n := range namespaces {
		_ = factory.Core().V1().Namespaces().Informer().GetIndexer().Add(n)
	}
	return &fixture{c: c, client: client, md: md}
}

func (f *fixture) sync(t *testing.T, name string) {
	t.Helper()
	if err := f.c.sync(context.Background(), name); err != nil {
		t.Fatal(err)
	}
}

// nsActions are the clientset's writes on namespaces ("create finalize", "delete").
// nsActions are the writes to namespaces but status updates (the deletion conditions).
func (f *fixture) nsActions() []ktesting.Action {
	var out []ktesting.Action
	for _, a := range f.client.Actions() {
		if a.GetResource().Resource == "namespaces" && a.GetSubresource() != "status" {
			out = append(out, a)
		}
	}
	return out
}

// conditions are the deletion conditions last written, by type.
func (f *fixture) conditions() map[corev1.NamespaceConditionType]corev1.NamespaceCondition {
	out := map[corev1.NamespaceConditionType]corev1.NamespaceCondition{}
	for _, a := range f.client.Actions() {
		if u, ok := a.(ktesting.UpdateAction); ok && a.GetSubresource() == "status" {
			for _, c := range u.GetObject().(*corev1.Namespace).Status.Conditions {
				out[c.Type] = c
			}
		}
	}
	return out
}

func (f *fixture) mdActions(verb string) []string {
	var out []string
	for _, a := range f.md.Actions() {
		if a.GetVerb() == verb {
			s := a.GetResource().Resource + " " + a.GetNamespace()
			if d, ok := a.(ktesting.DeleteAction); ok {
				s += "/" + d.GetName()
			}
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

func (f *fixture) remaining(t *testing.T, resource, ns string) int {
	t.Helper()
	list, err := f.md.Resource(schema.GroupVersionResource{Version: "v1", Resource: resource}).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

func terminating(name string, finalizers ...corev1.FinalizerName) *corev1.Namespace {
	ts := metav1.Now()
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid-" + "ns", DeletionTimestamp: &ts},
		Spec: corev1.NamespaceSpec{Finalizers: finalizers}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
}

func active(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid-" + "ns"},
		Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
}

type objOpt func(*metav1.PartialObjectMetadata)

func object(kind, ns, name string, opts ...objOpt) *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	for _, f := range opts {
		f(o)
	}
	return o
}

func gracefullyDeleting(o *metav1.PartialObjectMetadata) {
	ts := metav1.Now()
	o.DeletionTimestamp = &ts
}

func TestSyncTerminatingNamespaceDeletesContentThenFinalizesAndDeletes(t *testing.T) {
	f := newFixture(t, []*corev1.Namespace{terminating("doomed", corev1.FinalizerKubernetes)},
		object("Pod", "doomed", "p1"), object("Pod", "doomed", "p2"), object("Pod", "other", "survivor"))
	f.sync(t, "doomed")

	if got := f.mdActions("delete-collection"); len(got) != 2 || got[0] != "events doomed" || got[1] != "pods doomed" {
		t.Fatalf("deletecollection %v, want events and pods in doomed (events once)", got)
	}
	if got := f.mdActions("list"); len(got) != 3 || got[0] != "configmaps doomed" || got[1] != "events doomed" || got[2] != "pods doomed" {
		t.Fatalf("lists %v, want configmaps, events and pods in doomed only", got)
	}
	if f.remaining(t, "pods", "doomed") != 0 || f.remaining(t, "pods", "other") != 1 {
		t.Fatal("wrong pods deleted")
	}
	acts := f.nsActions()
	if len(acts) != 2 {
		t.Fatalf("namespace actions %v, want finalize then delete", acts)
	}
	fin := acts[0]
	if fin.GetSubresource() != "finalize" || (fin.GetVerb() != "create" && fin.GetVerb() != "update") {
		t.Fatalf("first action %s %s, want the finalize subresource", fin.GetVerb(), fin.GetSubresource())
	}
	ns := fin.(interface{ GetObject() runtime.Object }).GetObject().(*corev1.Namespace)
	if ns.Name != "doomed" || len(ns.Spec.Finalizers) != 0 {
		t.Fatalf("finalized %s with finalizers %v, want none", ns.Name, ns.Spec.Finalizers)
	}
	del, ok := acts[1].(ktesting.DeleteAction)
	if !ok || del.GetName() != "doomed" {
		t.Fatalf("second action %v, want delete doomed", acts[1])
	}
	if pre := del.GetDeleteOptions().Preconditions; pre == nil || pre.UID == nil || *pre.UID != "uid-ns" {
		t.Fatalf("delete without UID precondition: %+v", pre)
	}
}

func TestSyncWaitsForContent(t *testing.T) {
	f := newFixture(t, []*corev1.Namespace{terminating("doomed", corev1.FinalizerKubernetes)},
		object("Pod", "doomed", "graceful", gracefullyDeleting, func(o *metav1.PartialObjectMetadata) { o.Finalizers = []string{"e2e.example.com/f"} }),
		object("ConfigMap", "doomed", "cm"))
	f.sync(t, "doomed")
	if acts := f.nsActions(); len(acts) != 0 {
		t.Fatalf("namespace finalized with content left: %v", acts)
	}
	// Pods go first: while one is terminating, nothing else is deleted, and the namespace
	// says why, as upstream's ordered deletion.
	if got := f.mdActions("delete"); len(got) != 0 {
		t.Fatalf("deletes %v while a pod is still terminating, want none", got)
	}
	conds := f.conditions()
	for typ, want := range map[corev1.NamespaceConditionType]string{
		corev1.NamespaceDeletionContentFailure:   "True/ContentDeletionFailed/Failed to delete all resource types, 1 remaining: unexpected items still remain in namespace: doomed for gvr: /v1, Resource=pods",
		corev1.NamespaceContentRemaining:         "True/SomeResourcesRemain/Some resources are remaining: pods has 1 resource instances",
		corev1.NamespaceFinalizersRemaining:      "True/SomeFinalizersRemain/Some content in the namespace has finalizers remaining: e2e.example.com/f in 1 resource instances",
		corev1.NamespaceDeletionDiscoveryFailure: "False/ResourcesDiscovered/",
	} {
		c := conds[typ]
		if got := string(c.Status) + "/" + c.Reason + "/" + c.Message; got != want {
			t.Errorf("%s: %q, want %q", typ, got, want)
		}
	}
	// The pod finishes terminating: the config map, which has no deletecollection, is
	// deleted one by one (counted as remaining in that pass, as upstream), and the sync after
	// finalizes.
	if err := f.md.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "doomed", "graceful"); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	f.sync(t, "doomed")
	if got := f.mdActions("delete"); len(got) != 1 || got[0] != "configmaps doomed/cm" {
		t.Fatalf("deletes %v, want configmaps doomed/cm", got)
	}
	f.client.ClearActions()
	f.sync(t, "doomed")
	if acts := f.nsActions(); len(acts) != 2 || acts[0].GetSubresource() != "finalize" || acts[1].GetVerb() != "delete" {
		t.Fatalf("actions %v, want finalize and delete", acts)
	}
	if c := f.conditions()[corev1.NamespaceContentRemaining]; c.Status != corev1.ConditionFalse || c.Reason != "ContentRemoved" {
		t.Errorf("after the content went: %+v", c)
	}
}

func TestSyncLeavesNamespacesAlone(t *testing.T) {
	for _, tc := range []struct {
		name string
		ns   *corev1.Namespace
	}{
		{"active", active("live")},
		{"terminating with another finalizer", terminating("live", "example.com/keep")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, []*corev1.Namespace{tc.ns}, object("Pod", "live", "p"))
			f.sync(t, "live")
			if acts := f.nsActions(); len(acts) != 0 {
				t.Fatalf("namespace actions %v", acts)
			}
			if acts := f.md.Actions(); len(acts) != 0 {
				t.Fatalf("content actions %v", acts)
			}
			if f.remaining(t, "pods", "live") != 1 {
				t.Fatal("content deleted")
			}
		})
	}
}

func TestSyncFinalizesButKeepsOtherFinalizers(t *testing.T) {
	f := newFixture(t, []*corev1.Namespace{terminating("doomed", corev1.FinalizerKubernetes, "example.com/keep")})
	f.sync(t, "doomed")
	acts := f.nsActions()
	if len(acts) != 1 || acts[0].GetSubresource() != "finalize" {
		t.Fatalf("actions %v, want only finalize (another finalizer is pending)", acts)
	}
	ns := acts[0].(interface{ GetObject() runtime.Object }).GetObject().(*corev1.Namespace)
	if len(ns.Spec.Finalizers) != 1 || ns.Spec.Finalizers[0] != "example.com/keep" {
		t.Fatalf("finalizers %v", ns.Spec.Finalizers)
	}
}

func TestSyncAlreadyFinalizedIsDeleted(t *testing.T) {
	f := newFixture(t, []*corev1.Namespace{terminating("doomed")})
	f.sync(t, "doomed")
	acts := f.nsActions()
	if len(acts) != 1 || acts[0].GetVerb() != "delete" {
		t.Fatalf("actions %v, want delete", acts)
	}
	if acts := f.md.Actions(); len(acts) != 0 {
		t.Fatalf("content actions %v for a finalized namespace", acts)
	}
}

func TestSyncMissingNamespace(t *testing.T) {
	f := newFixture(t, nil)
	f.sync(t, "gone")
	if len(f.client.Actions())+len(f.md.Actions()) != 0 {
		t.Fatal("actions for a missing namespace")
	}
}
