package ownership

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func pod(name string, lbl map[string]string, controller types.UID, deleting bool) metav1.Object {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: lbl}}
	if controller != "" {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "x", UID: controller, Controller: ptr.To(true)}}
	}
	if deleting {
		now := metav1.Now()
		p.DeletionTimestamp = &now
	}
	return p
}

func TestClaim(t *testing.T) {
	owner := &metav1.ObjectMeta{Name: "rs", UID: "owner"}
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	web := map[string]string{"app": "web"}
	other := map[string]string{"app": "db"}
	objs := []metav1.Object{
		pod("mine", web, "owner", false),          // 0 owned
		pod("orphan", web, "", false),             // 1 adopted
		pod("relabelled", other, "owner", false),  // 2 released
		pod("theirs", web, "someone-else", false), // 3 left alone
		pod("orphan-deleting", web, "", true),     // 4 not adopted
		pod("orphan-nomatch", other, "", false),   // 5 not adopted
		pod("mine-deleting", web, "owner", true),  // 6 still owned
	}
	d := Claim(owner, sel, objs)
	if !slices.Equal(d.Owned, []int{0, 1, 6}) || !slices.Equal(d.Adopt, []int{1}) || !slices.Equal(d.Release, []int{2}) {
		t.Fatalf("decision %+v", d)
	}
	// An owner being deleted adopts and releases nothing.
	now := metav1.Now()
	dying := &metav1.ObjectMeta{Name: "rs", UID: "owner", DeletionTimestamp: &now}
	if d := Claim(dying, sel, objs); len(d.Adopt) != 0 || len(d.Release) != 0 || !slices.Equal(d.Owned, []int{0, 6}) {
		t.Fatalf("dying owner: %+v", d)
	}
	// An empty selector adopts nothing (it would take every orphan in the namespace).
	if d := Claim(owner, labels.Everything(), objs); len(d.Adopt) != 0 {
		t.Fatalf("empty selector adopted %v", d.Adopt)
	}
}

func TestPatches(t *testing.T) {
	owner := &metav1.ObjectMeta{Name: "rs", UID: "owner"}
	b, err := AdoptPatch(owner, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}, "uid-p")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Metadata struct {
			OwnerReferences []metav1.OwnerReference
			UID             types.UID
		}
	}
	if err := json.Unmarshal(b, &got); err != nil || got.Metadata.UID != "uid-p" || len(got.Metadata.OwnerReferences) != 1 ||
		got.Metadata.OwnerReferences[0].UID != "owner" || !*got.Metadata.OwnerReferences[0].Controller || !*got.Metadata.OwnerReferences[0].BlockOwnerDeletion {
		t.Fatalf("adopt patch %s (%v)", b, err)
	}
	if r := string(ReleasePatch(owner, "uid-p")); r != `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"owner"}],"uid":"uid-p"}}` {
		t.Fatalf("release patch %s", r)
	}
}

func TestApply(t *testing.T) {
	d := Decision{Owned: []int{0, 1, 2}, Adopt: []int{1, 2}, Release: []int{3}}
	gone := apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "x")
	var released []int
	owned, err := Apply(d, func(i int) error {
		if i == 2 {
			return gone // deleted meanwhile: not owned
		}
		return nil
	}, func(i int) error { released = append(released, i); return gone })
	if err != nil || !slices.Equal(owned, []int{0, 1}) || !slices.Equal(released, []int{3}) {
		t.Fatalf("owned %v released %v err %v", owned, released, err)
	}
	if _, err := Apply(d, func(int) error { return errors.New("etcdserver: timeout") }, nil); err == nil {
		t.Fatal("an adoption that failed for another reason was not an error")
	}
}
