package rbac

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// RulesAllow reports whether any of rules allows the request a.
func RulesAllow(a authorizer.Attributes, rules ...rbacv1.PolicyRule) bool {
	for i := range rules {
		if RuleAllows(a, &rules[i]) {
			return true
		}
	}
	return false
}

// RuleAllows reports whether rule allows the request a: resource rules match resource
// requests only, non-resource rules (nonResourceURLs) match the others only.
func RuleAllows(a authorizer.Attributes, rule *rbacv1.PolicyRule) bool {
	if !matches(rule.Verbs, a.GetVerb()) {
		return false
	}
	if !a.IsResourceRequest() {
		return nonResourceURLMatches(rule.NonResourceURLs, a.GetPath())
	}
	resource := a.GetResource()
	if a.GetSubresource() != "" {
		resource += "/" + a.GetSubresource()
	}
	return matches(rule.APIGroups, a.GetAPIGroup()) &&
		resourceMatches(rule.Resources, resource, a.GetSubresource()) &&
		(len(rule.ResourceNames) == 0 || contains(rule.ResourceNames, a.GetName()))
}

// matches is true when values holds want or the wildcard "*".
func matches(values []string, want string) bool {
	for _, v := range values {
		if v == rbacv1.VerbAll || v == want {
			return true
		}
	}
	return false
}

func contains(values []string, want string) bool {
	for _, v := range values {
		if v == want {
			return true
		}
	}
	return false
}

// resourceMatches matches "pods/log" against "*", "pods/log" and "*/log"; a rule for
// "pods" does not cover its subresources.
func resourceMatches(ruleResources []string, combined, subresource string) bool {
	for _, r := range ruleResources {
		switch {
		case r == rbacv1.ResourceAll, r == combined:
			return true
		case subresource != "" && len(r) == len(subresource)+2 && strings.HasPrefix(r, "*/") && strings.HasSuffix(r, subresource):
			return true
		}
	}
	return false
}

// nonResourceURLMatches matches a path exactly or against a rule ending in "*" as a prefix.
func nonResourceURLMatches(urls []string, path string) bool {
	for _, u := range urls {
		switch {
		case u == rbacv1.NonResourceAll, u == path:
			return true
		case strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimRight(u, "*")):
			return true
		}
	}
	return false
}

// AppliesTo reports whether subject names u; bindingNamespace is the namespace of a
// RoleBinding (a ServiceAccount subject without a namespace means the binding's), "" for a
// ClusterRoleBinding.
func AppliesTo(u user.Info, subject rbacv1.Subject, bindingNamespace string) bool {
	switch subject.Kind {
	case rbacv1.UserKind:
		return u.GetName() == subject.Name
	case rbacv1.GroupKind:
		return contains(u.GetGroups(), subject.Name)
	case rbacv1.ServiceAccountKind:
		ns := subject.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		if ns == "" {
			return false
		}
		return serviceaccount.MakeUsername(ns, subject.Name) == u.GetName()
	}
	return false
}
