package validation

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var metricTypes = []string{string(autoscalingv2.ObjectMetricSourceType), string(autoscalingv2.PodsMetricSourceType),
	string(autoscalingv2.ResourceMetricSourceType), string(autoscalingv2.ExternalMetricSourceType), string(autoscalingv2.ContainerResourceMetricSourceType)}

// HorizontalPodAutoscaler validates an autoscaling/v2 HPA with upstream's messages.
func HorizontalPodAutoscaler(h *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	errs := ObjectMeta(&h.ObjectMeta, true, DNSSubdomain)
	s := &h.Spec
	ref := specPath.Child("scaleTargetRef")
	if s.ScaleTargetRef.Kind == "" {
		errs = append(errs, field.Required(ref.Child("kind"), ""))
	}
	if s.ScaleTargetRef.Name == "" {
		errs = append(errs, field.Required(ref.Child("name"), ""))
	} else {
		for _, msg := range path.IsValidPathSegmentName(s.ScaleTargetRef.Name) {
			errs = append(errs, field.Invalid(ref.Child("name"), s.ScaleTargetRef.Name, msg))
		}
	}
	if s.MinReplicas != nil && *s.MinReplicas < 1 {
		errs = append(errs, field.Invalid(specPath.Child("minReplicas"), *s.MinReplicas, "must be greater than or equal to 1"))
	}
	if s.MaxReplicas < 1 {
		errs = append(errs, field.Invalid(specPath.Child("maxReplicas"), s.MaxReplicas, "must be greater than 0"))
	}
	if s.MinReplicas != nil && s.MaxReplicas < *s.MinReplicas {
		errs = append(errs, field.Invalid(specPath.Child("maxReplicas"), s.MaxReplicas, "must be greater than or equal to `minReplicas`"))
	}
	for i, m := range s.Metrics {
		fld := specPath.Child("metrics").Index(i)
		switch m.Type {
		case autoscalingv2.ResourceMetricSourceType:
			if m.Resource == nil {
				errs = append(errs, field.Required(fld.Child("resource"), "must populate information for the given metric source"))
				continue
			}
			if m.Resource.Name == "" {
				errs = append(errs, field.Required(fld.Child("resource", "name"), "must specify a resource name"))
			}
			errs = append(errs, metricTarget(m.Resource.Target, fld.Child("resource", "target"))...)
		case autoscalingv2.ContainerResourceMetricSourceType:
			if m.ContainerResource == nil {
				errs = append(errs, field.Required(fld.Child("containerResource"), "must populate information for the given metric source"))
				continue
			}
			if m.ContainerResource.Container == "" {
				errs = append(errs, field.Required(fld.Child("containerResource", "container"), "must specify a container"))
			}
			errs = append(errs, metricTarget(m.ContainerResource.Target, fld.Child("containerResource", "target"))...)
		case autoscalingv2.PodsMetricSourceType:
			if m.Pods == nil {
				errs = append(errs, field.Required(fld.Child("pods"), "must populate information for the given metric source"))
				continue
			}
			errs = append(errs, metricTarget(m.Pods.Target, fld.Child("pods", "target"))...)
		case autoscalingv2.ObjectMetricSourceType:
			if m.Object == nil {
				errs = append(errs, field.Required(fld.Child("object"), "must populate information for the given metric source"))
				continue
			}
			errs = append(errs, metricTarget(m.Object.Target, fld.Child("object", "target"))...)
		case autoscalingv2.ExternalMetricSourceType:
			if m.External == nil {
				errs = append(errs, field.Required(fld.Child("external"), "must populate information for the given metric source"))
				continue
			}
			errs = append(errs, metricTarget(m.External.Target, fld.Child("external", "target"))...)
		default:
			errs = append(errs, field.NotSupported(fld.Child("type"), m.Type, metricTypes))
		}
	}
	return errs
}

func metricTarget(t autoscalingv2.MetricTarget, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch t.Type {
	case autoscalingv2.UtilizationMetricType:
		if t.AverageUtilization == nil {
			errs = append(errs, field.Required(fld.Child("averageUtilization"), "must set either a target raw value or a target utilization"))
		} else if *t.AverageUtilization < 1 {
			errs = append(errs, field.Invalid(fld.Child("averageUtilization"), *t.AverageUtilization, "must be greater than 0"))
		}
	case autoscalingv2.ValueMetricType:
		if t.Value == nil || t.Value.Sign() <= 0 {
			errs = append(errs, field.Invalid(fld.Child("value"), t.Value, "must be positive"))
		}
	case autoscalingv2.AverageValueMetricType:
		if t.AverageValue == nil || t.AverageValue.Sign() <= 0 {
			errs = append(errs, field.Invalid(fld.Child("averageValue"), t.AverageValue, "must be positive"))
		}
	default:
		errs = append(errs, field.NotSupported(fld.Child("type"), t.Type, []string{string(autoscalingv2.UtilizationMetricType),
			string(autoscalingv2.ValueMetricType), string(autoscalingv2.AverageValueMetricType)}))
	}
	return errs
}
