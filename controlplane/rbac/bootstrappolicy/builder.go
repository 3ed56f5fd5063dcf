package bootstrappolicy

import (
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// core is the core ("legacy") API group, the empty string.
	core = ""
	// controllerPrefix starts the name of every controller's ClusterRole; the rest is
	// the name of its ServiceAccount in kube-system.
	controllerPrefix = "system:controller:"
	// aggregateTo is the label prefix that makes a ClusterRole part of an aggregated one:
	// aggregateTo+"view": "true" adds its rules to view.
	aggregateTo = "rbac.authorization.k8s.io/aggregate-to-"
	// BootstrappingLabel marks every object of the default policy (value "rbac-defaults").
	BootstrappingLabel = "kubernetes.io/bootstrapping"
)

// The verb sets the default policy uses again and again.
var (
	read       = []string{"get", "list", "watch"}
	write      = []string{"create", "update", "patch", "delete", "deletecollection"}
	readWrite  = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	readUpdate = []string{"get", "list", "watch", "update", "patch"}
)

// bootstrapMeta is the metadata of every object of the policy: the bootstrapping label
// and the annotation that lets Reconcile update it.
func bootstrapMeta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:        name,
		Namespace:   namespace,
		Labels:      map[string]string{BootstrappingLabel: "rbac-defaults"},
		Annotations: map[string]string{rbacv1.AutoUpdateAnnotationKey: "true"},
	}
}

// pr is a policy rule being written: rule(verbs...).groups(...).resources(...), or
// rule(verbs...).urls(...) for non-resource paths. rules turns it into a PolicyRule.
type pr rbacv1.PolicyRule

func rule(verbs ...string) pr { return pr{Verbs: verbs} }

func (r pr) groups(groups ...string) pr {
	r.APIGroups = append(slices.Clip(r.APIGroups), groups...)
	return r
}

func (r pr) resources(resources ...string) pr {
	r.Resources = append(slices.Clip(r.Resources), resources...)
	return r
}

func (r pr) names(names ...string) pr {
	r.ResourceNames = append(slices.Clip(r.ResourceNames), names...)
	return r
}

func (r pr) urls(urls ...string) pr {
	r.NonResourceURLs = append(slices.Clip(r.NonResourceURLs), urls...)
	return r
}

// recordEvents is the rule of everything that records events, through either API.
func recordEvents() pr {
	return rule("create", "update", "patch").groups(core, "events.k8s.io").resources("events")
}

// sortedSet is a sorted copy of s without duplicates; nil stays nil.
func sortedSet(s []string) []string {
	if s == nil {
		return nil
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// rules builds the rules, each list sorted and deduplicated (the form the API server
// stores and upstream's fixtures show). A malformed rule is a bug in this package's
// static data, so it panics.
func rules(rs ...pr) []rbacv1.PolicyRule {
	if len(rs) == 0 {
		return nil
	}
	out := make([]rbacv1.PolicyRule, 0, len(rs))
	for _, r := range rs {
		p := rbacv1.PolicyRule{
			Verbs:           sortedSet(r.Verbs),
			APIGroups:       sortedSet(r.APIGroups),
			Resources:       sortedSet(r.Resources),
			ResourceNames:   sortedSet(r.ResourceNames),
			NonResourceURLs: sortedSet(r.NonResourceURLs),
		}
		resourceRule := len(p.APIGroups) > 0 || len(p.Resources) > 0 || len(p.ResourceNames) > 0
		switch {
		case len(p.Verbs) == 0:
			panic(fmt.Sprintf("bootstrappolicy: rule without verbs: %+v", p))
		case len(p.NonResourceURLs) > 0 && resourceRule:
			panic(fmt.Sprintf("bootstrappolicy: rule mixes URLs and resources: %+v", p))
		case len(p.NonResourceURLs) == 0 && (len(p.APIGroups) == 0 || len(p.Resources) == 0):
			panic(fmt.Sprintf("bootstrappolicy: resource rule needs groups and resources: %+v", p))
		}
		out = append(out, p)
	}
	return out
}

func clusterRole(name string, rs ...pr) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{ObjectMeta: bootstrapMeta("", name), Rules: rules(rs...)}
}

// aggregated is a ClusterRole whose rules the aggregation controller keeps as the union
// of the ClusterRoles labelled aggregateTo+from.
func aggregated(name, from string) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{
		ObjectMeta: bootstrapMeta("", name),
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{aggregateTo + from: "true"}},
		}},
	}
}

// partOf labels r to be aggregated into the ClusterRole selecting aggregateTo+into.
func partOf(into string, r rbacv1.ClusterRole) rbacv1.ClusterRole {
	r.Labels[aggregateTo+into] = "true"
	return r
}

// controller is the ClusterRole of a controller running as ServiceAccount kube-system/name.
func controller(name string, rs ...pr) rbacv1.ClusterRole {
	return clusterRole(controllerPrefix+name, rs...)
}

func role(namespace, name string, rs ...pr) rbacv1.Role {
	return rbacv1.Role{ObjectMeta: bootstrapMeta(namespace, name), Rules: rules(rs...)}
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func user(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

func serviceAccount(namespace, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}
}

// clusterRoleBinding binds ClusterRole roleName, under the same name, to the subjects.
func clusterRoleBinding(roleName string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return namedClusterRoleBinding(roleName, roleName, subjects...)
}

func namedClusterRoleBinding(name, roleName string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return rbacv1.ClusterRoleBinding{
		ObjectMeta: bootstrapMeta("", name),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
		Subjects:   subjects,
	}
}

// roleBinding binds Role roleName of the namespace to the subjects.
func roleBinding(namespace, name, roleName string, subjects ...rbacv1.Subject) rbacv1.RoleBinding {
	return rbacv1.RoleBinding{
		ObjectMeta: bootstrapMeta(namespace, name),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: roleName},
		Subjects:   subjects,
	}
}
