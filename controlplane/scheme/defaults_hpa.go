package scheme

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// DefaultHPA applies upstream's autoscaling/v2 defaults: one minimum replica, an 80% CPU
// target when no metric is given, and every unset field of a behavior that is.
func DefaultHPA(h *autoscalingv2.HorizontalPodAutoscaler) {
	if h.Spec.MinReplicas == nil {
		h.Spec.MinReplicas = ptr.To[int32](1)
	}
	if len(h.Spec.Metrics) == 0 {
		h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)}}}}
	}
	if b := h.Spec.Behavior; b != nil {
		b.ScaleUp = scalingRules(b.ScaleUp, autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr.To[int32](0), SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
			Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
				{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}})
		b.ScaleDown = scalingRules(b.ScaleDown, autoscalingv2.HPAScalingRules{
			SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
			Policies:     []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}})
	}
}

// scalingRules fills what r leaves unset from def (upstream leaves scale-down's
// stabilization window unset: the controller's flag decides it).
func scalingRules(r *autoscalingv2.HPAScalingRules, def autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if r == nil {
		return &def
	}
	if r.SelectPolicy == nil {
		r.SelectPolicy = def.SelectPolicy
	}
	if r.StabilizationWindowSeconds == nil {
		r.StabilizationWindowSeconds = def.StabilizationWindowSeconds
	}
	if r.Policies == nil {
		r.Policies = def.Policies
	}
	return r
}
