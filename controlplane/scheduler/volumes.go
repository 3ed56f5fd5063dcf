package scheduler

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/component-helpers/storage/volume"

	"github.com/skiff-sh/skiff/controlplane/scheduler/core"
)

// msgUnboundImmediate is upstream VolumeBinding's PreFilter verdict for a claim that should
// have been bound already.
const msgUnboundImmediate = "pod has unbound immediate PersistentVolumeClaims"

// volumeListers are what the volume checks read.
type volumeListers struct {
	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister
}

// podVolumes is the pod's claims resolved for one decision.
type podVolumes struct {
	// constraint is nil when the claims do not restrict nodes.
	constraint *core.Volumes
	// delayed are the unbound WaitForFirstConsumer claims: the chosen node is written into
	// their volume.kubernetes.io/selected-node annotation before the pod is bound, which tells
	// the volume binder where to provision.
	delayed []*corev1.PersistentVolumeClaim
}

// claimName is the claim a volume uses, if any: a persistentVolumeClaim's, or for a generic
// ephemeral volume the one the ephemeral volume controller creates, <pod>-<volume>.
func claimName(pod *corev1.Pod, v *corev1.Volume) (name string, isEphemeral bool) {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName, false
	case v.Ephemeral != nil:
		return ephemeral.VolumeClaimName(pod, v), true
	}
	return "", false
}

// resolve applies the part of upstream's VolumeBinding that skiff needs: missing, lost or
// deleted claims and unbound claims of an Immediate class reject the pod; a claim bound to a
// volume restricts the pod to the volume's node affinity; unbound WaitForFirstConsumer claims
// accept any node (the binder provisions where the pod lands) unless provisioning already
// started on a selected node. An error is a lister failure, not a verdict.
func (l *volumeListers) resolve(pod *corev1.Pod) (podVolumes, error) {
	var out podVolumes
	reject := func(msg string) (podVolumes, error) {
		return podVolumes{constraint: &core.Volumes{Unschedulable: msg}}, nil
	}
	var claims []*corev1.PersistentVolumeClaim
	// Every claim is looked up before any is judged, as upstream's PreFilter does, so that a
	// missing claim is reported even when another one is unbound.
	for i := range pod.Spec.Volumes {
		name, isEphemeral := claimName(pod, &pod.Spec.Volumes[i])
		if name == "" {
			continue
		}
		if l == nil || l.claims == nil {
			return out, fmt.Errorf("no persistentvolumeclaim lister for %s/%s", pod.Namespace, name)
		}
		pvc, err := l.claims.PersistentVolumeClaims(pod.Namespace).Get(name)
		switch {
		case apierrors.IsNotFound(err) && isEphemeral:
			// Normal right after the pod was created: the ephemeral volume controller is on it.
			return reject(fmt.Sprintf("waiting for ephemeral volume controller to create the persistentvolumeclaim %q", name))
		case apierrors.IsNotFound(err):
			return reject(err.Error())
		case err != nil:
			return out, err
		}
		if pvc.Status.Phase == corev1.ClaimLost {
			return reject(fmt.Sprintf("persistentvolumeclaim %q bound to non-existent persistentvolume %q", pvc.Name, pvc.Spec.VolumeName))
		}
		if pvc.DeletionTimestamp != nil {
			return reject(fmt.Sprintf("persistentvolumeclaim %q is being deleted", pvc.Name))
		}
		if isEphemeral {
			if err := ephemeral.VolumeIsForPod(pod, pvc); err != nil {
				return reject(err.Error())
			}
		}
		claims = append(claims, pvc)
	}
	if len(claims) == 0 {
		return out, nil
	}
	c := &core.Volumes{}
	for _, pvc := range claims {
		if pvc.Spec.VolumeName != "" {
			pv, err := l.volumes.Get(pvc.Spec.VolumeName)
			switch {
			case apierrors.IsNotFound(err):
				c.MissingPV = true
				continue
			case err != nil:
				return out, err
			}
			if pv.Spec.NodeAffinity != nil && pv.Spec.NodeAffinity.Required != nil {
				c.NodeAffinity = append(c.NodeAffinity, pv.Spec.NodeAffinity.Required)
			}
			continue
		}
		delayed, err := l.waitForFirstConsumer(pvc)
		if err != nil {
			return out, err
		}
		if !delayed {
			return reject(msgUnboundImmediate)
		}
		out.delayed = append(out.delayed, pvc)
		if node, ok := pvc.Annotations[volume.AnnSelectedNode]; ok {
			c.SelectedNodes = append(c.SelectedNodes, node)
		}
	}
	if c.MissingPV || len(c.NodeAffinity) > 0 || len(c.SelectedNodes) > 0 {
		out.constraint = c
	}
	return out, nil
}

// waitForFirstConsumer is upstream's IsDelayBindingMode: a claim without a class, or whose
// class does not exist, binds immediately. A class without volumeBindingMode (the API server
// defaults it) counts as Immediate too.
func (l *volumeListers) waitForFirstConsumer(pvc *corev1.PersistentVolumeClaim) (bool, error) {
	name := volume.GetPersistentVolumeClaimClass(pvc)
	if name == "" {
		return false, nil
	}
	class, err := l.classes.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer, nil
}

// selectNode writes node into the selected-node annotation of every delayed claim that does
// not carry it yet: the volume binder provisions there, and the agent starts the pod once the
// claims are bound.
func selectNode(ctx context.Context, client typedcorev1.PersistentVolumeClaimsGetter, claims []*corev1.PersistentVolumeClaim, node string) error {
	for _, pvc := range claims {
		if pvc.Annotations[volume.AnnSelectedNode] == node {
			continue
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{volume.AnnSelectedNode: node}}})
		if err != nil {
			return err
		}
		if _, err := client.PersistentVolumeClaims(pvc.Namespace).Patch(ctx, pvc.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("selecting node %s for persistentvolumeclaim %s/%s: %w", node, pvc.Namespace, pvc.Name, err)
		}
	}
	return nil
}
