// Package persistentvolume binds PersistentVolumeClaims to PersistentVolumes and provisions
// volumes for skiff's built-in local-path StorageClass, as upstream's persistent-volume
// binder does for its in-tree plugins:
//
//   - a claim binds to the smallest Available volume of its class whose access modes,
//     volume mode, size and label selector fit it, or to the volume it names;
//   - a claim of a class whose provisioner is skiff.sh/local-path gets a hostPath volume on
//     the node the scheduler picked for its first pod (volume.kubernetes.io/selected-node),
//     under the directory that node's agent announces in the skiff.sh/local-path-root
//     annotation, pinned to that node by node affinity;
//   - claims of other provisioners are annotated for their external provisioner;
//   - a volume whose claim is gone is Released, then deleted if its reclaim policy says
//     Delete (the node's agent removes the data of a local-path volume).
//
// The decisions (Match, LocalVolume, VolumePhase) take objects and return answers, with no I/O.
package persistentvolume

import (
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

// Annotations upstream's binder and the scheduler use, and skiff's own.
const (
	AnnSelectedNode       = "volume.kubernetes.io/selected-node"
	AnnStorageProvisioner = "volume.kubernetes.io/storage-provisioner"
	AnnBetaProvisioner    = "volume.beta.kubernetes.io/storage-provisioner"
	AnnBindCompleted      = "pv.kubernetes.io/bind-completed"
	AnnBoundByController  = "pv.kubernetes.io/bound-by-controller"
	AnnProvisionedBy      = "pv.kubernetes.io/provisioned-by"
	// AnnLocalPathRoot is set by each agent on its Node: where its local-path volumes live.
	AnnLocalPathRoot = "skiff.sh/local-path-root"
	// LocalPathProvisioner is the provisioner of the built-in local-path StorageClass.
	LocalPathProvisioner = "skiff.sh/local-path"
)

// claimClass is the class a claim asks for ("" for none).
func claimClass(c *corev1.PersistentVolumeClaim) string {
	return ptr.Deref(c.Spec.StorageClassName, "")
}

func volumeMode(m *corev1.PersistentVolumeMode) corev1.PersistentVolumeMode {
	return ptr.Deref(m, corev1.PersistentVolumeFilesystem)
}

// Fits says whether pv can satisfy claim: same class and volume mode, every access mode the
// claim asks for, at least its size, and its label selector.
func Fits(claim *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) bool {
	if pv.Spec.StorageClassName != claimClass(claim) || volumeMode(pv.Spec.VolumeMode) != volumeMode(claim.Spec.VolumeMode) {
		return false
	}
	have := map[corev1.PersistentVolumeAccessMode]bool{}
	for _, m := range pv.Spec.AccessModes {
		have[m] = true
	}
	for _, m := range claim.Spec.AccessModes {
		if !have[m] {
			return false
		}
	}
	want := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	size := pv.Spec.Capacity[corev1.ResourceStorage]
	if size.Cmp(want) < 0 {
		return false
	}
	if claim.Spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(claim.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pv.Labels)) {
			return false
		}
	}
	return true
}

// Match picks the volume an unbound claim binds to: one pre-bound to it (claimRef naming
// it) first, else the smallest Available, unclaimed volume that fits. Volumes being
// deleted never match.
func Match(claim *corev1.PersistentVolumeClaim, volumes []*corev1.PersistentVolume) *corev1.PersistentVolume {
	var best *corev1.PersistentVolume
	for _, pv := range volumes {
		if pv.DeletionTimestamp != nil || !Fits(claim, pv) {
			continue
		}
		if ref := pv.Spec.ClaimRef; ref != nil {
			if ref.Namespace == claim.Namespace && ref.Name == claim.Name && (ref.UID == "" || ref.UID == claim.UID) {
				return pv
			}
			continue
		}
		if pv.Status.Phase != corev1.VolumeAvailable && pv.Status.Phase != corev1.VolumePending && pv.Status.Phase != "" {
			continue
		}
		if best == nil {
			best = pv
			continue
		}
		a, b := pv.Spec.Capacity[corev1.ResourceStorage], best.Spec.Capacity[corev1.ResourceStorage]
		if c := a.Cmp(b); c < 0 || (c == 0 && pv.Name < best.Name) {
			best = pv
		}
	}
	return best
}

// LocalVolumeName is the name of the volume provisioned for a claim, as upstream names them.
func LocalVolumeName(claim *corev1.PersistentVolumeClaim) string { return "pvc-" + string(claim.UID) }

// LocalVolume is the local-path volume for claim on node, whose agent keeps its volumes
// under root: a directory named after the volume and the claim, pinned to the node, bound
// to the claim in advance, with the class's reclaim policy.
func LocalVolume(claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, node, root string) *corev1.PersistentVolume {
	name := LocalVolumeName(claim)
	reclaim := ptr.Deref(class.ReclaimPolicy, corev1.PersistentVolumeReclaimDelete)
	modes := claim.Spec.AccessModes
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{AnnProvisionedBy: class.Provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: claim.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes: modes,
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: filepath.Join(root, name+"_"+claim.Namespace+"_"+claim.Name),
				Type: ptr.To(corev1.HostPathDirectoryOrCreate),
			}},
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: claim.Namespace,
				Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion},
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              class.Name,
			VolumeMode:                    ptr.To(volumeMode(claim.Spec.VolumeMode)),
			MountOptions:                  class.MountOptions,
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
}

// VolumePhase is the phase a volume belongs in, given the claim its claimRef names (nil if
// that claim does not exist, or is another object of the same name): Available without a
// claim reference, Bound while its claim holds it, Released once the claim is gone. A
// volume whose claim is still binding (volumeName not set yet) keeps its phase.
func VolumePhase(pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) corev1.PersistentVolumePhase {
	ref := pv.Spec.ClaimRef
	switch {
	case ref == nil:
		return corev1.VolumeAvailable
	case claim == nil:
		if ref.UID == "" {
			return corev1.VolumeAvailable // pre-bound to a claim that does not exist yet
		}
		return corev1.VolumeReleased
	case claim.Spec.VolumeName == pv.Name:
		return corev1.VolumeBound
	case claim.Spec.VolumeName == "":
		if pv.Status.Phase == "" || pv.Status.Phase == corev1.VolumePending {
			return corev1.VolumeAvailable
		}
		return pv.Status.Phase
	default:
		// The claim went to another volume; this one was reserved for it in vain.
		return corev1.VolumeReleased
	}
}

// claimOf says whether claim is the object ref names.
func claimOf(ref *corev1.ObjectReference, claim *corev1.PersistentVolumeClaim) bool {
	return ref != nil && claim != nil && ref.Namespace == claim.Namespace && ref.Name == claim.Name && (ref.UID == "" || ref.UID == claim.UID)
}
