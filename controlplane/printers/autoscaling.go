package printers

import (
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/runtime"
)

// HorizontalPodAutoscalers prints NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE.
var HorizontalPodAutoscalers = New(func(o runtime.Object) []any {
	h := o.(*autoscalingv2.HorizontalPodAutoscaler)
	ref := h.Spec.ScaleTargetRef.Kind + "/" + h.Spec.ScaleTargetRef.Name
	var targets []string
	for i, m := range h.Spec.Metrics {
		if m.Type != autoscalingv2.ResourceMetricSourceType || m.Resource == nil {
			targets = append(targets, "<unknown>")
			continue
		}
		cur := "<unknown>"
		if i < len(h.Status.CurrentMetrics) {
			if c := h.Status.CurrentMetrics[i].Resource; c != nil && c.Current.AverageUtilization != nil {
				cur = fmt.Sprintf("%d%%", *c.Current.AverageUtilization)
			}
		}
		want := "<auto>"
		if t := m.Resource.Target; t.AverageUtilization != nil {
			want = fmt.Sprintf("%d%%", *t.AverageUtilization)
		} else if t.AverageValue != nil {
			want = t.AverageValue.String()
		}
		targets = append(targets, fmt.Sprintf("%s: %s/%s", m.Resource.Name, cur, want))
	}
	minPods := "<unset>"
	if h.Spec.MinReplicas != nil {
		minPods = fmt.Sprint(*h.Spec.MinReplicas)
	}
	return []any{ref, strings.Join(targets, ", "), minPods, int64(h.Spec.MaxReplicas), int64(h.Status.CurrentReplicas), Age(h.CreationTimestamp)}
}, Column{Name: "Reference"}, Column{Name: "Targets"}, Column{Name: "MinPods"}, Column{Name: "MaxPods", Type: "integer"},
	Column{Name: "Replicas", Type: "integer"}, AgeColumn)
