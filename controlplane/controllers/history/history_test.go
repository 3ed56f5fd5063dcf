package history

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

var setKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")

func owner() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "set-uid"}}
}

func raw(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }

func TestHashAndName(t *testing.T) {
	a := &appsv1.ControllerRevision{Data: raw(`{"a":1}`)}
	b := &appsv1.ControllerRevision{Data: raw(`{"a":2}`)}
	if Hash(a, nil) != Hash(a.DeepCopy(), nil) {
		t.Fatal("hash is not deterministic")
	}
	if Hash(a, nil) == Hash(b, nil) {
		t.Fatal("different data, same hash")
	}
	if Hash(a, ptr.To[int32](0)) == Hash(a, ptr.To[int32](1)) {
		t.Fatal("collision count does not change the hash")
	}
	if strings.ContainsAny(Hash(a, nil), "aeiou") {
		t.Fatalf("hash %q is not safe-encoded", Hash(a, nil))
	}
	if n := Name(strings.Repeat("x", 300), "h"); len(n) != maxPrefix+2 {
		t.Fatalf("long name %d chars", len(n))
	}
	r := New(owner(), setKind, map[string]string{"app": "web"}, raw(`{"a":1}`), 3, ptr.To[int32](0))
	h := Hash(r, ptr.To[int32](0))
	if r.Name != "web-"+h || r.Labels[HashLabel] != h || r.Labels["app"] != "web" || r.Revision != 3 || r.Namespace != "default" {
		t.Fatalf("revision %+v", r.ObjectMeta)
	}
	ref := metav1.GetControllerOf(r)
	if ref == nil || ref.UID != "set-uid" || ref.Kind != "StatefulSet" || !*ref.BlockOwnerDeletion {
		t.Fatalf("controller ref %+v", ref)
	}
}

func rev(name string, n int64, data string, age time.Duration) *appsv1.ControllerRevision {
	return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
		CreationTimestamp: metav1.NewTime(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(-age))}, Revision: n, Data: raw(`{"d":"` + data + `"}`)}
}

func names(revs []*appsv1.ControllerRevision) string {
	var s []string
	for _, r := range revs {
		s = append(s, r.Name)
	}
	return strings.Join(s, ",")
}

func TestEqualSortNext(t *testing.T) {
	a, b, c := rev("a", 2, "x", 0), rev("b", 1, "y", 0), rev("c", 2, "x", time.Hour)
	if !Equal(a, c) || Equal(a, b) || !Equal(nil, nil) || Equal(a, nil) {
		t.Fatal("Equal")
	}
	revs := []*appsv1.ControllerRevision{a, b, c}
	if got := names(FindEqual(revs, rev("n", 9, "x", 0))); got != "a,c" {
		t.Fatalf("FindEqual %s", got)
	}
	Sort(revs)
	// By number, then older first.
	if got := names(revs); got != "b,c,a" {
		t.Fatalf("sorted %s", got)
	}
	if Next(revs) != 3 || Next(nil) != 1 {
		t.Fatal("Next")
	}
	d, e := rev("e", 1, "", 0), rev("d", 1, "", 0)
	same := []*appsv1.ControllerRevision{d, e}
	Sort(same)
	if names(same) != "d,e" {
		t.Fatalf("name tie break %s", names(same))
	}
}

func TestToTruncate(t *testing.T) {
	var revs []*appsv1.ControllerRevision
	for i, n := range []string{"r1", "r2", "r3", "r4", "r5"} {
		revs = append(revs, rev(n, int64(i+1), n, 0))
	}
	for _, tc := range []struct {
		live  map[string]bool
		limit int32
		want  string
	}{
		{nil, 10, ""},
		{nil, 5, ""},
		{nil, 2, "r1,r2,r3"},
		{map[string]bool{"r1": true, "r5": true}, 1, "r2,r3"},
		{map[string]bool{"r1": true, "r5": true}, 0, "r2,r3,r4"},
		{nil, -1, ""},
	} {
		if got := names(ToTruncate(revs, tc.live, tc.limit)); got != tc.want {
			t.Errorf("live %v limit %d: %s, want %s", tc.live, tc.limit, got, tc.want)
		}
	}
}

func newHistory(objs ...runtime.Object) (*History, *fake.Clientset) {
	client := fake.NewSimpleClientset(objs...)
	f := informers.NewSharedInformerFactory(client, 0)
	for _, o := range objs {
		_ = f.Apps().V1().ControllerRevisions().Informer().GetIndexer().Add(o)
	}
	return NewHistory(client, f.Apps().V1().ControllerRevisions().Lister()), client
}

func TestClaim(t *testing.T) {
	set := owner()
	mine := rev("mine", 1, "a", 0)
	mine.Labels = map[string]string{"app": "web"}
	mine.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(set, setKind)}
	orphan := rev("orphan", 2, "b", 0)
	orphan.Labels = map[string]string{"app": "web"}
	orphan.UID = "orphan-uid"
	relabelled := rev("relabelled", 3, "c", 0)
	relabelled.Labels = map[string]string{"app": "db"}
	relabelled.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(set, setKind)}
	theirs := rev("theirs", 4, "d", 0)
	theirs.Labels = map[string]string{"app": "web"}
	theirs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "other", UID: "other", Controller: ptr.To(true)}}
	h, client := newHistory(mine, orphan, relabelled, theirs)
	got, err := h.Claim(context.Background(), set, setKind, labels.SelectorFromSet(labels.Set{"app": "web"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	Sort(got)
	if names(got) != "mine,orphan" {
		t.Fatalf("claimed %s", names(got))
	}
	patched := map[string]string{}
	for _, a := range client.Actions() {
		if p, ok := a.(ktesting.PatchAction); ok {
			patched[p.GetName()] = string(p.GetPatch())
		}
	}
	if len(patched) != 2 || !strings.Contains(patched["orphan"], `"uid":"set-uid"`) || !strings.Contains(patched["relabelled"], `"$patch":"delete"`) {
		t.Fatalf("patches %v", patched)
	}
}

func TestCreateCollision(t *testing.T) {
	set := owner()
	cc := ptr.To[int32](0)
	want := New(set, setKind, nil, raw(`{"new":1}`), 2, cc)
	// Another revision with different data already holds the name.
	squatter := want.DeepCopy()
	squatter.Data = raw(`{"old":1}`)
	h, _ := newHistory(squatter)
	got, err := h.Create(context.Background(), set, want, cc)
	if err != nil {
		t.Fatal(err)
	}
	if *cc != 1 || got.Name == squatter.Name || got.Name != Name("web", Hash(want, ptr.To[int32](1))) || got.Labels[HashLabel] != Hash(want, ptr.To[int32](1)) {
		t.Fatalf("created %s (count %d)", got.Name, *cc)
	}
	// The same data under the name is the revision itself: no new one, no count change.
	again, err := h.Create(context.Background(), set, want, cc)
	if err != nil || again.Name != got.Name || *cc != 1 {
		t.Fatalf("recreate: %v %v %d", again, err, *cc)
	}
}

func TestUpdateRevisionAndDelete(t *testing.T) {
	r := rev("r", 1, "a", 0)
	r.UID = types.UID("r-uid")
	h, client := newHistory(r)
	got, err := h.UpdateRevision(context.Background(), r, 5)
	if err != nil || got.Revision != 5 {
		t.Fatalf("update: %v %v", got, err)
	}
	if r.Revision != 1 {
		t.Fatal("input mutated")
	}
	if err := h.Delete(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if err := h.Delete(context.Background(), r); err != nil {
		t.Fatalf("deleting a gone revision: %v", err)
	}
	if _, err := client.AppsV1().ControllerRevisions("default").Get(context.Background(), "r", metav1.GetOptions{}); err == nil {
		t.Fatal("not deleted")
	}
}
