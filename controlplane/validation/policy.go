package validation

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PodDisruptionBudget validates a PodDisruptionBudget with upstream's messages.
func PodDisruptionBudget(pdb *policyv1.PodDisruptionBudget) field.ErrorList {
	errs := ObjectMeta(&pdb.ObjectMeta, true, DNSSubdomain)
	s := pdb.Spec
	if s.MinAvailable != nil && s.MaxUnavailable != nil {
		errs = append(errs, field.Invalid(specPath, s, "minAvailable and maxUnavailable cannot be both set"))
	}
	errs = append(errs, intOrPercent(s.MinAvailable, specPath.Child("minAvailable"))...)
	errs = append(errs, intOrPercent(s.MaxUnavailable, specPath.Child("maxUnavailable"))...)
	if s.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, specPath.Child("selector"))...)
	}
	if p := s.UnhealthyPodEvictionPolicy; p != nil && *p != policyv1.IfHealthyBudget && *p != policyv1.AlwaysAllow {
		errs = append(errs, field.NotSupported(specPath.Child("unhealthyPodEvictionPolicy"), *p,
			[]string{string(policyv1.IfHealthyBudget), string(policyv1.AlwaysAllow)}))
	}
	return errs
}
