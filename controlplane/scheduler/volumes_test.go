package scheduler

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/controlplane/scheduler/core"
)

func listersOf(t *testing.T, objs ...any) *volumeListers {
	t.Helper()
	claims := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	volumes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range objs {
		var err error
		switch o.(type) {
		case *corev1.PersistentVolumeClaim:
			err = claims.Add(o)
		case *corev1.PersistentVolume:
			err = volumes.Add(o)
		case *storagev1.StorageClass:
			err = classes.Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return &volumeListers{claims: corelisters.NewPersistentVolumeClaimLister(claims),
		volumes: corelisters.NewPersistentVolumeLister(volumes), classes: storagelisters.NewStorageClassLister(classes)}
}

func TestResolveVolumes(t *testing.T) {
	affinity := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"n2"}}}}}}
	pinnedPV := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"},
		Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{Required: affinity}}}
	freePV := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv2"}}
	immediate := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate)}
	deleting := claim("data", "local", "")
	deleting.DeletionTimestamp = &metav1.Time{}
	lost := claim("data", "", "pv9")
	lost.Status.Phase = corev1.ClaimLost
	selected := claim("data", "local", "")
	selected.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "n3"}
	app := testPod("app", "1", 0, withClaim("v", "data"))
	ephemeralPod := testPod("app", "1", 0, func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}
	})
	ownedByPod := claim("app-scratch", "local", "")
	ownedByPod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "app", UID: ephemeralPod.UID, Controller: ptr.To(true)}}

	tests := []struct {
		name        string
		pod         *corev1.Pod
		objs        []any
		want        *core.Volumes
		wantDelayed []string
	}{
		{name: "no claims", pod: testPod("app", "1", 0)},
		{name: "claim not found", pod: app,
			want: &core.Volumes{Unschedulable: `persistentvolumeclaim "data" not found`}},
		{name: "claim being deleted", pod: app, objs: []any{wffcClass("local"), deleting},
			want: &core.Volumes{Unschedulable: `persistentvolumeclaim "data" is being deleted`}},
		{name: "claim lost", pod: app, objs: []any{lost},
			want: &core.Volumes{Unschedulable: `persistentvolumeclaim "data" bound to non-existent persistentvolume "pv9"`}},
		{name: "bound, volume pinned to a node", pod: app, objs: []any{claim("data", "", "pv1"), pinnedPV},
			want: &core.Volumes{NodeAffinity: []*corev1.NodeSelector{affinity}}},
		{name: "bound, volume without node affinity", pod: app, objs: []any{claim("data", "", "pv2"), freePV}},
		{name: "bound to a missing volume", pod: app, objs: []any{claim("data", "", "pv1")},
			want: &core.Volumes{MissingPV: true}},
		{name: "unbound, WaitForFirstConsumer", pod: app, objs: []any{claim("data", "local", ""), wffcClass("local")},
			wantDelayed: []string{"data"}},
		{name: "unbound, WaitForFirstConsumer, node already selected", pod: app, objs: []any{selected, wffcClass("local")},
			want: &core.Volumes{SelectedNodes: []string{"n3"}}, wantDelayed: []string{"data"}},
		{name: "unbound, Immediate class", pod: app, objs: []any{claim("data", "fast", ""), immediate},
			want: &core.Volumes{Unschedulable: "pod has unbound immediate PersistentVolumeClaims"}},
		{name: "unbound, no class", pod: app, objs: []any{claim("data", "", "")},
			want: &core.Volumes{Unschedulable: "pod has unbound immediate PersistentVolumeClaims"}},
		{name: "unbound, class does not exist", pod: app, objs: []any{claim("data", "gone", "")},
			want: &core.Volumes{Unschedulable: "pod has unbound immediate PersistentVolumeClaims"}},
		{name: "a missing claim is reported before an unbound one", pod: testPod("app", "1", 0, withClaim("a", "fast"), withClaim("b", "data")),
			objs: []any{claim("fast", "fast", ""), immediate},
			want: &core.Volumes{Unschedulable: `persistentvolumeclaim "data" not found`}},
		{name: "ephemeral volume, claim not created yet", pod: ephemeralPod,
			want: &core.Volumes{Unschedulable: `waiting for ephemeral volume controller to create the persistentvolumeclaim "app-scratch"`}},
		{name: "ephemeral volume, claim of another owner", pod: ephemeralPod, objs: []any{claim("app-scratch", "local", ""), wffcClass("local")},
			want: &core.Volumes{Unschedulable: "PVC default/app-scratch was not created for pod default/app (pod is not owner)"}},
		{name: "ephemeral volume, its own claim", pod: ephemeralPod, objs: []any{ownedByPod, wffcClass("local")},
			wantDelayed: []string{"app-scratch"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := listersOf(t, tt.objs...).resolve(tt.pod)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.constraint, tt.want) {
				t.Errorf("constraint %+v, want %+v", got.constraint, tt.want)
			}
			var delayed []string
			for _, pvc := range got.delayed {
				delayed = append(delayed, pvc.Name)
			}
			if !reflect.DeepEqual(delayed, tt.wantDelayed) {
				t.Errorf("delayed %v, want %v", delayed, tt.wantDelayed)
			}
		})
	}
}

func TestResolveWithoutListers(t *testing.T) {
	var l *volumeListers
	if _, err := l.resolve(testPod("app", "1", 0)); err != nil {
		t.Errorf("pod without claims: %v", err)
	}
	if _, err := l.resolve(testPod("app", "1", 0, withClaim("v", "data"))); err == nil {
		t.Error("pod with a claim resolved without listers")
	}
}
