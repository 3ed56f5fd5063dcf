package scheme

import (
	"encoding/json"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
)

// autoscaling/v1 serves the same HorizontalPodAutoscalers as autoscaling/v2 (stored as v2):
// v1 has room for one CPU utilization target. What v1 cannot say travels in annotations,
// so a v1 client's read-modify-write loses nothing: the other metrics and the behavior
// (skiff's own annotations, in v2's form) and the conditions (upstream's annotation).
const (
	AnnotationV2Metrics        = "autoscaling.skiff.sh/v2-metrics"
	AnnotationV2Behavior       = "autoscaling.skiff.sh/v2-behavior"
	AnnotationV2CurrentMetrics = "autoscaling.skiff.sh/v2-current-metrics"
	AnnotationConditions       = "autoscaling.alpha.kubernetes.io/conditions"
)

func addAutoscalingV1Conversions(s *runtime.Scheme) error {
	if err := s.AddConversionFunc((*autoscalingv2.HorizontalPodAutoscaler)(nil), (*autoscalingv1.HorizontalPodAutoscaler)(nil), func(a, b any, _ conversion.Scope) error {
		HPAToV1(a.(*autoscalingv2.HorizontalPodAutoscaler), b.(*autoscalingv1.HorizontalPodAutoscaler))
		return nil
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*autoscalingv1.HorizontalPodAutoscaler)(nil), (*autoscalingv2.HorizontalPodAutoscaler)(nil), func(a, b any, _ conversion.Scope) error {
		return HPAFromV1(a.(*autoscalingv1.HorizontalPodAutoscaler), b.(*autoscalingv2.HorizontalPodAutoscaler))
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*autoscalingv2.HorizontalPodAutoscalerList)(nil), (*autoscalingv1.HorizontalPodAutoscalerList)(nil), func(a, b any, _ conversion.Scope) error {
		in, out := a.(*autoscalingv2.HorizontalPodAutoscalerList), b.(*autoscalingv1.HorizontalPodAutoscalerList)
		out.ListMeta = in.ListMeta
		out.Items = make([]autoscalingv1.HorizontalPodAutoscaler, len(in.Items))
		for i := range in.Items {
			HPAToV1(&in.Items[i], &out.Items[i])
		}
		return nil
	}); err != nil {
		return err
	}
	return s.AddConversionFunc((*autoscalingv1.HorizontalPodAutoscalerList)(nil), (*autoscalingv2.HorizontalPodAutoscalerList)(nil), func(a, b any, _ conversion.Scope) error {
		in, out := a.(*autoscalingv1.HorizontalPodAutoscalerList), b.(*autoscalingv2.HorizontalPodAutoscalerList)
		out.ListMeta = in.ListMeta
		out.Items = make([]autoscalingv2.HorizontalPodAutoscaler, len(in.Items))
		for i := range in.Items {
			if err := HPAFromV1(&in.Items[i], &out.Items[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

func isCPUUtilization(m autoscalingv2.MetricSpec) bool {
	return m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
		m.Resource.Target.Type == autoscalingv2.UtilizationMetricType && m.Resource.Target.AverageUtilization != nil
}

func setJSON(ann map[string]string, key string, v any, present bool) {
	if !present {
		return
	}
	if b, err := json.Marshal(v); err == nil {
		ann[key] = string(b)
	}
}

// HPAToV1 writes the v1 view of a v2 HPA.
func HPAToV1(in *autoscalingv2.HorizontalPodAutoscaler, out *autoscalingv1.HorizontalPodAutoscaler) {
	out.TypeMeta = in.TypeMeta
	out.ObjectMeta = *in.ObjectMeta.DeepCopy()
	ann := map[string]string{}
	for k, v := range out.Annotations {
		ann[k] = v
	}
	out.Spec = autoscalingv1.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{Kind: in.Spec.ScaleTargetRef.Kind, Name: in.Spec.ScaleTargetRef.Name, APIVersion: in.Spec.ScaleTargetRef.APIVersion},
		MinReplicas:    in.Spec.MinReplicas, MaxReplicas: in.Spec.MaxReplicas,
	}
	var others []autoscalingv2.MetricSpec
	for _, m := range in.Spec.Metrics {
		if isCPUUtilization(m) && out.Spec.TargetCPUUtilizationPercentage == nil {
			v := *m.Resource.Target.AverageUtilization
			out.Spec.TargetCPUUtilizationPercentage = &v
			continue
		}
		others = append(others, m)
	}
	setJSON(ann, AnnotationV2Metrics, others, len(others) > 0)
	setJSON(ann, AnnotationV2Behavior, in.Spec.Behavior, in.Spec.Behavior != nil)
	out.Status = autoscalingv1.HorizontalPodAutoscalerStatus{ObservedGeneration: in.Status.ObservedGeneration, LastScaleTime: in.Status.LastScaleTime,
		CurrentReplicas: in.Status.CurrentReplicas, DesiredReplicas: in.Status.DesiredReplicas}
	var otherCurrent []autoscalingv2.MetricStatus
	for _, m := range in.Status.CurrentMetrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
			m.Resource.Current.AverageUtilization != nil && out.Status.CurrentCPUUtilizationPercentage == nil {
			v := *m.Resource.Current.AverageUtilization
			out.Status.CurrentCPUUtilizationPercentage = &v
			continue
		}
		otherCurrent = append(otherCurrent, m)
	}
	setJSON(ann, AnnotationV2CurrentMetrics, otherCurrent, len(otherCurrent) > 0)
	setJSON(ann, AnnotationConditions, in.Status.Conditions, len(in.Status.Conditions) > 0)
	if len(ann) > 0 {
		out.Annotations = ann
	}
}

// HPAFromV1 reads a v1 HPA into v2, taking back what the annotations kept.
func HPAFromV1(in *autoscalingv1.HorizontalPodAutoscaler, out *autoscalingv2.HorizontalPodAutoscaler) error {
	out.TypeMeta = in.TypeMeta
	out.ObjectMeta = *in.ObjectMeta.DeepCopy()
	take := func(key string, v any) error {
		raw, ok := out.Annotations[key]
		if !ok {
			return nil
		}
		delete(out.Annotations, key)
		return json.Unmarshal([]byte(raw), v)
	}
	out.Spec = autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: in.Spec.ScaleTargetRef.Kind, Name: in.Spec.ScaleTargetRef.Name, APIVersion: in.Spec.ScaleTargetRef.APIVersion},
		MinReplicas:    in.Spec.MinReplicas, MaxReplicas: in.Spec.MaxReplicas,
	}
	if t := in.Spec.TargetCPUUtilizationPercentage; t != nil {
		v := *t
		out.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &v}}}}
	}
	var others []autoscalingv2.MetricSpec
	if err := take(AnnotationV2Metrics, &others); err != nil {
		return err
	}
	out.Spec.Metrics = append(out.Spec.Metrics, others...)
	if err := take(AnnotationV2Behavior, &out.Spec.Behavior); err != nil {
		return err
	}
	out.Status = autoscalingv2.HorizontalPodAutoscalerStatus{ObservedGeneration: in.Status.ObservedGeneration, LastScaleTime: in.Status.LastScaleTime,
		CurrentReplicas: in.Status.CurrentReplicas, DesiredReplicas: in.Status.DesiredReplicas}
	if c := in.Status.CurrentCPUUtilizationPercentage; c != nil {
		v := *c
		out.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
			Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: &v}}}}
	}
	var otherCurrent []autoscalingv2.MetricStatus
	if err := take(AnnotationV2CurrentMetrics, &otherCurrent); err != nil {
		return err
	}
	out.Status.CurrentMetrics = append(out.Status.CurrentMetrics, otherCurrent...)
	if err := take(AnnotationConditions, &out.Status.Conditions); err != nil {
		return err
	}
	if len(out.Annotations) == 0 {
		out.Annotations = nil
	}
	DefaultHPA(out)
	return nil
}
