// Package history keeps the ControllerRevisions of a workload (StatefulSet, DaemonSet), as
// upstream's pkg/controller/history: every distinct template is stored once, as an immutable
// ControllerRevision named <owner>-<hash> and numbered, so a rollout knows which revision
// each pod runs and `kubectl rollout undo` can go back to an older one. This file is the pure
// part (hashing, naming, equality, ordering, choosing what to truncate); client.go reads and
// writes revisions.
package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
)

// HashLabel carries a revision's hash, as upstream's ControllerRevisionHashLabel.
const HashLabel = "controller.kubernetes.io/hash"

// maxPrefix keeps <prefix>-<hash> within the 253 characters of an object name.
const maxPrefix = 223

// Hash is the FNV-32 hash of a revision's data, with the collision count (when set) mixed
// in so a revision whose name is taken by different data can be renamed, encoded with
// SafeEncodeString as upstream so names carry no vowels (no accidental words). Raw data
// hashes exactly as upstream; an Object without Raw is hashed as its JSON (upstream uses a
// spew dump there, which nothing in skiff produces).
func Hash(cr *appsv1.ControllerRevision, collisionCount *int32) string {
	h := fnv.New32()
	if len(cr.Data.Raw) > 0 {
		h.Write(cr.Data.Raw)
	}
	if cr.Data.Object != nil {
		if b, err := json.Marshal(cr.Data.Object); err == nil {
			h.Write(b)
		}
	}
	if collisionCount != nil {
		h.Write([]byte(strconv.FormatInt(int64(*collisionCount), 10)))
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// Name is a revision's name: the owner's name (cut to fit) and the hash.
func Name(prefix, hash string) string {
	if len(prefix) > maxPrefix {
		prefix = prefix[:maxPrefix]
	}
	return prefix + "-" + hash
}

// New builds the revision of owner (of kind gvk) holding data as number revision: labelled
// with the template's labels (so the owner's selector finds it) and its hash, named from the
// hash and collisionCount, controlled by the owner.
func New(owner metav1.Object, gvk schema.GroupVersionKind, templateLabels map[string]string, data runtime.RawExtension, revision int64, collisionCount *int32) *appsv1.ControllerRevision {
	lbl := make(map[string]string, len(templateLabels)+1)
	for k, v := range templateLabels {
		lbl[k] = v
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       owner.GetNamespace(),
			Labels:          lbl,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, gvk)},
		},
		Data:     data,
		Revision: revision,
	}
	hash := Hash(cr, collisionCount)
	cr.Name = Name(owner.GetName(), hash)
	cr.Labels[HashLabel] = hash
	return cr
}

// Equal reports whether two revisions hold the same data (both nil counts as equal).
func Equal(a, b *appsv1.ControllerRevision) bool {
	if a == nil || b == nil {
		return a == b
	}
	return bytes.Equal(a.Data.Raw, b.Data.Raw) && apiequality.Semantic.DeepEqual(a.Data.Object, b.Data.Object)
}

// FindEqual returns the revisions holding needle's data, in their order.
func FindEqual(revs []*appsv1.ControllerRevision, needle *appsv1.ControllerRevision) []*appsv1.ControllerRevision {
	var out []*appsv1.ControllerRevision
	for _, r := range revs {
		if Equal(r, needle) {
			out = append(out, r)
		}
	}
	return out
}

// Sort orders revisions by number, ties broken by age and then name, so the last is the
// newest.
func Sort(revs []*appsv1.ControllerRevision) {
	sort.SliceStable(revs, func(i, j int) bool {
		a, b := revs[i], revs[j]
		if a.Revision != b.Revision {
			return a.Revision < b.Revision
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

// Next is the number for a new revision: one more than the highest of sorted revs, 1 for
// none.
func Next(sorted []*appsv1.ControllerRevision) int64 {
	if len(sorted) == 0 {
		return 1
	}
	return sorted[len(sorted)-1].Revision + 1
}

// ToTruncate picks the revisions to delete so that at most limit revisions not in live
// remain, oldest first (sorted must be sorted). Live revisions — the current and update
// ones, and those pods still run — are never chosen, so a rollback target a pod uses stays.
// A negative limit keeps everything.
func ToTruncate(sorted []*appsv1.ControllerRevision, live map[string]bool, limit int32) []*appsv1.ControllerRevision {
	var old []*appsv1.ControllerRevision
	for _, r := range sorted {
		if !live[r.Name] {
			old = append(old, r)
		}
	}
	if limit < 0 || len(old) <= int(limit) {
		return nil
	}
	return old[:len(old)-int(limit)]
}
