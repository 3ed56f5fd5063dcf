package validation

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// RBACName is upstream's rule for role and binding names: any path segment ("system:node",
// "edit"), since names like "system:controller:deployment-controller" hold colons.
func RBACName(name string, prefix bool) []string { return path.IsValidPathSegmentName(name) }

// Role validates a Role: namespaced rules never name non-resource URLs.
func Role(r *rbacv1.Role) field.ErrorList {
	errs := ObjectMeta(&r.ObjectMeta, true, RBACName)
	for i := range r.Rules {
		errs = append(errs, policyRule(&r.Rules[i], true, field.NewPath("rules").Index(i))...)
	}
	return errs
}

// ClusterRole validates a ClusterRole and its aggregation rule.
func ClusterRole(r *rbacv1.ClusterRole) field.ErrorList {
	errs := ObjectMeta(&r.ObjectMeta, false, RBACName)
	for i := range r.Rules {
		errs = append(errs, policyRule(&r.Rules[i], false, field.NewPath("rules").Index(i))...)
	}
	if r.AggregationRule != nil {
		fld := field.NewPath("aggregationRule", "clusterRoleSelectors")
		if len(r.AggregationRule.ClusterRoleSelectors) == 0 {
			errs = append(errs, field.Required(fld, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
		}
		for i := range r.AggregationRule.ClusterRoleSelectors {
			errs = append(errs, metav1validation.ValidateLabelSelector(&r.AggregationRule.ClusterRoleSelectors[i],
				metav1validation.LabelSelectorValidationOptions{}, fld.Index(i))...)
		}
	}
	return errs
}

func policyRule(r *rbacv1.PolicyRule, namespaced bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Verbs) == 0 {
		errs = append(errs, field.Required(fld.Child("verbs"), "verbs must contain at least one value"))
	}
	if len(r.NonResourceURLs) > 0 {
		if namespaced {
			errs = append(errs, field.Invalid(fld.Child("nonResourceURLs"), r.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
		}
		if len(r.APIGroups) > 0 || len(r.Resources) > 0 || len(r.ResourceNames) > 0 {
			errs = append(errs, field.Invalid(fld.Child("nonResourceURLs"), r.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
		}
		return errs
	}
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(fld.Child("apiGroups"), "resource rules must supply at least one api group"))
	}
	if len(r.Resources) == 0 {
		errs = append(errs, field.Required(fld.Child("resources"), "resource rules must supply at least one resource"))
	}
	return errs
}

// RoleBinding validates a RoleBinding: it refers to a Role or a ClusterRole.
func RoleBinding(b *rbacv1.RoleBinding) field.ErrorList {
	errs := ObjectMeta(&b.ObjectMeta, true, RBACName)
	errs = append(errs, roleRef(b.RoleRef, []string{"Role", "ClusterRole"})...)
	for i := range b.Subjects {
		errs = append(errs, subject(&b.Subjects[i], true, field.NewPath("subjects").Index(i))...)
	}
	return errs
}

// ClusterRoleBinding validates a ClusterRoleBinding: it refers to a ClusterRole, and its
// ServiceAccount subjects name their namespace.
func ClusterRoleBinding(b *rbacv1.ClusterRoleBinding) field.ErrorList {
	errs := ObjectMeta(&b.ObjectMeta, false, RBACName)
	errs = append(errs, roleRef(b.RoleRef, []string{"ClusterRole"})...)
	for i := range b.Subjects {
		errs = append(errs, subject(&b.Subjects[i], false, field.NewPath("subjects").Index(i))...)
	}
	return errs
}

// RoleRefUpdate refuses a changed roleRef, as upstream: a binding is deleted and created
// again to point at another role.
func RoleRefUpdate(ref, old rbacv1.RoleRef) field.ErrorList {
	if ref != old {
		return field.ErrorList{field.Invalid(field.NewPath("roleRef"), ref, "cannot change roleRef")}
	}
	return nil
}

func roleRef(ref rbacv1.RoleRef, kinds []string) field.ErrorList {
	var errs field.ErrorList
	fld := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(fld.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	if !contains(kinds, ref.Kind) {
		errs = append(errs, field.NotSupported(fld.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(fld.Child("name"), ""))
	} else {
		for _, msg := range RBACName(ref.Name, false) {
			errs = append(errs, field.Invalid(fld.Child("name"), ref.Name, msg))
		}
	}
	return errs
}

func subject(s *rbacv1.Subject, namespaced bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(fld.Child("name"), ""))
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		if s.Name != "" {
			for _, msg := range DNSSubdomain(s.Name, false) {
				errs = append(errs, field.Invalid(fld.Child("name"), s.Name, msg))
			}
		}
		if s.APIGroup != "" {
			errs = append(errs, field.NotSupported(fld.Child("apiGroup"), s.APIGroup, []string{""}))
		}
		if !namespaced && s.Namespace == "" {
			errs = append(errs, field.Required(fld.Child("namespace"), ""))
		}
	case rbacv1.UserKind, rbacv1.GroupKind:
		if s.APIGroup != rbacv1.GroupName {
			errs = append(errs, field.NotSupported(fld.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
		}
	default:
		errs = append(errs, field.NotSupported(fld.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
	}
	return errs
}

func contains(values []string, v string) bool {
	for _, x := range values {
		if x == v {
			return true
		}
	}
	return false
}
