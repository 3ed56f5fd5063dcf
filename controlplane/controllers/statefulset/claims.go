package statefulset

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// staleClaims are the ordinals to create whose PVCs still reference a previous pod of that
// name (scaled down with whenScaled=Delete): the garbage collector is about to delete them,
// so the new pod waits for that rather than mounting a claim on its way out.
func (c *Controller) staleClaims(set *appsv1.StatefulSet, pods []*corev1.Pod) map[int]bool {
	if _, whenScaled := retention(set); whenScaled == appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		return nil
	}
	have := map[int]bool{}
	for _, p := range pods {
		have[ordinalOf(p)] = true
	}
	stale := map[int]bool{}
	for o := startOrdinal(set); o < startOrdinal(set)+replicasOf(set); o++ {
		if have[o] {
			continue
		}
		for _, t := range set.Spec.VolumeClaimTemplates {
			if pvc, err := c.pvcs.PersistentVolumeClaims(set.Namespace).Get(ClaimName(set, t.Name, o)); err == nil && staleClaim(pvc, PodName(set, o)) {
				stale[o] = true
			}
		}
	}
	return stale
}

// createClaims creates the pod's PVCs that do not exist, with the retention policy's owner
// references; one being deleted holds the pod back until it is gone.
func (c *Controller) createClaims(ctx context.Context, set *appsv1.StatefulSet, p *corev1.Pod) error {
	var errs []error
	for _, claim := range NewClaims(set, ordinalOf(p)) {
		existing, err := c.pvcs.PersistentVolumeClaims(set.Namespace).Get(claim.Name)
		switch {
		case apierrors.IsNotFound(err):
			claim.OwnerReferences, _ = ClaimRefs(claim, set, p)
			_, err := c.client.CoreV1().PersistentVolumeClaims(set.Namespace).Create(ctx, claim, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			c.claimEvent(set, p.Name, claim.Name, err)
			if err != nil {
				errs = append(errs, fmt.Errorf("create PVC %s: %w", claim.Name, err))
			}
		case err != nil:
			errs = append(errs, err)
		case existing.DeletionTimestamp != nil:
			errs = append(errs, fmt.Errorf("pvc %s is being deleted", claim.Name))
		}
	}
	return errors.Join(errs...)
}

// fixClaims creates the missing PVCs of a pending pod and sets the owner references the
// retention policy asks for on the pod's claims.
func (c *Controller) fixClaims(ctx context.Context, set *appsv1.StatefulSet, p *corev1.Pod) error {
	if p.Status.Phase == corev1.PodPending {
		if err := c.createClaims(ctx, set, p); err != nil {
			return err
		}
	}
	var errs []error
	for _, t := range set.Spec.VolumeClaimTemplates {
		claim, err := c.pvcs.PersistentVolumeClaims(set.Namespace).Get(ClaimName(set, t.Name, ordinalOf(p)))
		if err != nil {
			continue // not there yet: created above or picked up by a later sync
		}
		refs, changed := ClaimRefs(claim, set, p)
		if !changed {
			continue
		}
		cp := claim.DeepCopy()
		cp.OwnerReferences = refs
		if _, err := c.client.CoreV1().PersistentVolumeClaims(set.Namespace).Update(ctx, cp, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("update PVC %s owner references: %w", claim.Name, err))
		}
	}
	return errors.Join(errs...)
}

// claimEvent records upstream's event for a PVC creation.
func (c *Controller) claimEvent(set *appsv1.StatefulSet, pod, claim string, err error) {
	if err == nil {
		c.recorder.Eventf(set, corev1.EventTypeNormal, "SuccessfulCreate", "Create Claim %s Pod %s in StatefulSet %s success", claim, pod, set.Name)
		return
	}
	c.recorder.Eventf(set, corev1.EventTypeWarning, "FailedCreate", "Create Claim %s for Pod %s in StatefulSet %s failed error: %s", claim, pod, set.Name, err)
}
