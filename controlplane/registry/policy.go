package registry

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/controlplane/controllers/podutil"
	"github.com/skiff-sh/skiff/controlplane/printers"
	"github.com/skiff-sh/skiff/controlplane/validation"
)

// podDisruptionBudgets serves policy/v1 PodDisruptionBudgets (+status).
func podDisruptionBudgets(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return only(serveKind(opts, kind[*policyv1.PodDisruptionBudget]{
		resource: resource{gr: policyv1.Resource("poddisruptionbudgets"), singular: "poddisruptionbudget",
			newObj: func() runtime.Object { return &policyv1.PodDisruptionBudget{} }, newList: func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} },
			printer: printers.PodDisruptionBudgets, shortNames: []string{"pdb"}},
		namespaced: true, status: true,
		validate: validation.PodDisruptionBudget,
	}))
}

// EvictionREST serves pods/eviction: a pod is deleted only if the PodDisruptionBudget that
// covers it allows one more disruption, which the eviction takes (kubectl drain's path).
type EvictionREST struct {
	pods *genericregistry.Store
	// podStatus marks an evicted pod DisruptionTarget before it is deleted.
	podStatus *StatusREST
	// pdbs reads the budgets; pdbStatus writes their status.
	pdbs      *genericregistry.Store
	pdbStatus *StatusREST
	now       func() time.Time
}

var (
	_ rest.NamedCreater             = &EvictionREST{}
	_ rest.GroupVersionKindProvider = &EvictionREST{}
)

// New implements rest.Storage.
func (r *EvictionREST) New() runtime.Object { return &policyv1.Eviction{} }

// Destroy implements rest.Storage.
func (r *EvictionREST) Destroy() {}

// GroupVersionKind is policy/v1 Eviction, whatever the group serving pods.
func (r *EvictionREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return policyv1.SchemeGroupVersion.WithKind("Eviction")
}

// EvictionVerdict is what a request to evict a pod gets, given the budgets covering it.
type EvictionVerdict struct {
	// Allow deletes the pod; Budget, if set, is the budget whose disruption it takes.
	Allow  bool
	Budget *policyv1.PodDisruptionBudget
	// Refusal is the error when not allowed.
	Refusal error
}

// DecideEviction applies upstream's eviction rules without I/O: a pod that is already
// terminal, pending or being deleted goes without a budget; a pod covered by more than one
// budget cannot be evicted; a budget not yet observed by the disruption controller, or
// without a disruption to spare, refuses with 429; an unready pod may go when the budget is
// already met (IfHealthyBudget) or always (AlwaysAllow). When allowed through a budget, the
// returned copy has one disruption less and the pod among its disruptedPods.
func DecideEviction(pod *corev1.Pod, pdbs []policyv1.PodDisruptionBudget, now time.Time) EvictionVerdict {
	switch {
	case pod.DeletionTimestamp != nil, pod.Status.Phase == corev1.PodSucceeded, pod.Status.Phase == corev1.PodFailed, pod.Status.Phase == corev1.PodPending:
		return EvictionVerdict{Allow: true}
	}
	var covering []policyv1.PodDisruptionBudget
	for _, pdb := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || pdb.Spec.Selector == nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		covering = append(covering, pdb)
	}
	switch len(covering) {
	case 0:
		return EvictionVerdict{Allow: true}
	case 1:
	default:
		return EvictionVerdict{Refusal: apierrors.NewInternalError(fmt.Errorf("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."))}
	}
	pdb := covering[0].DeepCopy()
	if pdb.Status.ObservedGeneration < pdb.Generation {
		return EvictionVerdict{Refusal: tooMany(fmt.Sprintf("The disruption budget %s is still being processed by the server.", pdb.Name))}
	}
	if !podutil.IsReady(pod) {
		if p := pdb.Spec.UnhealthyPodEvictionPolicy; p != nil && *p == policyv1.AlwaysAllow {
			return EvictionVerdict{Allow: true}
		}
		if pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0 {
			return EvictionVerdict{Allow: true}
		}
	}
	if pdb.Status.DisruptionsAllowed <= 0 {
		return EvictionVerdict{Refusal: tooMany(fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently",
			pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy))}
	}
	if len(pdb.Status.DisruptedPods) > 2000 {
		return EvictionVerdict{Refusal: apierrors.NewForbidden(policyv1.Resource("poddisruptionbudgets"), pdb.Name, fmt.Errorf("DisruptedPods map too big - too many evictions not confirmed by PDB controller"))}
	}
	pdb.Status.DisruptionsAllowed--
	if pdb.Status.DisruptionsAllowed == 0 {
		for i := range pdb.Status.Conditions {
			if pdb.Status.Conditions[i].Type == policyv1.DisruptionAllowedCondition {
				pdb.Status.Conditions[i].Status, pdb.Status.Conditions[i].Reason = metav1.ConditionFalse, policyv1.InsufficientPodsReason
				pdb.Status.Conditions[i].LastTransitionTime = metav1.NewTime(now)
			}
		}
	}
	if pdb.Status.DisruptedPods == nil {
		pdb.Status.DisruptedPods = map[string]metav1.Time{}
	}
	pdb.Status.DisruptedPods[pod.Name] = metav1.NewTime(now)
	return EvictionVerdict{Allow: true, Budget: pdb}
}

// tooMany is the 429 an eviction gets when a budget refuses it, with upstream's cause.
func tooMany(msg string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: msg})
	return err
}

// Create evicts the pod named in the URL.
func (r *EvictionREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	ev, ok := obj.(*policyv1.Eviction)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not an Eviction object: %T", obj))
	}
	if ev.Name != name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Eviction object")
	}
	if createValidation != nil {
		if err := createValidation(ctx, ev.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	del := &metav1.DeleteOptions{}
	if ev.DeleteOptions != nil {
		del = ev.DeleteOptions.DeepCopy()
	}
	if len(options.DryRun) > 0 {
		del.DryRun = options.DryRun
	}
	now := time.Now
	if r.now != nil {
		now = r.now
	}
	// A budget's status changes under concurrent evictions: retry on conflict, as upstream.
	for attempt := 0; ; attempt++ {
		obj, err := r.pods.Get(ctx, name, &metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		pod := obj.(*corev1.Pod)
		list, err := r.pdbs.List(ctx, &metainternalversion.ListOptions{})
		if err != nil {
			return nil, err
		}
		v := DecideEviction(pod, list.(*policyv1.PodDisruptionBudgetList).Items, now())
		if !v.Allow {
			return nil, v.Refusal
		}
		if v.Budget != nil && len(del.DryRun) == 0 {
			_, _, err := r.pdbStatus.Update(ctx, v.Budget.Name, rest.DefaultUpdatedObjectInfo(v.Budget), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			if apierrors.IsConflict(err) && attempt < 5 {
				continue
			}
			if err != nil {
				return nil, err
			}
		}
		if del.Preconditions == nil {
			del.Preconditions = &metav1.Preconditions{UID: &pod.UID}
		}
		// As upstream: a running pod is marked as disrupted by the eviction before it goes,
		// so a Job's podFailurePolicy can tell an eviction from a failure.
		if r.podStatus != nil && len(del.DryRun) == 0 && pod.DeletionTimestamp == nil &&
			pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			marked := pod.DeepCopy()
			setCondition(&marked.Status, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting", LastTransitionTime: metav1.NewTime(now())})
			// No retry here: the budget's disruption is already taken.
			if _, _, err := r.podStatus.Update(ctx, name, rest.DefaultUpdatedObjectInfo(marked), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{}); err != nil {
				return nil, err
			}
		}
		if _, _, err := r.pods.Delete(ctx, name, rest.ValidateAllObjectFunc, del); err != nil {
			return nil, err
		}
		return &metav1.Status{Status: metav1.StatusSuccess, Code: 201}, nil
	}
}
