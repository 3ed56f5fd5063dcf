package history

import (
	"bytes"
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/util/retry"

	"github.com/skiff-sh/skiff/controlplane/controllers/ownership"
)

// maxCollisions bounds the renames Create tries before giving up; each collision is a
// different revision under the same 32-bit hash, so more than a few means something else
// (a revision being recreated under us) is going on.
const maxCollisions = 100

// History reads revisions from an informer's lister and writes them through client.
type History struct {
	client kubernetes.Interface
	lister appslisters.ControllerRevisionLister
}

// NewHistory returns a History over client and lister.
func NewHistory(client kubernetes.Interface, lister appslisters.ControllerRevisionLister) *History {
	return &History{client: client, lister: lister}
}

// Claim returns the revisions owner (of kind gvk) controls, after adopting the orphans sel
// matches and releasing the controlled ones it no longer matches, with ownership's rules
// (what another controller owns is left alone). canAdopt, if set, is asked once before the
// first adoption.
func (h *History) Claim(ctx context.Context, owner metav1.Object, gvk schema.GroupVersionKind, sel labels.Selector, canAdopt func() error) ([]*appsv1.ControllerRevision, error) {
	all, err := h.lister.ControllerRevisions(owner.GetNamespace()).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	objs := make([]metav1.Object, len(all))
	for i, r := range all {
		objs[i] = r
	}
	rc := h.client.AppsV1().ControllerRevisions(owner.GetNamespace())
	checked := false
	var checkErr error
	owned, err := ownership.Apply(ownership.Claim(owner, sel, objs),
		func(i int) error {
			if canAdopt != nil && !checked {
				checked, checkErr = true, canAdopt()
			}
			if checkErr != nil {
				return checkErr
			}
			patch, err := ownership.AdoptPatch(owner, gvk, all[i].UID)
			if err == nil {
				var adopted *appsv1.ControllerRevision
				if adopted, err = rc.Patch(ctx, all[i].Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err == nil {
					all[i] = adopted
				}
			}
			return err
		},
		func(i int) error {
			_, err := rc.Patch(ctx, all[i].Name, types.StrategicMergePatchType, ownership.ReleasePatch(owner, all[i].UID), metav1.PatchOptions{})
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("revisions of %s %s: %w", gvk.Kind, owner.GetName(), err)
	}
	out := make([]*appsv1.ControllerRevision, len(owned))
	for k, i := range owned {
		out[k] = all[i]
	}
	return out, nil
}

// Create creates rev for owner, named from its hash and *collisionCount. When the name is
// taken by a revision with the same data, that one is returned; when by different data (a
// hash collision), the count is raised and the next name tried — the caller records the
// count in its status so later names stay unique.
func (h *History) Create(ctx context.Context, owner metav1.Object, rev *appsv1.ControllerRevision, collisionCount *int32) (*appsv1.ControllerRevision, error) {
	if collisionCount == nil {
		return nil, fmt.Errorf("nil collision count")
	}
	rc := h.client.AppsV1().ControllerRevisions(owner.GetNamespace())
	clone := rev.DeepCopy()
	clone.Namespace = owner.GetNamespace()
	for range maxCollisions {
		hash := Hash(rev, collisionCount)
		clone.Name = Name(owner.GetName(), hash)
		if clone.Labels == nil {
			clone.Labels = map[string]string{}
		}
		clone.Labels[HashLabel] = hash
		created, err := rc.Create(ctx, clone, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			return created, err
		}
		existing, err := rc.Get(ctx, clone.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if bytes.Equal(existing.Data.Raw, clone.Data.Raw) {
			return existing, nil
		}
		*collisionCount++
	}
	return nil, fmt.Errorf("revision of %s: %d name collisions", owner.GetName(), maxCollisions)
}

// UpdateRevision renumbers rev to n (a rollback to an older template makes it the newest),
// retrying on conflict with a fresh read.
func (h *History) UpdateRevision(ctx context.Context, rev *appsv1.ControllerRevision, n int64) (*appsv1.ControllerRevision, error) {
	clone := rev.DeepCopy()
	rc := h.client.AppsV1().ControllerRevisions(rev.Namespace)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if clone.Revision == n {
			return nil
		}
		clone.Revision = n
		updated, err := rc.Update(ctx, clone, metav1.UpdateOptions{})
		if err == nil {
			clone = updated
			return nil
		}
		if fresh, gerr := rc.Get(ctx, rev.Name, metav1.GetOptions{}); gerr == nil {
			clone = fresh
		}
		return err
	})
	return clone, err
}

// Delete deletes rev; one already gone is not an error.
func (h *History) Delete(ctx context.Context, rev *appsv1.ControllerRevision) error {
	var opts metav1.DeleteOptions
	if rev.UID != "" {
		// A same-named revision created since is not ours to delete.
		opts.Preconditions = &metav1.Preconditions{UID: &rev.UID}
	}
	err := h.client.AppsV1().ControllerRevisions(rev.Namespace).Delete(ctx, rev.Name, opts)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
