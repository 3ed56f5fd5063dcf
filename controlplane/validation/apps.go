package validation

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// workload validates what Deployments, ReplicaSets and DaemonSets share: a non-empty selector
// that selects the template's labels, and a valid template.
func workload(selector *metav1.LabelSelector, tmpl *corev1.PodTemplateSpec, replicas *int32) field.ErrorList {
	var errs field.ErrorList
	if replicas != nil && *replicas < 0 {
		errs = append(errs, field.Invalid(specPath.Child("replicas"), *replicas, "must be greater than or equal to 0"))
	}
	if selector == nil {
		errs = append(errs, field.Required(specPath.Child("selector"), ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(selector, metav1validation.LabelSelectorValidationOptions{}, specPath.Child("selector"))...)
		if len(selector.MatchLabels)+len(selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(specPath.Child("selector"), selector, "empty selector is invalid for deployment"))
		}
		if sel, err := metav1.LabelSelectorAsSelector(selector); err == nil && !sel.Matches(labels.Set(tmpl.Labels)) {
			errs = append(errs, field.Invalid(specPath.Child("template", "metadata", "labels"), tmpl.Labels,
				"`selector` does not match template `labels`"))
		}
	}
	return append(errs, PodTemplate(tmpl, specPath.Child("template"))...)
}

// Deployment validates a Deployment.
func Deployment(d *appsv1.Deployment) field.ErrorList {
	errs := ObjectMeta(&d.ObjectMeta, true, DNSSubdomain)
	errs = append(errs, workload(d.Spec.Selector, &d.Spec.Template, d.Spec.Replicas)...)
	sp := specPath.Child("strategy")
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if d.Spec.Strategy.RollingUpdate != nil {
			errs = append(errs, field.Forbidden(sp.Child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'"))
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
			errs = append(errs, intOrPercent(ru.MaxSurge, sp.Child("rollingUpdate", "maxSurge"))...)
			errs = append(errs, intOrPercent(ru.MaxUnavailable, sp.Child("rollingUpdate", "maxUnavailable"))...)
			if isZero(ru.MaxSurge) && isZero(ru.MaxUnavailable) {
				errs = append(errs, field.Invalid(sp.Child("rollingUpdate", "maxUnavailable"), ru.MaxUnavailable,
					"may not be 0 when `maxSurge` is 0"))
			}
		}
	default:
		errs = append(errs, field.NotSupported(sp.Child("type"), d.Spec.Strategy.Type,
			[]string{string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType)}))
	}
	return errs
}

// SelectorUpdate keeps apps/v1 selectors immutable.
func SelectorUpdate(sel, old *metav1.LabelSelector) field.ErrorList {
	if !apiequality.Semantic.DeepEqual(sel, old) {
		return field.ErrorList{field.Invalid(specPath.Child("selector"), sel, "field is immutable")}
	}
	return nil
}

// ReplicaSet validates a ReplicaSet.
func ReplicaSet(rs *appsv1.ReplicaSet) field.ErrorList {
	errs := ObjectMeta(&rs.ObjectMeta, true, DNSSubdomain)
	return append(errs, workload(rs.Spec.Selector, &rs.Spec.Template, rs.Spec.Replicas)...)
}

// DaemonSet validates a DaemonSet.
func DaemonSet(ds *appsv1.DaemonSet) field.ErrorList {
	errs := ObjectMeta(&ds.ObjectMeta, true, DNSSubdomain)
	errs = append(errs, workload(ds.Spec.Selector, &ds.Spec.Template, nil)...)
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		errs = append(errs, intOrPercent(ru.MaxUnavailable, specPath.Child("updateStrategy", "rollingUpdate", "maxUnavailable"))...)
	}
	return errs
}

func intOrPercent(v *intstr.IntOrString, fld *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if v.Type == intstr.Int && v.IntVal < 0 {
		return field.ErrorList{field.Invalid(fld, v.IntVal, "must be greater than or equal to 0")}
	}
	if v.Type == intstr.String {
		if len(validation.IsValidPercent(v.StrVal)) > 0 {
			return field.ErrorList{field.Invalid(fld, v.StrVal, "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")}
		}
	}
	return nil
}

func isZero(v *intstr.IntOrString) bool {
	if v == nil {
		return false
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, 100, true)
	return err == nil && n == 0
}

var addressTypes = sets.New(discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN)

// StatefulSet validates a StatefulSet with upstream's rules and messages: a template with
// restartPolicy Always, a known pod management policy and update strategy, claim templates
// and a retention policy of Retain or Delete.
func StatefulSet(ss *appsv1.StatefulSet) field.ErrorList {
	errs := ObjectMeta(&ss.ObjectMeta, true, DNSSubdomain)
	// The claim templates are volumes of every pod, as the controller makes them: the
	// template is validated with them, so containers may mount them (as upstream).
	tmpl := ss.Spec.Template.DeepCopy()
	for _, t := range ss.Spec.VolumeClaimTemplates {
		have := false
		for _, v := range tmpl.Spec.Volumes {
			have = have || v.Name == t.Name
		}
		if !have {
			tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: t.Name}}})
		}
	}
	errs = append(errs, workload(ss.Spec.Selector, tmpl, ss.Spec.Replicas)...)
	s := &ss.Spec
	switch s.PodManagementPolicy {
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	case "":
		errs = append(errs, field.Required(specPath.Child("podManagementPolicy"), ""))
	default:
		errs = append(errs, field.Invalid(specPath.Child("podManagementPolicy"), s.PodManagementPolicy,
			"must be 'OrderedReady' or 'Parallel'"))
	}
	us := specPath.Child("updateStrategy")
	switch s.UpdateStrategy.Type {
	case "":
		errs = append(errs, field.Required(us, ""))
	case appsv1.OnDeleteStatefulSetStrategyType:
		if s.UpdateStrategy.RollingUpdate != nil {
			errs = append(errs, field.Invalid(us.Child("rollingUpdate"), s.UpdateStrategy.RollingUpdate,
				"only allowed for updateStrategy 'RollingUpdate'"))
		}
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if ru := s.UpdateStrategy.RollingUpdate; ru != nil {
			if ru.Partition != nil && *ru.Partition < 0 {
				errs = append(errs, field.Invalid(us.Child("rollingUpdate", "partition"), *ru.Partition, "must be greater than or equal to 0"))
			}
			if ru.MaxUnavailable != nil {
				mu := us.Child("rollingUpdate", "maxUnavailable")
				errs = append(errs, intOrPercent(ru.MaxUnavailable, mu)...)
				if isZero(ru.MaxUnavailable) {
					errs = append(errs, field.Invalid(mu, ru.MaxUnavailable.String(), "must be greater than 0"))
				}
			}
		}
	default:
		errs = append(errs, field.Invalid(us, s.UpdateStrategy, "must be 'RollingUpdate' or 'OnDelete'"))
	}
	if p := s.PersistentVolumeClaimRetentionPolicy; p != nil {
		rp := specPath.Child("persistentVolumeClaimRetentionPolicy")
		for name, v := range map[string]appsv1.PersistentVolumeClaimRetentionPolicyType{"whenDeleted": p.WhenDeleted, "whenScaled": p.WhenScaled} {
			if v != appsv1.RetainPersistentVolumeClaimRetentionPolicyType && v != appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
				errs = append(errs, field.NotSupported(rp.Child(name), v, []string{string(appsv1.RetainPersistentVolumeClaimRetentionPolicyType), string(appsv1.DeletePersistentVolumeClaimRetentionPolicyType)}))
			}
		}
	}
	if s.Ordinals != nil && s.Ordinals.Start < 0 {
		errs = append(errs, field.Invalid(specPath.Child("ordinals", "start"), s.Ordinals.Start, "must be greater than or equal to 0"))
	}
	if s.MinReadySeconds < 0 {
		errs = append(errs, field.Invalid(specPath.Child("minReadySeconds"), s.MinReadySeconds, "must be greater than or equal to 0"))
	}
	if s.ServiceName != "" {
		for _, msg := range validation.IsDNS1123Label(s.ServiceName) {
			errs = append(errs, field.Invalid(specPath.Child("serviceName"), s.ServiceName, msg))
		}
	}
	tp := specPath.Child("template", "spec")
	if rp := s.Template.Spec.RestartPolicy; rp != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tp.Child("restartPolicy"), rp, []string{string(corev1.RestartPolicyAlways)}))
	}
	if s.Template.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(tp.Child("activeDeadlineSeconds"), "activeDeadlineSeconds in StatefulSet is not Supported"))
	}
	seen := sets.New[string]()
	for i := range s.VolumeClaimTemplates {
		t := &s.VolumeClaimTemplates[i]
		fld := specPath.Child("volumeClaimTemplates").Index(i)
		if seen.Has(t.Name) {
			errs = append(errs, field.Duplicate(fld.Child("metadata", "name"), t.Name))
		}
		seen.Insert(t.Name)
		for _, msg := range validation.IsDNS1123Subdomain(t.Name) {
			errs = append(errs, field.Invalid(fld.Child("metadata", "name"), t.Name, msg))
		}
		errs = append(errs, pvcSpec(&t.Spec, fld.Child("spec"))...)
	}
	return errs
}

// StatefulSetUpdate allows upstream's mutable spec fields only.
func StatefulSetUpdate(ss, old *appsv1.StatefulSet) field.ErrorList {
	a, b := ss.Spec.DeepCopy(), old.Spec.DeepCopy()
	for _, s := range []*appsv1.StatefulSetSpec{a, b} {
		s.Replicas, s.Ordinals, s.Template, s.UpdateStrategy = nil, nil, corev1.PodTemplateSpec{}, appsv1.StatefulSetUpdateStrategy{}
		s.RevisionHistoryLimit, s.PersistentVolumeClaimRetentionPolicy, s.MinReadySeconds = nil, nil, 0
	}
	if !apiequality.Semantic.DeepEqual(a, b) {
		return field.ErrorList{field.Forbidden(specPath, "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden")}
	}
	return nil
}
