package rbac

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

func res(verb, group, resource, sub, ns, name string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "u"}, Verb: verb, APIGroup: group, Resource: resource,
		Subresource: sub, Namespace: ns, Name: name, ResourceRequest: true}
}

func path(verb, p string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "u"}, Verb: verb, Path: p}
}

func TestRuleAllows(t *testing.T) {
	rule := func(verbs, groups, resources, names []string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
	}
	s := func(v ...string) []string { return v }
	for _, tc := range []struct {
		name  string
		rule  rbacv1.PolicyRule
		attrs authorizer.AttributesRecord
		want  bool
	}{
		{"exact", rule(s("get"), s(""), s("pods"), nil), res("get", "", "pods", "", "ns", "p"), true},
		{"other verb", rule(s("get"), s(""), s("pods"), nil), res("list", "", "pods", "", "ns", ""), false},
		{"verb wildcard", rule(s("*"), s(""), s("pods"), nil), res("deletecollection", "", "pods", "", "ns", ""), true},
		{"other group", rule(s("get"), s(""), s("deployments"), nil), res("get", "apps", "deployments", "", "ns", "d"), false},
		{"group wildcard", rule(s("get"), s("*"), s("deployments"), nil), res("get", "apps", "deployments", "", "ns", "d"), true},
		{"resource wildcard", rule(s("get"), s(""), s("*"), nil), res("get", "", "secrets", "", "ns", "s"), true},
		{"resource wildcard covers subresources", rule(s("get"), s(""), s("*"), nil), res("get", "", "pods", "log", "ns", "p"), true},
		{"resource does not cover its subresource", rule(s("get"), s(""), s("pods"), nil), res("get", "", "pods", "log", "ns", "p"), false},
		{"subresource exact", rule(s("get"), s(""), s("pods/log"), nil), res("get", "", "pods", "log", "ns", "p"), true},
		{"subresource not the resource", rule(s("get"), s(""), s("pods/log"), nil), res("get", "", "pods", "", "ns", "p"), false},
		{"*/subresource", rule(s("update"), s("*"), s("*/scale"), nil), res("update", "apps", "deployments", "scale", "ns", "d"), true},
		{"*/subresource other sub", rule(s("update"), s("*"), s("*/scale"), nil), res("update", "apps", "deployments", "status", "ns", "d"), false},
		{"*/subresource not a resource", rule(s("update"), s("*"), s("*/scale"), nil), res("update", "apps", "deployments", "", "ns", "d"), false},
		{"resource/* is not a wildcard", rule(s("get"), s(""), s("pods/*"), nil), res("get", "", "pods", "log", "ns", "p"), false},
		{"resourceNames match", rule(s("get"), s(""), s("configmaps"), s("a", "b")), res("get", "", "configmaps", "", "ns", "b"), true},
		{"resourceNames other", rule(s("get"), s(""), s("configmaps"), s("a")), res("get", "", "configmaps", "", "ns", "c"), false},
		{"resourceNames never match a nameless list", rule(s("list"), s(""), s("configmaps"), s("a")), res("list", "", "configmaps", "", "ns", ""), false},
		{"resource rule does not match a path", rule(s("get"), s("*"), s("*"), nil), path("get", "/healthz"), false},
		{"path exact", rbacv1.PolicyRule{Verbs: s("get"), NonResourceURLs: s("/healthz")}, path("get", "/healthz"), true},
		{"path other", rbacv1.PolicyRule{Verbs: s("get"), NonResourceURLs: s("/healthz")}, path("get", "/healthz/etcd"), false},
		{"path prefix", rbacv1.PolicyRule{Verbs: s("get"), NonResourceURLs: s("/healthz/*")}, path("get", "/healthz/etcd"), true},
		{"path prefix needs the slash", rbacv1.PolicyRule{Verbs: s("get"), NonResourceURLs: s("/api/*")}, path("get", "/apis"), false},
		{"path star", rbacv1.PolicyRule{Verbs: s("*"), NonResourceURLs: s("*")}, path("post", "/anything"), true},
		{"path verb", rbacv1.PolicyRule{Verbs: s("get"), NonResourceURLs: s("/version")}, path("post", "/version"), false},
		{"path rule does not match a resource", rbacv1.PolicyRule{Verbs: s("*"), NonResourceURLs: s("*")}, res("get", "", "pods", "", "", ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RuleAllows(tc.attrs, &tc.rule); got != tc.want {
				t.Errorf("RuleAllows = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAppliesTo(t *testing.T) {
	sa := &user.DefaultInfo{Name: "system:serviceaccount:ns1:app", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ns1"}}
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{"dev"}}
	for _, tc := range []struct {
		name      string
		u         user.Info
		subject   rbacv1.Subject
		namespace string
		want      bool
	}{
		{"user", alice, rbacv1.Subject{Kind: "User", Name: "alice"}, "", true},
		{"other user", alice, rbacv1.Subject{Kind: "User", Name: "bob"}, "", false},
		{"group", alice, rbacv1.Subject{Kind: "Group", Name: "dev"}, "", true},
		{"a user is not a group", alice, rbacv1.Subject{Kind: "Group", Name: "alice"}, "", false},
		{"service account", sa, rbacv1.Subject{Kind: "ServiceAccount", Name: "app", Namespace: "ns1"}, "", true},
		{"service account in the binding's namespace", sa, rbacv1.Subject{Kind: "ServiceAccount", Name: "app"}, "ns1", true},
		{"service account elsewhere", sa, rbacv1.Subject{Kind: "ServiceAccount", Name: "app", Namespace: "ns2"}, "ns1", false},
		{"service account without namespace in a cluster binding", sa, rbacv1.Subject{Kind: "ServiceAccount", Name: "app"}, "", false},
		{"service-account group", sa, rbacv1.Subject{Kind: "Group", Name: "system:serviceaccounts:ns1"}, "", true},
		{"unknown kind", alice, rbacv1.Subject{Kind: "Robot", Name: "alice"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := AppliesTo(tc.u, tc.subject, tc.namespace); got != tc.want {
				t.Errorf("AppliesTo = %v, want %v", got, tc.want)
			}
		})
	}
}
