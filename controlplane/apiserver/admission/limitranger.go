package admission

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/admission"
	resourcehelper "k8s.io/component-helpers/resource"
)

// LimitRangerAnnotation records on a pod which defaults LimitRanger set.
const LimitRangerAnnotation = "kubernetes.io/limit-ranger"

// LimitRanger is upstream's plugin of that name: a new pod's containers get the default
// requests and limits of their namespace's LimitRanges, and pods and claims outside a
// range's min, max or limit/request ratio are refused, with upstream's messages.
type LimitRanger struct {
	// List returns a namespace's LimitRanges.
	List func(ctx context.Context, namespace string) ([]*corev1.LimitRange, error)
}

// Handles implements admission.Interface.
func (LimitRanger) Handles(op admission.Operation) bool {
	return op == admission.Create || op == admission.Update
}

func (l LimitRanger) ranges(ctx context.Context, a admission.Attributes) ([]*corev1.LimitRange, error) {
	if l.List == nil || a.GetNamespace() == "" || a.GetSubresource() != "" {
		return nil, nil
	}
	gr := a.GetResource().GroupResource()
	if gr != corev1.Resource("pods") && gr != corev1.Resource("persistentvolumeclaims") {
		return nil, nil
	}
	if gr == corev1.Resource("pods") && a.GetOperation() != admission.Create {
		return nil, nil
	}
	lrs, err := l.List(ctx, a.GetNamespace())
	if err != nil {
		return nil, admission.NewForbidden(a, fmt.Errorf("unable to %s %v at this time because there was an error enforcing limit ranges", a.GetOperation(), a.GetResource()))
	}
	return lrs, nil
}

// Admit implements admission.MutationInterface: the Container defaults.
func (l LimitRanger) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	lrs, err := l.ranges(ctx, a)
	if err != nil || len(lrs) == 0 {
		return err
	}
	pod, ok := a.GetObject().(*corev1.Pod)
	if !ok {
		return nil
	}
	for _, lr := range lrs {
		ApplyLimitRangeDefaults(lr, pod)
	}
	return nil
}

// ApplyLimitRangeDefaults gives each container the range's default requests and limits it
// does not state, and records what it set in the pod's kubernetes.io/limit-ranger annotation.
func ApplyLimitRangeDefaults(lr *corev1.LimitRange, pod *corev1.Pod) {
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	for _, item := range lr.Spec.Limits {
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		for k, v := range item.DefaultRequest {
			requests[k] = v.DeepCopy()
		}
		for k, v := range item.Default {
			limits[k] = v.DeepCopy()
		}
	}
	var notes []string
	merge := func(c *corev1.Container, kind string) {
		set := func(have *corev1.ResourceList, defaults corev1.ResourceList) []string {
			if *have == nil {
				*have = corev1.ResourceList{}
			}
			var names []string
			for k, v := range defaults {
				if _, ok := (*have)[k]; !ok {
					(*have)[k] = v.DeepCopy()
					names = append(names, string(k))
				}
			}
			sort.Strings(names)
			return names
		}
		if r := set(&c.Resources.Requests, requests); len(r) > 0 {
			notes = append(notes, strings.Join(r, ", ")+" request for "+kind+" "+c.Name)
		}
		if r := set(&c.Resources.Limits, limits); len(r) > 0 {
			notes = append(notes, strings.Join(r, ", ")+" limit for "+kind+" "+c.Name)
		}
	}
	for i := range pod.Spec.Containers {
		merge(&pod.Spec.Containers[i], "container")
	}
	for i := range pod.Spec.InitContainers {
		merge(&pod.Spec.InitContainers[i], "init container")
	}
	if len(notes) > 0 {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[LimitRangerAnnotation] = "LimitRanger plugin set: " + strings.Join(notes, "; ")
	}
}

// Validate implements admission.ValidationInterface: min, max and ratio.
func (l LimitRanger) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	lrs, err := l.ranges(ctx, a)
	if err != nil || len(lrs) == 0 {
		return err
	}
	var errs []error
	for _, lr := range lrs {
		switch o := a.GetObject().(type) {
		case *corev1.Pod:
			errs = append(errs, CheckPodLimits(lr, o)...)
		case *corev1.PersistentVolumeClaim:
			errs = append(errs, CheckClaimLimits(lr, o)...)
		}
	}
	if len(errs) > 0 {
		return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), utilerrors.NewAggregate(errs))
	}
	return nil
}

// CheckPodLimits is the range's Container and Pod constraints a pod breaks.
func CheckPodLimits(lr *corev1.LimitRange, pod *corev1.Pod) []error {
	var errs []error
	check := func(item corev1.LimitRangeItem, requests, limits corev1.ResourceList) {
		t := string(item.Type)
		for k, v := range item.Min {
			errs = appendErr(errs, minConstraint(t, k, v, requests, limits))
		}
		for k, v := range item.Max {
			errs = appendErr(errs, maxConstraint(t, k, v, requests, limits, true))
		}
		for k, v := range item.MaxLimitRequestRatio {
			errs = appendErr(errs, ratioConstraint(t, k, v, requests, limits))
		}
	}
	for _, item := range lr.Spec.Limits {
		switch item.Type {
		case corev1.LimitTypeContainer:
			for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
				for _, c := range cs {
					check(item, c.Resources.Requests, c.Resources.Limits)
				}
			}
		case corev1.LimitTypePod:
			check(item, resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}), resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{}))
		}
	}
	return errs
}

// CheckClaimLimits is the range's PersistentVolumeClaim constraints a claim breaks.
func CheckClaimLimits(lr *corev1.LimitRange, pvc *corev1.PersistentVolumeClaim) []error {
	var errs []error
	for _, item := range lr.Spec.Limits {
		if item.Type != corev1.LimitTypePersistentVolumeClaim {
			continue
		}
		t := string(item.Type)
		for k, v := range item.Min {
			errs = appendErr(errs, minConstraint(t, k, v, pvc.Spec.Resources.Requests, nil))
		}
		for k, v := range item.Max {
			errs = appendErr(errs, maxConstraint(t, k, v, pvc.Spec.Resources.Requests, nil, false))
		}
	}
	return errs
}

func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}

func minConstraint(t string, name corev1.ResourceName, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	switch {
	case !hasReq:
		return fmt.Errorf("minimum %s usage per %s is %s.  No request is specified", name, t, enforced.String())
	case req.Cmp(enforced) < 0:
		return fmt.Errorf("minimum %s usage per %s is %s, but request is %s", name, t, enforced.String(), req.String())
	case hasLim && lim.Cmp(enforced) < 0:
		return fmt.Errorf("minimum %s usage per %s is %s, but limit is %s", name, t, enforced.String(), lim.String())
	}
	return nil
}

// maxConstraint checks the limit (pods) or, for claims (withLimit false), the request.
func maxConstraint(t string, name corev1.ResourceName, enforced resource.Quantity, requests, limits corev1.ResourceList, withLimit bool) error {
	req, hasReq := requests[name]
	if !withLimit {
		switch {
		case !hasReq:
			return fmt.Errorf("maximum %s usage per %s is %s.  No request is specified", name, t, enforced.String())
		case req.Cmp(enforced) > 0:
			return fmt.Errorf("maximum %s usage per %s is %s, but request is %s", name, t, enforced.String(), req.String())
		}
		return nil
	}
	lim, hasLim := limits[name]
	switch {
	case !hasLim:
		return fmt.Errorf("maximum %s usage per %s is %s.  No limit is specified", name, t, enforced.String())
	case lim.Cmp(enforced) > 0:
		return fmt.Errorf("maximum %s usage per %s is %s, but limit is %s", name, t, enforced.String(), lim.String())
	case hasReq && req.Cmp(enforced) > 0:
		return fmt.Errorf("maximum %s usage per %s is %s, but request is %s", name, t, enforced.String(), req.String())
	}
	return nil
}

func ratioConstraint(t string, name corev1.ResourceName, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	if !hasReq || req.IsZero() {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no request is specified or request is 0", name, t, enforced.String())
	}
	if !hasLim || lim.IsZero() {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no limit is specified or limit is 0", name, t, enforced.String())
	}
	ratio := float64(lim.MilliValue()) / float64(req.MilliValue())
	if ratio*1000 > float64(enforced.MilliValue()) {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but provided ratio is %f", name, t, enforced.String(), ratio)
	}
	return nil
}
