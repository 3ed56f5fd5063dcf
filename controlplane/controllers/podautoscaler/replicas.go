package podautoscaler

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelpers "k8s.io/component-helpers/resource"
)

// Upstream's defaults of the kube-controller-manager flags that tune which CPU samples are
// trusted: a starting process often burns CPU (class loading, caches, JIT) that says nothing
// about the load it will serve, so a young pod's sample only counts once the pod is ready and
// a whole metric window has been measured since.
const (
	// cpuInitializationPeriod is --horizontal-pod-autoscaler-cpu-initialization-period.
	cpuInitializationPeriod = 5 * time.Minute
	// delayOfInitialReadinessStatus is --horizontal-pod-autoscaler-initial-readiness-delay:
	// past the initialization period an unready pod's sample is ignored only if the pod went
	// unready within this long of starting, i.e. it has never been ready.
	delayOfInitialReadinessStatus = 30 * time.Second
)

// defaultTolerance is --horizontal-pod-autoscaler-tolerance: how far the usage ratio may be
// from 1 before a metric proposes a different count.
const defaultTolerance = 0.1

// Tolerances are the usage ratio's dead band below and above 1.
type Tolerances struct{ Down, Up float64 }

func (t Tolerances) within(ratio float64) bool { return 1-t.Down <= ratio && ratio <= 1+t.Up }

// tolerancesFor is the default tolerance unless the HPA's behavior sets one per direction
// (upstream's HPAConfigurableTolerance, GA and always on since 1.37).
func tolerancesFor(h *autoscalingv2.HorizontalPodAutoscaler) Tolerances {
	t := Tolerances{Down: defaultTolerance, Up: defaultTolerance}
	if b := h.Spec.Behavior; b != nil {
		if b.ScaleDown != nil && b.ScaleDown.Tolerance != nil {
			t.Down = b.ScaleDown.Tolerance.AsApproximateFloat64()
		}
		if b.ScaleUp != nil && b.ScaleUp.Tolerance != nil {
			t.Up = b.ScaleUp.Tolerance.AsApproximateFloat64()
		}
	}
	return t
}

// PodUsage is one pod's sample from the resource metrics API.
type PodUsage struct {
	// Containers is each container's usage.
	Containers map[string]corev1.ResourceList
	// Timestamp is when the sample was taken and Window how long it was measured over (CPU
	// is a rate): the CPU readiness rule needs both.
	Timestamp time.Time
	Window    time.Duration
}

// Proposal is what one metric says: the replica count it asks for and its currentMetrics
// status, or why it cannot say.
type Proposal struct {
	Replicas int32
	Current  autoscalingv2.MetricValueStatus
	Err      error
}

// sample is a pod's usage of one resource, in milli-units.
type sample struct {
	value     int64
	timestamp time.Time
	window    time.Duration
}

// samplesOf sums each pod's containers' usage of res; a pod whose sample has no containers,
// or a container without res, has no usable sample (as upstream's metrics client).
func samplesOf(res corev1.ResourceName, usage map[string]PodUsage) map[string]sample {
	out := make(map[string]sample, len(usage))
	for name, u := range usage {
		if len(u.Containers) == 0 {
			continue
		}
		var sum int64
		ok := true
		for _, c := range u.Containers {
			q, found := c[res]
			if !found {
				ok = false
				break
			}
			sum += q.MilliValue()
		}
		if ok {
			out[name] = sample{value: sum, timestamp: u.Timestamp, window: u.Window}
		}
	}
	return out
}

// groups is the target's pods sorted by how their samples count.
type groups struct {
	// ready pods have a sample that is trusted as is.
	ready map[string]int64
	// unready pods are pending, or (for CPU) not ready or too young for their sample to
	// tell: they only count, as idle, against a scale-up.
	unready []string
	// missing pods are running but have no sample yet: they count as idle against a
	// scale-up and as fully busy against a scale-down, so that neither overshoots.
	missing []string
}

// groupPods is upstream's groupPods. Deleted and finished pods are left out altogether: they
// are going away and use nothing. Pods the metrics API knows but the lister does not are
// left out too (the lister is behind, or the pod is gone).
func groupPods(pods []*corev1.Pod, samples map[string]sample, res corev1.ResourceName, now time.Time) groups {
	g := groups{ready: map[string]int64{}}
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		if p.Status.Phase == corev1.PodPending {
			g.unready = append(g.unready, p.Name)
			continue
		}
		s, ok := samples[p.Name]
		if !ok {
			g.missing = append(g.missing, p.Name)
			continue
		}
		if res == corev1.ResourceCPU && cpuUnready(p, s, now) {
			g.unready = append(g.unready, p.Name)
			continue
		}
		g.ready[p.Name] = s.value
	}
	return g
}

// cpuUnready says whether a running pod's CPU sample is to be distrusted.
func cpuUnready(p *corev1.Pod, s sample, now time.Time) bool {
	var ready *corev1.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			ready = &p.Status.Conditions[i]
			break
		}
	}
	if ready == nil || p.Status.StartTime == nil {
		return true
	}
	start := p.Status.StartTime.Time
	if start.Add(cpuInitializationPeriod).After(now) {
		// Young: the sample must be from a ready pod and measured wholly after it turned ready.
		return ready.Status == corev1.ConditionFalse || s.timestamp.Before(ready.LastTransitionTime.Add(s.window))
	}
	// Old: only a pod that has never been ready is distrusted; one that was ready and
	// flapped is still using what it uses.
	return ready.Status == corev1.ConditionFalse && start.Add(delayOfInitialReadinessStatus).After(ready.LastTransitionTime.Time)
}

// podRequest is what a pod requests of res: its pod-level request when it has any, else
// the sum over its containers and restartable (sidecar) init containers, as upstream.
func podRequest(p *corev1.Pod, res corev1.ResourceName) (int64, error) {
	if resourcehelpers.IsPodLevelRequestsSet(p) {
		q, ok := resourcehelpers.PodRequests(p, resourcehelpers.PodResourcesOptions{})[res]
		if !ok {
			return 0, fmt.Errorf("missing pod-level request for %s in Pod %s", res, p.Name)
		}
		return q.MilliValue(), nil
	}
	containers := append([]corev1.Container{}, p.Spec.Containers...)
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			containers = append(containers, c)
		}
	}
	var sum int64
	for _, c := range containers {
		q, ok := c.Resources.Requests[res]
		if !ok {
			return 0, fmt.Errorf("missing request for %s in container %s of Pod %s", res, c.Name, p.Name)
		}
		sum += q.MilliValue()
	}
	return sum, nil
}

// ResourceReplicas is the replica count a Resource metric proposes for a target with
// current replicas, given the target's pods and their samples, as upstream's replica
// calculator (GetResourceReplicas for a utilization target, GetRawResourceReplicas for an
// average value): the usage ratio is applied to the pods it was measured over, and pods
// without a trusted sample are assumed to use whatever damps the change. now is only read
// to tell young pods. It does no I/O.
func ResourceReplicas(m *autoscalingv2.ResourceMetricSource, current int32, pods []*corev1.Pod, usage map[string]PodUsage, tol Tolerances, now time.Time) Proposal {
	t := m.Target
	if t.AverageValue == nil && t.AverageUtilization == nil {
		return Proposal{Err: errors.New("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set")}
	}
	fail := func(format string, args ...any) Proposal {
		return Proposal{Err: failed(m, fmt.Errorf(format, args...))}
	}
	if len(usage) == 0 {
		return fail("unable to get metrics for resource %s: no metrics returned from resource metrics API", m.Name)
	}
	if len(pods) == 0 {
		return fail("no pods returned by selector while calculating replica count")
	}
	g := groupPods(pods, samplesOf(m.Name, usage), m.Name, now)
	if len(g.ready) == 0 {
		return fail("did not receive metrics for targeted pods (pods might be unready)")
	}

	if t.AverageValue != nil {
		target := t.AverageValue.MilliValue()
		if target <= 0 {
			return fail("the target average value must be positive")
		}
		average := func(v map[string]int64) int64 {
			var sum int64
			for _, x := range v {
				sum += x
			}
			return sum / int64(len(v))
		}
		ratio := func(v map[string]int64) float64 { return float64(average(v)) / float64(target) }
		// A missing pod is assumed to use exactly the target on a scale-down.
		n := replicas(current, g, ratio, func(string) int64 { return target }, tol)
		q := quantity(m.Name, average(g.ready))
		return Proposal{Replicas: n, Current: autoscalingv2.MetricValueStatus{AverageValue: &q}}
	}

	target := *t.AverageUtilization
	if target <= 0 {
		return fail("the target utilization must be positive")
	}
	requests := make(map[string]int64, len(pods))
	for _, p := range pods {
		r, err := podRequest(p, m.Name)
		if err != nil {
			return fail("%w", err)
		}
		requests[p.Name] = r
	}
	// utilization is upstream's: a whole percentage, so the ratio (and the tolerance check)
	// works on the truncated figure the status reports.
	utilization := func(v map[string]int64) (int32, int64) {
		var used, requested int64
		for name, x := range v {
			used += x
			requested += requests[name]
		}
		if requested == 0 {
			return 0, 0
		}
		return int32(used * 100 / requested), used / int64(len(v))
	}
	var requested int64
	for name := range g.ready {
		requested += requests[name]
	}
	if requested == 0 {
		return fail("no metrics returned matched known pods")
	}
	ratio := func(v map[string]int64) float64 {
		u, _ := utilization(v)
		return float64(u) / float64(target)
	}
	// A missing pod is assumed to use all of its request on a scale-down (or the target,
	// when that is above 100%), so the missing pods damp it.
	fallback := func(name string) int64 { return requests[name] * int64(max(100, target)) / 100 }
	n := replicas(current, g, ratio, fallback, tol)
	pct, avg := utilization(g.ready)
	q := quantity(m.Name, avg)
	return Proposal{Replicas: n, Current: autoscalingv2.MetricValueStatus{AverageUtilization: &pct, AverageValue: &q}}
}

// failed is the error of a Resource metric that could not be computed, worded as upstream's.
func failed(m *autoscalingv2.ResourceMetricSource, err error) error {
	what := "utilization"
	if m.Target.AverageValue != nil {
		what = "usage"
	}
	return fmt.Errorf("failed to get %s %s: %w", m.Name, what, err)
}

// replicas is upstream's rule turning a usage ratio into a count. Over the ready pods alone,
// the ratio applies to their number. When some pods are missing, or unready ones would be
// ignored by a scale-up, the ratio is recomputed with them assumed idle (scale-up) or busy
// (scale-down, missing ones only); if that brings it within the tolerance or flips its
// direction the count stays, as it does when applying it to the larger number of pods would
// move the count against the ratio.
func replicas(current int32, g groups, ratioOf func(map[string]int64) float64, fallback func(string) int64, tol Tolerances) int32 {
	ratio := ratioOf(g.ready)
	scaleUpWithUnready := len(g.unready) > 0 && ratio > 1
	if !scaleUpWithUnready && len(g.missing) == 0 {
		if tol.within(ratio) {
			return current
		}
		return int32(math.Ceil(ratio * float64(len(g.ready))))
	}
	all := maps.Clone(g.ready)
	for _, name := range g.missing {
		switch {
		case ratio < 1:
			all[name] = fallback(name)
		case ratio > 1:
			all[name] = 0
		}
	}
	if scaleUpWithUnready {
		for _, name := range g.unready {
			all[name] = 0
		}
	}
	newRatio := ratioOf(all)
	if tol.within(newRatio) || (ratio < 1 && newRatio > 1) || (ratio > 1 && newRatio < 1) {
		return current
	}
	n := int32(math.Ceil(newRatio * float64(len(all))))
	if (newRatio < 1 && n > current) || (newRatio > 1 && n < current) {
		return current
	}
	return n
}

// quantity is a status value in the metrics API's format: memory in binary units, the rest
// decimal.
func quantity(res corev1.ResourceName, milli int64) resource.Quantity {
	format := resource.DecimalSI
	if res == corev1.ResourceMemory {
		format = resource.BinarySI
	}
	return *resource.NewMilliQuantity(milli, format)
}
