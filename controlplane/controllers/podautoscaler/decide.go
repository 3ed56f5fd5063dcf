// Package podautoscaler is the HorizontalPodAutoscaler controller: every 15 s it reads each
// HPA's target through the scale subresource and the pods' CPU and memory use from the
// resource metrics API (metrics.k8s.io), and scales the target to keep the average
// utilization at the HPA's target, within minReplicas and maxReplicas, as upstream does for
// Resource metrics. Until the metrics API is served its conditions say why it cannot
// compute a size; the replica bounds are enforced regardless.
package podautoscaler

import (
	"fmt"
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// tolerance is how far from the target utilization the ratio may be before a rescale.
const tolerance = 0.1

// Utilization is what the metrics say about one Resource metric: the pods' average use as
// a percentage of their requests, or why it is not known.
type Utilization struct {
	Percent int32
	// Average is the pods' average use (for AverageValue targets).
	Average int64
	Err     error
}

// Decision is a sync's outcome: the replica count to set and the status to write.
type Decision struct {
	Desired int32
	// Reason says why Desired differs from the current count (for the event).
	Reason string
	Status autoscalingv2.HorizontalPodAutoscalerStatus
}

// Decide computes an HPA's desired replicas from the target's current count and the metrics
// of its Resource metrics (indexed like spec.metrics; other metric types are not supported
// and say so). It does no I/O.
func Decide(h *autoscalingv2.HorizontalPodAutoscaler, current int32, metrics []Utilization, now time.Time) Decision {
	st := *h.Status.DeepCopy()
	st.ObservedGeneration = ptr.To(h.Generation)
	st.CurrentReplicas = current
	minR := ptr.Deref(h.Spec.MinReplicas, 1)
	d := Decision{Desired: current}
	set := func(t autoscalingv2.HorizontalPodAutoscalerConditionType, status corev1.ConditionStatus, reason, message string) {
		setCondition(&st, t, status, reason, message, now)
	}
	switch {
	case current == 0 && minR != 0:
		set(autoscalingv2.ScalingActive, corev1.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
		st.DesiredReplicas = 0
		d.Status = st
		return d
	case current > h.Spec.MaxReplicas:
		d.Desired, d.Reason = h.Spec.MaxReplicas, "Current number of replicas above Spec.MaxReplicas"
	case current < minR:
		d.Desired, d.Reason = minR, "Current number of replicas below Spec.MinReplicas"
	default:
		proposal, metricName, current2, err := fromMetrics(h, current, metrics)
		st.CurrentMetrics = current2
		if err != nil {
			set(autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale")
			set(autoscalingv2.ScalingActive, corev1.ConditionFalse, "FailedGetResourceMetric", "the HPA was unable to compute the replica count: "+err.Error())
			st.DesiredReplicas = current
			d.Status = st
			return d
		}
		set(autoscalingv2.ScalingActive, corev1.ConditionTrue, "ValidMetricFound",
			fmt.Sprintf("the HPA was able to successfully calculate a replica count from %s", metricName))
		d.Desired = proposal
		if proposal != current {
			d.Reason = fmt.Sprintf("%s above target", metricName)
			if proposal < current {
				d.Reason = "All metrics below target"
			}
		}
		switch {
		case d.Desired > h.Spec.MaxReplicas:
			d.Desired = h.Spec.MaxReplicas
			set(autoscalingv2.ScalingLimited, corev1.ConditionTrue, "TooManyReplicas", "the desired replica count is more than the maximum replica count")
		case d.Desired < minR:
			d.Desired = minR
			set(autoscalingv2.ScalingLimited, corev1.ConditionTrue, "TooFewReplicas", "the desired replica count is less than the minimum replica count")
		default:
			set(autoscalingv2.ScalingLimited, corev1.ConditionFalse, "DesiredWithinRange", "the desired count is within the acceptable range")
		}
	}
	if d.Desired != current {
		set(autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededRescale", fmt.Sprintf("the HPA controller was able to update the target scale to %d", d.Desired))
		t := metav1.NewTime(now)
		st.LastScaleTime = &t
	} else {
		set(autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size")
	}
	st.DesiredReplicas = d.Desired
	d.Status = st
	return d
}

// fromMetrics is the largest replica count any metric proposes, as upstream: for a
// utilization target, ceil(current * usage / target) unless within the tolerance.
func fromMetrics(h *autoscalingv2.HorizontalPodAutoscaler, current int32, metrics []Utilization) (int32, string, []autoscalingv2.MetricStatus, error) {
	best, name := int32(-1), ""
	var statuses []autoscalingv2.MetricStatus
	var firstErr error
	for i, m := range h.Spec.Metrics {
		if m.Type != autoscalingv2.ResourceMetricSourceType || m.Resource == nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("metrics of type %s are not supported by skiff yet", m.Type)
			}
			continue
		}
		label := fmt.Sprintf("%s resource", m.Resource.Name)
		if m.Resource.Target.Type == autoscalingv2.UtilizationMetricType {
			label = fmt.Sprintf("%s resource utilization (percentage of request)", m.Resource.Name)
		}
		if i >= len(metrics) || metrics[i].Err != nil {
			if firstErr == nil {
				err := fmt.Errorf("no metrics returned")
				if i < len(metrics) {
					err = metrics[i].Err
				}
				firstErr = fmt.Errorf("failed to get %s utilization: %w", m.Resource.Name, err)
			}
			continue
		}
		u := metrics[i]
		var ratio float64
		ms := autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: m.Resource.Name}}
		switch {
		case m.Resource.Target.AverageUtilization != nil:
			ratio = float64(u.Percent) / float64(*m.Resource.Target.AverageUtilization)
			ms.Resource.Current.AverageUtilization = ptr.To(u.Percent)
		case m.Resource.Target.AverageValue != nil:
			ratio = float64(u.Average) / float64(m.Resource.Target.AverageValue.MilliValue())
		default:
			continue
		}
		statuses = append(statuses, ms)
		proposal := current
		if math.Abs(1-ratio) > tolerance {
			proposal = int32(math.Ceil(ratio * float64(current)))
		}
		if proposal > best {
			best, name = proposal, label
		}
	}
	if best < 0 {
		if firstErr == nil {
			firstErr = fmt.Errorf("no metrics to compute a replica count from")
		}
		return current, "", statuses, firstErr
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
