package statefulset

import (
	"bytes"
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/controlplane/controllers/history"
)

func richSet() *appsv1.StatefulSet {
	s := newSet(2, withClaims)
	s.Spec.Template.Annotations = map[string]string{"note": "<&>"}
	s.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}
	s.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	s.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
	return s
}

// The data must be byte for byte what upstream's controller writes (the set encoded by the
// apps/v1 codec, spec.template taken out with "$patch":"replace"), so hashes, names and
// `kubectl rollout undo` agree with a real cluster's.
func TestPatchMatchesUpstreamEncoding(t *testing.T) {
	set := richSet()
	enc, err := runtime.Encode(scheme.Codecs.LegacyCodec(appsv1.SchemeGroupVersion), set)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(enc, &obj); err != nil {
		t.Fatal(err)
	}
	tmpl := obj["spec"].(map[string]any)["template"].(map[string]any)
	tmpl["$patch"] = "replace"
	want, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": tmpl}})
	got, err := Patch(set)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("patch\n%s\nwant\n%s", got, want)
	}
}

func TestApplyRevision(t *testing.T) {
	old := richSet()
	rev, err := NewRevision(old, 1, ptr.To[int32](0))
	if err != nil {
		t.Fatal(err)
	}
	cur := richSet()
	cur.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	cur.Spec.Template.Spec.Containers[0].Env = nil
	cur.Spec.Template.Labels["extra"] = "x"
	cur.Spec.Replicas = ptr.To[int32](7)
	got, err := ApplyRevision(cur, rev)
	if err != nil {
		t.Fatal(err)
	}
	// The whole template is replaced (no merge of labels or env); the rest of the spec stays.
	if got.Spec.Template.Spec.Containers[0].Image != "nginx:1" || len(got.Spec.Template.Spec.Containers[0].Env) != 1 ||
		got.Spec.Template.Labels["extra"] != "" || *got.Spec.Replicas != 7 {
		t.Fatalf("applied %+v", got.Spec)
	}
	if cur.Spec.Template.Spec.Containers[0].Image != "nginx:2" {
		t.Fatal("input mutated")
	}
	// kubectl rollout undo applies the data as a strategic merge patch to the set: the same.
	curJSON, _ := json.Marshal(cur)
	undone, err := strategicpatch.StrategicMergePatch(curJSON, rev.Data.Raw, &appsv1.StatefulSet{})
	if err != nil {
		t.Fatal(err)
	}
	var u appsv1.StatefulSet
	_ = json.Unmarshal(undone, &u)
	if u.Spec.Template.Spec.Containers[0].Image != "nginx:1" {
		t.Fatalf("undo gave %s", u.Spec.Template.Spec.Containers[0].Image)
	}
	if rev.Annotations == nil || rev.Labels["app"] != "web" {
		t.Fatalf("revision meta %+v", rev.ObjectMeta)
	}
}

func TestChooseUpdateRevision(t *testing.T) {
	a, b := newSet(1), newSet(1)
	b.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	ra, rb := must(NewRevision(a, 1, ptr.To[int32](0))), must(NewRevision(b, 2, ptr.To[int32](0)))
	sorted := []*appsv1.ControllerRevision{ra, rb}
	if step, r := chooseUpdateRevision(b, sorted, must(NewRevision(b, 3, ptr.To[int32](0)))); step != reuseLatest || r != rb {
		t.Fatalf("unchanged: %v %v", step, r)
	}
	if step, r := chooseUpdateRevision(a, sorted, must(NewRevision(a, 3, ptr.To[int32](0)))); step != renumber || r != ra {
		t.Fatalf("rollback: %v %v", step, r)
	}
	c := newSet(1)
	c.Spec.Template.Spec.Containers[0].Image = "nginx:3"
	if step, _ := chooseUpdateRevision(c, sorted, must(NewRevision(c, 3, ptr.To[int32](0)))); step != create {
		t.Fatalf("new template: %v", step)
	}
	// Latest data serialised differently (key order) but the same template: no new revision.
	odd := rb.DeepCopy()
	odd.Data.Raw = []byte(`{"spec":{"template":{"spec":{"containers":[{"image":"nginx:2","name":"c","resources":{}}]},"metadata":{"labels":{"app":"web"}},"$patch":"replace"}}}`)
	if history.Equal(odd, rb) {
		t.Fatal("test data should differ in bytes")
	}
	if step, r := chooseUpdateRevision(b, []*appsv1.ControllerRevision{ra, odd}, must(NewRevision(b, 3, ptr.To[int32](0)))); step != reuseLatest || r != odd {
		t.Fatalf("semantic match: %v %v", step, r)
	}
}

func must(r *appsv1.ControllerRevision, err error) *appsv1.ControllerRevision {
	if err != nil {
		panic(err)
	}
	return r
}

func TestClaimRefs(t *testing.T) {
	const (
		del = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
		ret = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	)
	setRef := func(s *appsv1.StatefulSet) metav1.OwnerReference { return *metav1.NewControllerRef(s, setKind) }
	podRef := func(p *corev1.Pod) metav1.OwnerReference { return *metav1.NewControllerRef(p, podKind) }
	foreign := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Backup", Name: "b", UID: "b-uid", Controller: ptr.To(true)}
	for _, tc := range []struct {
		name                    string
		whenDeleted, whenScaled appsv1.PersistentVolumeClaimRetentionPolicyType
		ordinal                 int
		have                    func(*appsv1.StatefulSet, *corev1.Pod) []metav1.OwnerReference
		want                    string // owner kinds
		changed                 bool
	}{
		{name: "retain/retain: none", whenDeleted: ret, whenScaled: ret, ordinal: 0, want: ""},
		{name: "retain/retain: ours removed", whenDeleted: ret, whenScaled: ret, ordinal: 0,
			have: func(s *appsv1.StatefulSet, _ *corev1.Pod) []metav1.OwnerReference {
				return []metav1.OwnerReference{setRef(s)}
			}, want: "", changed: true},
		{name: "whenDeleted: set owns in range", whenDeleted: del, whenScaled: ret, ordinal: 0, want: "StatefulSet", changed: true},
		{name: "whenDeleted: set owns condemned too", whenDeleted: del, whenScaled: ret, ordinal: 3, want: "StatefulSet", changed: true},
		{name: "whenScaled: nothing in range", whenDeleted: ret, whenScaled: del, ordinal: 0, want: ""},
		{name: "whenScaled: pod owns condemned", whenDeleted: ret, whenScaled: del, ordinal: 3, want: "Pod", changed: true},
		{name: "both: condemned pod only", whenDeleted: del, whenScaled: del, ordinal: 3,
			have: func(s *appsv1.StatefulSet, _ *corev1.Pod) []metav1.OwnerReference {
				return []metav1.OwnerReference{setRef(s)}
			}, want: "Pod", changed: true},
		{name: "both: scaled back up, set again", whenDeleted: del, whenScaled: del, ordinal: 0,
			have: func(_ *appsv1.StatefulSet, p *corev1.Pod) []metav1.OwnerReference {
				return []metav1.OwnerReference{podRef(p)}
			}, want: "StatefulSet", changed: true},
		{name: "up to date", whenDeleted: del, whenScaled: ret, ordinal: 0,
			have: func(s *appsv1.StatefulSet, _ *corev1.Pod) []metav1.OwnerReference {
				return []metav1.OwnerReference{setRef(s)}
			}, want: "StatefulSet"},
		{name: "non-controller ref made controller", whenDeleted: del, whenScaled: ret, ordinal: 0,
			have: func(s *appsv1.StatefulSet, _ *corev1.Pod) []metav1.OwnerReference {
				r := setRef(s)
				r.Controller = nil
				return []metav1.OwnerReference{r}
			}, want: "StatefulSet", changed: true},
		{name: "stale set ref left alone", whenDeleted: del, whenScaled: ret, ordinal: 0,
			have: func(s *appsv1.StatefulSet, _ *corev1.Pod) []metav1.OwnerReference {
				r := setRef(s)
				r.UID = "old"
				return []metav1.OwnerReference{r}
			}, want: "StatefulSet"},
		{name: "foreign controller: we keep out", whenDeleted: del, whenScaled: ret, ordinal: 0,
			have: func(*appsv1.StatefulSet, *corev1.Pod) []metav1.OwnerReference {
				return []metav1.OwnerReference{foreign}
			}, want: "Backup"},
		{name: "foreign controller: ours removed", whenDeleted: del, whenScaled: ret, ordinal: 0,
			have: func(s *appsv1.StatefulSet, _ *corev1.Pod) []metav1.OwnerReference {
				return []metav1.OwnerReference{foreign, setRef(s)}
			}, want: "Backup", changed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := newSet(2, withClaims, withRetention(tc.whenDeleted, tc.whenScaled))
			p := pod(tc.ordinal, "r1", "ready")
			claim := NewClaims(set, tc.ordinal)[0]
			if tc.have != nil {
				claim.OwnerReferences = tc.have(set, p)
			}
			refs, changed := ClaimRefs(claim, set, p)
			var kinds []byte
			for i, r := range refs {
				if i > 0 {
					kinds = append(kinds, ',')
				}
				kinds = append(kinds, r.Kind...)
			}
			if string(kinds) != tc.want || changed != tc.changed {
				t.Fatalf("refs %s changed %v, want %s %v", kinds, changed, tc.want, tc.changed)
			}
		})
	}
}
