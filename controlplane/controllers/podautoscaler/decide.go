// Package podautoscaler is the HorizontalPodAutoscaler controller: every 15 s it reads each
// HPA's target through the scale subresource, the target's pods from the informer and their
// CPU and memory samples from the resource metrics API (metrics.k8s.io), and scales the
// target to keep the average utilization (or average value) at the HPA's target, as
// upstream does for Resource metrics.
//
// As upstream's replica calculator, a metric's usage ratio is applied to the pods it was
// measured over, not to the spec's count, and pods that have no sample yet (missing) or whose
// CPU sample is not trusted yet (pending, not ready, or started less than 5 minutes ago and
// not measured over a whole window since turning ready) damp the change instead of driving
// it: a scale-up counts them as idle and a scale-down counts missing ones as busy. The
// proposal is then stabilized and rate-limited as upstream: with no spec.behavior, the
// highest recommendation of the last 5 minutes and at most doubling (or 4 replicas) per sync;
// with one, its stabilization windows (scale-down's defaulting to 5 minutes) and its
// policies' limits over their periods; then bounded by minReplicas and maxReplicas. The
// recommendations and rescales this needs are kept in memory per HPA, as upstream.
//
// The decision functions (ResourceReplicas, Decide and History's) do no I/O; the
// controller feeds them. Metric types other than Resource are not supported and say so in
// the ScalingActive condition.
package podautoscaler

import (
	"errors"
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Decision is a sync's outcome: the replica count to set and the status to write.
type Decision struct {
	Desired int32
	// Reason says why Desired differs from the current count (for the event).
	Reason string
	Status autoscalingv2.HorizontalPodAutoscalerStatus
}

// Decide computes an HPA's desired replicas from the target's current count and what each
// metric proposes (indexed like spec.metrics), as upstream's reconcileAutoscaler. hist is
// the HPA's history, which it reads and adds the new recommendation to (nil: none); the
// caller records the rescale once it is made (History.RecordScale). It does no I/O.
func Decide(h *autoscalingv2.HorizontalPodAutoscaler, current int32, proposals []Proposal, hist *History, now time.Time) Decision {
	if hist == nil {
		hist = &History{}
	}
	st := *h.Status.DeepCopy()
	st.ObservedGeneration = ptr.To(h.Generation)
	st.CurrentReplicas = current
	minR := ptr.Deref(h.Spec.MinReplicas, 1)
	d := Decision{Desired: current}
	set := func(t autoscalingv2.HorizontalPodAutoscalerConditionType, c condition) {
		setCondition(&st, t, c.status, c.reason, c.message, now)
	}
	set(autoscalingv2.AbleToScale, condition{corev1.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale"})
	hist.start(current, now)
	switch {
	case current == 0:
		// Someone scaled the target to zero: that turns the HPA off until they scale it up.
		set(autoscalingv2.ScalingActive, condition{corev1.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero"})
		st.DesiredReplicas = 0
		d.Status = st
		return d
	case current > h.Spec.MaxReplicas:
		d.Desired, d.Reason = h.Spec.MaxReplicas, "Current number of replicas above Spec.MaxReplicas"
	case current < minR:
		d.Desired, d.Reason = minR, "Current number of replicas below Spec.MinReplicas"
	default:
		proposal, metricName, statuses, failure := combine(h, current, proposals)
		st.CurrentMetrics = statuses
		if failure != nil {
			// The last desired count stands, as upstream: nothing new is known.
			set(autoscalingv2.ScalingActive, *failure)
			d.Status = st
			return d
		}
		set(autoscalingv2.ScalingActive, condition{corev1.ConditionTrue, "ValidMetricFound",
			fmt.Sprintf("the HPA was able to successfully calculate a replica count from %s", metricName)})
		switch {
		case proposal > current:
			d.Reason = fmt.Sprintf("%s above target", metricName)
		case proposal < current:
			d.Reason = "All metrics below target"
		}
		desired, able, limited := hist.normalize(h, current, proposal, minR, now)
		set(autoscalingv2.AbleToScale, able)
		set(autoscalingv2.ScalingLimited, limited)
		d.Desired = desired
	}
	if d.Desired != current {
		set(autoscalingv2.AbleToScale, condition{corev1.ConditionTrue, "SucceededRescale", fmt.Sprintf("the HPA controller was able to update the target scale to %d", d.Desired)})
		t := metav1.NewTime(now)
		st.LastScaleTime = &t
	}
	st.DesiredReplicas = d.Desired
	d.Status = st
	return d
}

// combine is upstream's computeReplicasForMetrics: the largest count any metric proposes,
// the metrics' statuses (indexed like spec.metrics, as kubectl reads them; a failed metric's
// is empty), or the condition saying why there is no count. A metric that failed vetoes a
// scale-down (it might have asked for more) but not a scale-up.
func combine(h *autoscalingv2.HorizontalPodAutoscaler, current int32, proposals []Proposal) (int32, string, []autoscalingv2.MetricStatus, *condition) {
	specs := h.Spec.Metrics
	if len(specs) == 0 {
		return 0, "", nil, &condition{corev1.ConditionFalse, "FailedGetResourceMetric", "the HPA was unable to compute the replica count: no metrics to compute a replica count from"}
	}
	statuses := make([]autoscalingv2.MetricStatus, len(specs))
	var best int32
	name := ""
	invalid := 0
	var first *condition
	for i, m := range specs {
		reason, label := "", ""
		var p Proposal
		switch {
		case m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil:
			reason = "FailedGetResourceMetric"
			label = fmt.Sprintf("%s resource", m.Resource.Name)
			if m.Resource.Target.AverageValue == nil {
				label = fmt.Sprintf("%s resource utilization (percentage of request)", m.Resource.Name)
			}
			p = Proposal{Err: failed(m.Resource, errors.New("no metrics returned"))}
			if i < len(proposals) {
				p = proposals[i]
			}
		default:
			reason = map[autoscalingv2.MetricSourceType]string{
				autoscalingv2.ObjectMetricSourceType:            "FailedGetObjectMetric",
				autoscalingv2.PodsMetricSourceType:              "FailedGetPodsMetric",
				autoscalingv2.ExternalMetricSourceType:          "FailedGetExternalMetric",
				autoscalingv2.ContainerResourceMetricSourceType: "FailedGetContainerResourceMetric",
			}[m.Type]
			if reason == "" {
				reason = "InvalidMetricSourceType"
			}
			p = Proposal{Err: fmt.Errorf("metrics of type %s are not supported by skiff yet", m.Type)}
		}
		if p.Err != nil {
			invalid++
			if first == nil {
				first = &condition{corev1.ConditionFalse, reason, "the HPA was unable to compute the replica count: " + p.Err.Error()}
			}
			continue
		}
		statuses[i] = autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: m.Resource.Name, Current: p.Current}}
		if name == "" || p.Replicas > best {
			best, name = p.Replicas, label
		}
	}
	if invalid == len(specs) || (invalid > 0 && best < current) {
		return 0, "", statuses, first
	}
	return best, name, statuses, nil
}

func setCondition(st *autoscalingv2.HorizontalPodAutoscalerStatus, t autoscalingv2.HorizontalPodAutoscalerConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) {
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = metav1.NewTime(now)
		}
		c.Status, c.Reason, c.Message = status, reason, message
		return
	}
	st.Conditions = append(st.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{Type: t, Status: status, Reason: reason, Message: message,
		LastTransitionTime: metav1.NewTime(now)})
}
