package daemonset

import (
	"context"
	"encoding/json"
	"errors"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/controlplane/controllers/history"
)

var dsKind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// Patch is the revision data of a DaemonSet's template, as upstream records it (and
// `kubectl rollout undo daemonset` applies it): {"spec":{"template":{...,"$patch":"replace"}}}.
func Patch(ds *appsv1.DaemonSet) ([]byte, error) {
	b, err := json.Marshal(ds)
	if err != nil {
		return nil, err
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	tmpl := raw["spec"].(map[string]any)["template"].(map[string]any)
	tmpl["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": tmpl}})
}

// snapshot keeps the DaemonSet's ControllerRevisions as upstream does: one per template
// it has run, named <ds>-<hash> and labelled with the hash its pods carry; the current
// template's revision is the highest (a rollback renumbers the old one); revisions no pod
// runs beyond revisionHistoryLimit are deleted.
func (c *Controller) snapshot(ctx context.Context, ds *appsv1.DaemonSet, hash string, pods []*corev1.Pod) error {
	if c.revisions == nil {
		return nil
	}
	patch, err := Patch(ds)
	if err != nil {
		return err
	}
	all, err := c.revisions.ControllerRevisions(ds.Namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	var owned []*appsv1.ControllerRevision
	for _, r := range all {
		if ref := metav1.GetControllerOf(r); ref != nil && ref.UID == ds.UID {
			owned = append(owned, r)
		}
	}
	history.Sort(owned)
	next := history.Next(owned)
	var current *appsv1.ControllerRevision
	for _, r := range owned {
		if string(r.Data.Raw) == string(patch) {
			current = r
		}
	}
	switch {
	case current == nil:
		rev := &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{Name: history.Name(ds.Name, hash), Namespace: ds.Namespace,
				Labels:          withLabel(ds.Spec.Template.Labels, HashLabel, hash),
				Annotations:     ds.Annotations,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, dsKind)}},
			Data: runtime.RawExtension{Raw: patch}, Revision: next,
		}
		created, err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Create(ctx, rev, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil // a stale cache; the next sync sees it
		}
		if err != nil {
			return err
		}
		current = created
	case current.Revision < next-1:
		cp := current.DeepCopy()
		cp.Revision = next
		if _, err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Update(ctx, cp, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	live := map[string]bool{current.Name: true}
	inUse := map[string]bool{}
	for _, p := range pods {
		inUse[p.Labels[HashLabel]] = true
	}
	for _, r := range owned {
		if inUse[r.Labels[HashLabel]] {
			live[r.Name] = true
		}
	}
	var errs []error
	for _, r := range history.ToTruncate(owned, live, ptr.Deref(ds.Spec.RevisionHistoryLimit, 10)) {
		if err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func withLabel(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for a, b := range m {
		out[a] = b
	}
	out[k] = v
	return out
}
