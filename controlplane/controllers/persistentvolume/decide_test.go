package persistentvolume

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func claim(name, class, size string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: modes, StorageClassName: ptr.To(class),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}},
	}
}

func volume(name, class, size string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolume {
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": "fast"}},
		Spec: corev1.PersistentVolumeSpec{AccessModes: modes, StorageClassName: class,
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/" + name}}},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable},
	}
}

func TestFits(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	for _, tc := range []struct {
		name  string
		claim *corev1.PersistentVolumeClaim
		pv    *corev1.PersistentVolume
		want  bool
	}{
		{"same class, bigger", claim("c", "manual", "1Gi"), volume("v", "manual", "2Gi"), true},
		{"exact size", claim("c", "manual", "1Gi"), volume("v", "manual", "1Gi"), true},
		{"too small", claim("c", "manual", "2Gi"), volume("v", "manual", "1Gi"), false},
		{"other class", claim("c", "manual", "1Gi"), volume("v", "fast", "1Gi"), false},
		{"no class matches no class", claim("c", "", "1Gi"), volume("v", "", "1Gi"), true},
		{"missing access mode", claim("c", "", "1Gi", corev1.ReadWriteMany), volume("v", "", "1Gi", corev1.ReadWriteOnce), false},
		{"superset of modes", claim("c", "", "1Gi", corev1.ReadWriteOnce), volume("v", "", "1Gi", corev1.ReadWriteOnce, corev1.ReadOnlyMany), true},
		{"block claim, filesystem volume", func() *corev1.PersistentVolumeClaim { c := claim("c", "", "1Gi"); c.Spec.VolumeMode = &block; return c }(), volume("v", "", "1Gi"), false},
		{"selector matches", func() *corev1.PersistentVolumeClaim {
			c := claim("c", "", "1Gi")
			c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "fast"}}
			return c
		}(), volume("v", "", "1Gi"), true},
		{"selector does not match", func() *corev1.PersistentVolumeClaim {
			c := claim("c", "", "1Gi")
			c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "slow"}}
			return c
		}(), volume("v", "", "1Gi"), false},
	} {
		if got := Fits(tc.claim, tc.pv); got != tc.want {
			t.Errorf("%s: Fits = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMatch(t *testing.T) {
	c := claim("data", "manual", "1Gi")
	big, small, tiny := volume("big", "manual", "10Gi"), volume("small", "manual", "2Gi"), volume("tiny", "manual", "512Mi")
	if got := Match(c, []*corev1.PersistentVolume{big, small, tiny}); got != small {
		t.Errorf("Match = %v, want the smallest that fits", got)
	}
	taken := volume("taken", "manual", "1Gi")
	taken.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "other", UID: "x"}
	if got := Match(c, []*corev1.PersistentVolume{taken}); got != nil {
		t.Errorf("Match took a volume claimed by another: %v", got.Name)
	}
	pre := volume("pre", "manual", "5Gi")
	pre.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "data"}
	pre.Status.Phase = corev1.VolumeAvailable
	if got := Match(c, []*corev1.PersistentVolume{small, pre}); got != pre {
		t.Errorf("Match = %v, want the volume pre-bound to the claim", got)
	}
	released := volume("released", "manual", "1Gi")
	released.Status.Phase = corev1.VolumeReleased
	deleting := volume("deleting", "manual", "1Gi")
	deleting.DeletionTimestamp = &metav1.Time{}
	if got := Match(c, []*corev1.PersistentVolume{released, deleting}); got != nil {
		t.Errorf("Match took a released or deleting volume: %v", got.Name)
	}
}

func TestLocalVolume(t *testing.T) {
	c := claim("data", "local-path", "3Gi")
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local-path"}, Provisioner: LocalPathProvisioner}
	pv := LocalVolume(c, class, "node-1", "/var/lib/skiff/agent/storage")
	if pv.Name != "pvc-uid-data" || pv.Spec.HostPath.Path != "/var/lib/skiff/agent/storage/pvc-uid-data_default_data" ||
		*pv.Spec.HostPath.Type != corev1.HostPathDirectoryOrCreate {
		t.Errorf("volume %s at %s", pv.Name, pv.Spec.HostPath.Path)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Spec.StorageClassName != "local-path" ||
		pv.Annotations[AnnProvisionedBy] != LocalPathProvisioner {
		t.Errorf("policy %s class %s annotations %v", pv.Spec.PersistentVolumeReclaimPolicy, pv.Spec.StorageClassName, pv.Annotations)
	}
	if !claimOf(pv.Spec.ClaimRef, c) || pv.Spec.ClaimRef.UID != c.UID {
		t.Errorf("claimRef %+v", pv.Spec.ClaimRef)
	}
	term := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0]
	if term.Key != corev1.LabelHostname || term.Values[0] != "node-1" {
		t.Errorf("node affinity %+v", term)
	}
	if size := pv.Spec.Capacity[corev1.ResourceStorage]; size.String() != "3Gi" {
		t.Errorf("capacity %s", size.String())
	}
	if !Fits(c, pv) {
		t.Error("the provisioned volume does not fit its own claim")
	}
}

func TestVolumePhase(t *testing.T) {
	c := claim("data", "", "1Gi")
	bound := c.DeepCopy()
	bound.Spec.VolumeName = "v"
	other := c.DeepCopy()
	other.Spec.VolumeName = "elsewhere"
	ref := &corev1.ObjectReference{Namespace: "default", Name: "data", UID: c.UID}
	withRef := func(r *corev1.ObjectReference, phase corev1.PersistentVolumePhase) *corev1.PersistentVolume {
		pv := volume("v", "", "1Gi")
		pv.Spec.ClaimRef, pv.Status.Phase = r, phase
		return pv
	}
	for _, tc := range []struct {
		name  string
		pv    *corev1.PersistentVolume
		claim *corev1.PersistentVolumeClaim
		want  corev1.PersistentVolumePhase
	}{
		{"unclaimed", withRef(nil, corev1.VolumePending), nil, corev1.VolumeAvailable},
		{"bound", withRef(ref, corev1.VolumeAvailable), bound, corev1.VolumeBound},
		{"claim gone", withRef(ref, corev1.VolumeBound), nil, corev1.VolumeReleased},
		{"pre-bound to a claim not made yet", withRef(&corev1.ObjectReference{Namespace: "default", Name: "data"}, ""), nil, corev1.VolumeAvailable},
		{"binding in progress", withRef(ref, corev1.VolumePending), c, corev1.VolumeAvailable},
		{"binding in progress keeps Bound", withRef(ref, corev1.VolumeBound), c, corev1.VolumeBound},
		{"claim took another volume", withRef(ref, corev1.VolumeAvailable), other, corev1.VolumeReleased},
	} {
		if got := VolumePhase(tc.pv, tc.claim); got != tc.want {
			t.Errorf("%s: phase %s, want %s", tc.name, got, tc.want)
		}
	}
}
