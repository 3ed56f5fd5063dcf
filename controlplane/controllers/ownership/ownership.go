// Package ownership decides which objects a controller owns, as upstream's
// ControllerRefManager does: a controller adopts the orphans its selector matches (a
// ReplicaSet left by `kubectl delete --cascade=orphan`, pods made before their ReplicaSet)
// and releases what it controls but no longer matches (a pod relabelled out of its set).
// Claim is the pure decision; Adopt and Release are the patches that carry it out.
package ownership

import (
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Decision is what Claim decided for each object, by index into its input.
type Decision struct {
	// Owned are controlled by the owner and match (after adoption: Adopt included).
	Owned []int
	// Adopt are orphans to take, Release controlled objects to let go.
	Adopt, Release []int
}

// Claim decides for objs (in the owner's namespace). An owner being deleted adopts
// nothing; an object being deleted is never adopted; objects controlled by another
// controller are left alone.
func Claim(owner metav1.Object, selector labels.Selector, objs []metav1.Object) Decision {
	var d Decision
	for i, o := range objs {
		ref := metav1.GetControllerOfNoCopy(o)
		matches := selector.Matches(labels.Set(o.GetLabels()))
		switch {
		case ref != nil && ref.UID == owner.GetUID():
			if matches {
				d.Owned = append(d.Owned, i)
			} else if owner.GetDeletionTimestamp() == nil {
				d.Release = append(d.Release, i)
			}
		case ref == nil && matches && owner.GetDeletionTimestamp() == nil && o.GetDeletionTimestamp() == nil && !selector.Empty():
			d.Adopt = append(d.Adopt, i)
			d.Owned = append(d.Owned, i)
		}
	}
	return d
}

// AdoptPatch is the strategic merge patch that makes owner the controller of an object,
// guarded by the object's UID so a same-named replacement is not adopted.
func AdoptPatch(owner metav1.Object, gvk schema.GroupVersionKind, uid types.UID) ([]byte, error) {
	ref := metav1.NewControllerRef(owner, gvk)
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": []metav1.OwnerReference{*ref},
		"uid":             uid,
	}})
}

// ReleasePatch removes owner's reference from an object (strategic merge delete by uid).
func ReleasePatch(owner metav1.Object, uid types.UID) []byte {
	return []byte(fmt.Sprintf(`{"metadata":{"ownerReferences":[{"$patch":"delete","uid":%q}],"uid":%q}}`, owner.GetUID(), uid))
}

// Apply carries out d with the controller's patch calls and returns the indexes it then owns.
// An object gone or replaced meanwhile (NotFound, or Invalid from the UID guard) is passed
// over — an adoption of it does not count; any other error stops.
func Apply(d Decision, adopt, release func(i int) error) ([]int, error) {
	gone := func(err error) bool { return apierrors.IsNotFound(err) || apierrors.IsInvalid(err) }
	failed := map[int]bool{}
	for _, i := range d.Adopt {
		if err := adopt(i); err != nil {
			if !gone(err) {
				return nil, fmt.Errorf("adopt: %w", err)
			}
			failed[i] = true
		}
	}
	for _, i := range d.Release {
		if err := release(i); err != nil && !gone(err) {
			return nil, fmt.Errorf("release: %w", err)
		}
	}
	var owned []int
	for _, i := range d.Owned {
		if !failed[i] {
			owned = append(owned, i)
		}
	}
	return owned, nil
}
