package statefulset

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/skiff-sh/skiff/controlplane/controllers/history"
)

// Patch is the data of a StatefulSet's revision, exactly as upstream's getPatch makes it:
// the set's spec.template as a strategic merge patch that replaces the whole template,
// {"spec":{"template":{...,"$patch":"replace"}}}. `kubectl rollout undo` applies it to the
// set, so the shape (and, for hashes to agree with upstream's, the bytes: keys sorted, as
// encoding/json writes a map) must be this.
func Patch(set *appsv1.StatefulSet) ([]byte, error) {
	b, err := json.Marshal(set.Spec.Template)
	if err != nil {
		return nil, err
	}
	var tmpl map[string]any
	if err := json.Unmarshal(b, &tmpl); err != nil {
		return nil, err
	}
	tmpl["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": tmpl}})
}

// NewRevision is the revision of the set's current template, numbered n, named with
// collisionCount; it carries the set's annotations as upstream's do (kubectl reads the
// change-cause from them).
func NewRevision(set *appsv1.StatefulSet, n int64, collisionCount *int32) (*appsv1.ControllerRevision, error) {
	data, err := Patch(set)
	if err != nil {
		return nil, err
	}
	cr := history.New(set, setKind, set.Spec.Template.Labels, runtime.RawExtension{Raw: data}, n, collisionCount)
	cr.Annotations = map[string]string{}
	for k, v := range set.Annotations {
		cr.Annotations[k] = v
	}
	return cr, nil
}

// ApplyRevision returns a copy of set with the spec the revision records (its template).
func ApplyRevision(set *appsv1.StatefulSet, rev *appsv1.ControllerRevision) (*appsv1.StatefulSet, error) {
	cp := set.DeepCopy()
	orig, err := json.Marshal(cp)
	if err != nil {
		return nil, err
	}
	patched, err := strategicpatch.StrategicMergePatch(orig, rev.Data.Raw, &appsv1.StatefulSet{})
	if err != nil {
		return nil, fmt.Errorf("revision %s: %w", rev.Name, err)
	}
	var restored appsv1.StatefulSet
	if err := json.Unmarshal(patched, &restored); err != nil {
		return nil, fmt.Errorf("revision %s: %w", rev.Name, err)
	}
	cp.Spec = restored.Spec
	return cp, nil
}

// matchesLatest reports whether the set's template is what the latest revision records even
// though the bytes differ (a serialisation change between versions, say): re-encoding the
// latest revision's template must give the proposed data, so pods are not rolled for
// nothing. Upstream does the same, also applying defaults, which skiff's API server has
// already applied to both.
func matchesLatest(set *appsv1.StatefulSet, proposed, latest *appsv1.ControllerRevision) bool {
	restored, err := ApplyRevision(set, latest)
	if err != nil {
		return false
	}
	again, err := NewRevision(restored, -1, nil)
	if err != nil {
		return false
	}
	return history.Equal(proposed, again)
}

// revisionStep is what to do to find the update revision among the existing (sorted) ones.
type revisionStep int

const (
	// reuseLatest: the latest revision already records the template.
	reuseLatest revisionStep = iota
	// renumber: an older revision records it (a rollback): it becomes the newest.
	renumber
	// create: no revision records it.
	create
)

// chooseUpdateRevision decides, as upstream's getStatefulSetRevisions, how the proposed
// revision (the set's template) relates to the sorted existing ones, and returns the
// existing revision involved (latest, or the equal one to renumber).
func chooseUpdateRevision(set *appsv1.StatefulSet, sorted []*appsv1.ControllerRevision, proposed *appsv1.ControllerRevision) (revisionStep, *appsv1.ControllerRevision) {
	equal := history.FindEqual(sorted, proposed)
	if n := len(equal); n > 0 {
		if history.Equal(sorted[len(sorted)-1], equal[n-1]) {
			return reuseLatest, sorted[len(sorted)-1]
		}
		return renumber, equal[n-1]
	}
	if len(sorted) > 0 && matchesLatest(set, proposed, sorted[len(sorted)-1]) {
		return reuseLatest, sorted[len(sorted)-1]
	}
	return create, nil
}
