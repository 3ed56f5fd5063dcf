// Package quota holds the ResourceQuota evaluators of the resources skiff serves, for
// k8s.io/apiserver's ResourceQuota admission plugin and for the quota controller: pods
// (compute resources by requests and limits, the Terminating, NotTerminating, BestEffort,
// NotBestEffort, PriorityClass and CrossNamespacePodAffinity scopes), services (node ports,
// load balancers), persistent volume claims (storage, per StorageClass too) and object
// counts for the rest, charging what upstream's evaluators charge.
package quota

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/clock"
)

// CountedResources are the resources whose objects are counted ("count/<resource>.<group>",
// and the legacy names for the core ones).
var CountedResources = []schema.GroupVersionResource{
	corev1.SchemeGroupVersion.WithResource("configmaps"),
	corev1.SchemeGroupVersion.WithResource("secrets"),
	corev1.SchemeGroupVersion.WithResource("replicationcontrollers"),
	corev1.SchemeGroupVersion.WithResource("resourcequotas"),
	{Group: "apps", Version: "v1", Resource: "deployments"},
	{Group: "apps", Version: "v1", Resource: "replicasets"},
	{Group: "apps", Version: "v1", Resource: "statefulsets"},
	{Group: "apps", Version: "v1", Resource: "daemonsets"},
	{Group: "batch", Version: "v1", Resource: "jobs"},
	{Group: "batch", Version: "v1", Resource: "cronjobs"},
}

// legacyNames are the bare names upstream also quotas core objects by.
var legacyNames = map[string]corev1.ResourceName{
	"configmaps": corev1.ResourceConfigMaps, "secrets": corev1.ResourceSecrets,
	"replicationcontrollers": corev1.ResourceReplicationControllers, "resourcequotas": corev1.ResourceQuotas,
}

// Evaluators returns an evaluator for every resource skiff quotas. listerFor gives each
// resource's lister (the controller's informers, or admission's); clk dates terminations.
func Evaluators(listerFor quota.ListerForResourceFunc, clk clock.Clock) []quota.Evaluator {
	out := []quota.Evaluator{newPodEvaluator(listerFor, clk), newServiceEvaluator(listerFor), newClaimEvaluator(listerFor)}
	for _, gvr := range CountedResources {
		var list generic.ListFuncByNamespace
		if listerFor != nil {
			list = generic.ListResourceUsingListerFunc(listerFor, gvr)
		}
		out = append(out, generic.NewObjectCountEvaluator(gvr.GroupResource(), list, legacyNames[gvr.Resource]))
	}
	return out
}

// evaluator is the part pods, services and claims share.
type evaluator struct {
	gr        schema.GroupResource
	list      generic.ListFuncByNamespace
	resources []corev1.ResourceName
	usage     func(runtime.Object) (corev1.ResourceList, error)
	scope     generic.MatchesScopeFunc
}

func newEvaluator(listerFor quota.ListerForResourceFunc, gvr schema.GroupVersionResource, resources []corev1.ResourceName,
	usage func(runtime.Object) (corev1.ResourceList, error), scope generic.MatchesScopeFunc) evaluator {
	e := evaluator{gr: gvr.GroupResource(), resources: resources, usage: usage, scope: scope}
	if listerFor != nil {
		e.list = generic.ListResourceUsingListerFunc(listerFor, gvr)
	}
	if e.scope == nil {
		e.scope = generic.MatchesNoScopeFunc
	}
	return e
}

func (e evaluator) GroupResource() schema.GroupResource { return e.gr }

func (e evaluator) Matches(q *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	return generic.Matches(q, item, e.MatchingResources, e.scope)
}

// MatchingResources is the input's resources this evaluator charges, by name or by a
// prefix such as "<class>.storageclass.storage.k8s.io/".
func (e evaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	known := sets.New(e.resources...)
	var out []corev1.ResourceName
	for _, r := range input {
		if known.Has(r) || (e.gr.Resource == "persistentvolumeclaims" && strings.Contains(string(r), storageClassSuffix)) ||
			(e.gr.Resource == "pods" && podExtendedQuota(r)) ||
			string(r) == "count/"+e.gr.Resource || string(r) == "count/"+e.gr.Resource+"."+e.gr.Group {
			out = append(out, r)
		}
	}
	return out
}

func (e evaluator) MatchingScopes(item runtime.Object, scopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	var out []corev1.ScopedResourceSelectorRequirement
	for _, s := range scopes {
		ok, err := e.scope(s, item)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// UncoveredQuotaScopes is the limited scopes no matched quota scope covers (by name).
func (e evaluator) UncoveredQuotaScopes(limited, matched []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	var out []corev1.ScopedResourceSelectorRequirement
	for _, l := range limited {
		covered := false
		for _, m := range matched {
			covered = covered || m.ScopeName == l.ScopeName
		}
		if !covered {
			out = append(out, l)
		}
	}
	return out, nil
}

func (e evaluator) Usage(item runtime.Object) (corev1.ResourceList, error) { return e.usage(item) }

func (e evaluator) UsageStats(o quota.UsageStatsOptions) (quota.UsageStats, error) {
	if e.list == nil {
		return quota.UsageStats{}, fmt.Errorf("no lister for %s", e.gr)
	}
	return generic.CalculateUsageStats(o, e.list, e.scope, e.usage)
}

func one() resource.Quantity { return *resource.NewQuantity(1, resource.DecimalSI) }

// --- pods ---

type podEvaluator struct {
	evaluator
}

var podResources = []corev1.ResourceName{corev1.ResourcePods, "count/pods", corev1.ResourceCPU, corev1.ResourceMemory,
	corev1.ResourceEphemeralStorage, corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage}

func newPodEvaluator(listerFor quota.ListerForResourceFunc, clk clock.Clock) quota.Evaluator {
	return podEvaluator{newEvaluator(listerFor, corev1.SchemeGroupVersion.WithResource("pods"), podResources,
		func(o runtime.Object) (corev1.ResourceList, error) { return PodUsage(o, clk) }, podMatchesScope)}
}

// Handles pod creations, and updates that move a pod between the Terminating scopes.
func (podEvaluator) Handles(a admission.Attributes) bool {
	if a.GetSubresource() != "" {
		return false
	}
	if a.GetOperation() == admission.Update {
		n, ok1 := a.GetObject().(*corev1.Pod)
		o, ok2 := a.GetOldObject().(*corev1.Pod)
		return ok1 && ok2 && isTerminating(n) != isTerminating(o)
	}
	return a.GetOperation() == admission.Create
}

// Constraints is upstream's backward-compatible rule: quotaing cpu or memory makes every
// container state that resource.
func (podEvaluator) Constraints(required []corev1.ResourceName, item runtime.Object) error {
	pod, ok := item.(*corev1.Pod)
	if !ok {
		return fmt.Errorf("expected a pod, got %T", item)
	}
	check := sets.New[corev1.ResourceName](corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory,
		corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory).Intersection(sets.New(required...))
	missing := map[corev1.ResourceName]sets.Set[string]{}
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range cs {
			have := sets.New[corev1.ResourceName]()
			for r := range computeUsage(c.Resources.Requests, c.Resources.Limits) {
				have.Insert(r)
			}
			for r := range check.Difference(have) {
				if missing[r] == nil {
					missing[r] = sets.New[string]()
				}
				missing[r].Insert(c.Name)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var names []string
	for r := range missing {
		names = append(names, string(r))
	}
	sort.Strings(names)
	var parts []string
	for _, r := range names {
		parts = append(parts, fmt.Sprintf("%s for: %s", r, strings.Join(sets.List(missing[corev1.ResourceName(r)]), ",")))
	}
	return fmt.Errorf("must specify %s", strings.Join(parts, "; "))
}

// computeUsage is what requests and limits charge, under both of upstream's names.
func computeUsage(requests, limits corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourcePods: one()}
	for name, q := range requests {
		switch {
		case isExtendedResource(name):
			// Extended resources are quotaed by their requests only, as upstream.
			out[corev1.DefaultResourceRequestsPrefix+name] = q
		case strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
			out[name], out[corev1.ResourceRequestsHugePagesPrefix+name[len(corev1.ResourceHugePagesPrefix):]] = q, q
		}
	}
	for _, r := range []struct{ name, req, lim corev1.ResourceName }{
		{corev1.ResourceCPU, corev1.ResourceRequestsCPU, corev1.ResourceLimitsCPU},
		{corev1.ResourceMemory, corev1.ResourceRequestsMemory, corev1.ResourceLimitsMemory},
		{corev1.ResourceEphemeralStorage, corev1.ResourceRequestsEphemeralStorage, corev1.ResourceLimitsEphemeralStorage},
	} {
		if q, ok := requests[r.name]; ok {
			out[r.name], out[r.req] = q, q
		}
		if q, ok := limits[r.name]; ok {
			out[r.lim] = q
		}
	}
	return out
}

// isExtendedResource says whether a container resource is an extended one (example.com/dongle):
// a domain-qualified name outside kubernetes.io.
func isExtendedResource(name corev1.ResourceName) bool {
	domain, _, ok := strings.Cut(string(name), "/")
	if !ok || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return domain != "kubernetes.io" && !strings.HasSuffix(domain, ".kubernetes.io")
}

// podExtendedQuota says whether a quota resource is charged by pods beyond the fixed ones:
// requests of an extended resource, and huge pages.
func podExtendedQuota(r corev1.ResourceName) bool {
	if rest, ok := strings.CutPrefix(string(r), corev1.DefaultResourceRequestsPrefix); ok && isExtendedResource(corev1.ResourceName(rest)) {
		return true
	}
	return strings.HasPrefix(string(r), corev1.ResourceHugePagesPrefix) || strings.HasPrefix(string(r), corev1.ResourceRequestsHugePagesPrefix)
}

// PodUsage is what a pod charges: its object count always; its compute resources (and the
// "pods" count) while it is neither finished nor past its deletion grace.
func PodUsage(item runtime.Object, clk clock.Clock) (corev1.ResourceList, error) {
	pod, ok := item.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("expected a pod, got %T", item)
	}
	out := corev1.ResourceList{"count/pods": one()}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return out, nil
	}
	// A pod stuck terminating (its node lost) stops being charged after its grace, as upstream.
	if pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil {
		if clk.Now().After(pod.DeletionTimestamp.Add(time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second)) {
			return out, nil
		}
	}
	return quota.Add(out, computeUsage(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}),
		resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{}))), nil
}

func isTerminating(p *corev1.Pod) bool {
	return p.Spec.ActiveDeadlineSeconds != nil && *p.Spec.ActiveDeadlineSeconds >= 0
}

func isBestEffort(p *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for _, c := range cs {
			for _, rl := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
				for r, q := range rl {
					if (r == corev1.ResourceCPU || r == corev1.ResourceMemory) && !q.IsZero() {
						return false
					}
				}
			}
		}
	}
	return true
}

func podMatchesScope(s corev1.ScopedResourceSelectorRequirement, item runtime.Object) (bool, error) {
	pod, ok := item.(*corev1.Pod)
	if !ok {
		return false, fmt.Errorf("expected a pod, got %T", item)
	}
	switch s.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return isTerminating(pod), nil
	case corev1.ResourceQuotaScopeNotTerminating:
		return !isTerminating(pod), nil
	case corev1.ResourceQuotaScopeBestEffort:
		return isBestEffort(pod), nil
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !isBestEffort(pod), nil
	case corev1.ResourceQuotaScopePriorityClass:
		if s.Operator == corev1.ScopeSelectorOpExists {
			return pod.Spec.PriorityClassName != "", nil
		}
		sel, err := scopeSelector(s)
		if err != nil {
			return false, err
		}
		set := labels.Set{}
		if pod.Spec.PriorityClassName != "" {
			set[string(corev1.ResourceQuotaScopePriorityClass)] = pod.Spec.PriorityClassName
		}
		return sel.Matches(set), nil
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return crossNamespaceAffinity(pod), nil
	}
	return false, nil
}

// scopeSelector turns a scope selector requirement into a label selector on the scope's name.
func scopeSelector(s corev1.ScopedResourceSelectorRequirement) (labels.Selector, error) {
	ops := map[corev1.ScopeSelectorOperator]selection.Operator{corev1.ScopeSelectorOpIn: selection.In, corev1.ScopeSelectorOpNotIn: selection.NotIn,
		corev1.ScopeSelectorOpExists: selection.Exists, corev1.ScopeSelectorOpDoesNotExist: selection.DoesNotExist}
	op, ok := ops[s.Operator]
	if !ok {
		return nil, fmt.Errorf("%q is not a valid scope selector operator", s.Operator)
	}
	r, err := labels.NewRequirement(string(s.ScopeName), op, s.Values)
	if err != nil {
		return nil, err
	}
	return labels.NewSelector().Add(*r), nil
}

func crossNamespaceAffinity(p *corev1.Pod) bool {
	a := p.Spec.Affinity
	if a == nil {
		return false
	}
	var terms []corev1.PodAffinityTerm
	if a.PodAffinity != nil {
		terms = append(terms, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	if a.PodAntiAffinity != nil {
		terms = append(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	for _, t := range terms {
		if len(t.Namespaces) > 0 || t.NamespaceSelector != nil {
			return true
		}
	}
	return false
}

// --- services ---

type serviceEvaluator struct{ evaluator }

func newServiceEvaluator(listerFor quota.ListerForResourceFunc) quota.Evaluator {
	return serviceEvaluator{newEvaluator(listerFor, corev1.SchemeGroupVersion.WithResource("services"),
		[]corev1.ResourceName{corev1.ResourceServices, "count/services", corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers},
		ServiceUsage, nil)}
}

// Handles service creations and updates (a type change charges node ports).
func (serviceEvaluator) Handles(a admission.Attributes) bool {
	return a.GetSubresource() == "" && (a.GetOperation() == admission.Create || a.GetOperation() == admission.Update)
}

func (serviceEvaluator) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }

// ServiceUsage is one service, its node ports (NodePort and LoadBalancer types) and one
// load balancer for the LoadBalancer type.
func ServiceUsage(item runtime.Object) (corev1.ResourceList, error) {
	svc, ok := item.(*corev1.Service)
	if !ok {
		return nil, fmt.Errorf("expected a service, got %T", item)
	}
	out := corev1.ResourceList{corev1.ResourceServices: one(), "count/services": one()}
	all := *resource.NewQuantity(int64(len(svc.Spec.Ports)), resource.DecimalSI)
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		out[corev1.ResourceServicesNodePorts] = all
	case corev1.ServiceTypeLoadBalancer:
		out[corev1.ResourceServicesLoadBalancers] = one()
		if svc.Spec.AllocateLoadBalancerNodePorts == nil || *svc.Spec.AllocateLoadBalancerNodePorts {
			out[corev1.ResourceServicesNodePorts] = all
		} else {
			// Without allocated node ports, only the ports that ask for one count.
			n := int64(0)
			for _, p := range svc.Spec.Ports {
				if p.NodePort != 0 {
					n++
				}
			}
			out[corev1.ResourceServicesNodePorts] = *resource.NewQuantity(n, resource.DecimalSI)
		}
	}
	return out, nil
}

// --- persistent volume claims ---

// storageClassSuffix prefixes per-class claim resources: <class>.storageclass.storage.k8s.io/requests.storage.
const storageClassSuffix = ".storageclass.storage.k8s.io/"

type claimEvaluator struct{ evaluator }

func newClaimEvaluator(listerFor quota.ListerForResourceFunc) quota.Evaluator {
	return claimEvaluator{newEvaluator(listerFor, corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"),
		[]corev1.ResourceName{corev1.ResourcePersistentVolumeClaims, "count/persistentvolumeclaims", corev1.ResourceRequestsStorage},
		ClaimUsage, nil)}
}

// Handles claim creations and updates (a resize charges storage).
func (claimEvaluator) Handles(a admission.Attributes) bool {
	return a.GetSubresource() == "" && (a.GetOperation() == admission.Create || a.GetOperation() == admission.Update)
}

func (claimEvaluator) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }

// ClaimUsage is one claim and its requested storage, also under its class's names.
func ClaimUsage(item runtime.Object) (corev1.ResourceList, error) {
	pvc, ok := item.(*corev1.PersistentVolumeClaim)
	if !ok {
		return nil, fmt.Errorf("expected a persistent volume claim, got %T", item)
	}
	out := corev1.ResourceList{corev1.ResourcePersistentVolumeClaims: one(), "count/persistentvolumeclaims": one()}
	class := ""
	if pvc.Spec.StorageClassName != nil {
		class = *pvc.Spec.StorageClassName
	}
	if class != "" {
		out[corev1.ResourceName(class+storageClassSuffix+string(corev1.ResourcePersistentVolumeClaims))] = one()
	}
	if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		out[corev1.ResourceRequestsStorage] = q
		if class != "" {
			out[corev1.ResourceName(class+storageClassSuffix+string(corev1.ResourceRequestsStorage))] = q
		}
	}
	return out, nil
}
