package rbac

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
)

// fixture builds an Authorizer over in-memory indexers.
func fixture(t *testing.T, objs ...any) *Authorizer {
	t.Helper()
	ns := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	roles, croles := cache.NewIndexer(cache.MetaNamespaceKeyFunc, ns), cache.NewIndexer(cache.MetaNamespaceKeyFunc, ns)
	rbs, crbs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, ns), cache.NewIndexer(cache.MetaNamespaceKeyFunc, ns)
	for _, o := range objs {
		var err error
		switch o.(type) {
		case *rbacv1.Role:
			err = roles.Add(o)
		case *rbacv1.ClusterRole:
			err = croles.Add(o)
		case *rbacv1.RoleBinding:
			err = rbs.Add(o)
		case *rbacv1.ClusterRoleBinding:
			err = crbs.Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return New(Listers{Roles: rbaclisters.NewRoleLister(roles), ClusterRoles: rbaclisters.NewClusterRoleLister(croles),
		RoleBindings: rbaclisters.NewRoleBindingLister(rbs), ClusterRoleBindings: rbaclisters.NewClusterRoleBindingLister(crbs)})
}

var (
	podReader   = rbacv1.PolicyRule{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	secretAdmin = rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{""}, Resources: []string{"secrets"}}
)

func clusterRole(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

func role(ns, name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
}

func roleBinding(ns, name, kind, roleName string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: roleName}}
}

func clusterRoleBinding(name, roleName string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName}}
}

func TestAuthorize(t *testing.T) {
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{"dev", user.AllAuthenticated}}
	bob := &user.DefaultInfo{Name: "bob", Groups: []string{user.AllAuthenticated}}
	a := fixture(t,
		clusterRole("pod-reader", podReader),
		clusterRole("secret-admin", secretAdmin),
		role("team", "local-secrets", secretAdmin),
		clusterRoleBinding("devs-read-pods", "pod-reader", rbacv1.Subject{Kind: "Group", Name: "dev"}),
		roleBinding("team", "alice-secrets", "Role", "local-secrets", rbacv1.Subject{Kind: "User", Name: "alice"}),
		roleBinding("other", "alice-cluster-role-here", "ClusterRole", "secret-admin", rbacv1.Subject{Kind: "User", Name: "alice"}),
		roleBinding("team", "dangling", "Role", "gone", rbacv1.Subject{Kind: "User", Name: "bob"}),
	)
	for _, tc := range []struct {
		name   string
		u      user.Info
		attrs  authorizer.AttributesRecord
		want   authorizer.Decision
		reason string
	}{
		{"cluster binding, any namespace", alice, res("list", "", "pods", "", "anywhere", ""), authorizer.DecisionAllow, `ClusterRoleBinding "devs-read-pods" of ClusterRole "pod-reader" to Group "dev"`},
		{"cluster binding, cluster-wide list", alice, res("list", "", "pods", "", "", ""), authorizer.DecisionAllow, ""},
		{"cluster binding, not more", alice, res("delete", "", "pods", "", "x", "p"), authorizer.DecisionNoOpinion, ""},
		{"role binding in its namespace", alice, res("get", "", "secrets", "", "team", "s"), authorizer.DecisionAllow, `RoleBinding "alice-secrets/team" of Role "local-secrets" to User "alice"`},
		{"role binding not elsewhere", alice, res("get", "", "secrets", "", "default", "s"), authorizer.DecisionNoOpinion, ""},
		{"role binding not cluster-wide", alice, res("list", "", "secrets", "", "", ""), authorizer.DecisionNoOpinion, ""},
		{"cluster role through a role binding", alice, res("delete", "", "secrets", "", "other", "s"), authorizer.DecisionAllow, ""},
		{"no bindings", bob, res("list", "", "pods", "", "x", ""), authorizer.DecisionNoOpinion, ""},
		{"missing role is a reason", bob, res("get", "", "pods", "", "team", "p"), authorizer.DecisionNoOpinion, `RBAC: role.rbac.authorization.k8s.io "gone" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.attrs.User = tc.u
			d, reason, err := a.Authorize(context.Background(), tc.attrs)
			if err != nil || d != tc.want {
				t.Fatalf("decision %v (%q, %v), want %v", d, reason, err, tc.want)
			}
			if tc.reason != "" && !strings.Contains(reason, tc.reason) {
				t.Errorf("reason %q, want it to contain %q", reason, tc.reason)
			}
		})
	}
	rules, err := a.Rules(alice, "team")
	if err != nil || len(rules) != 2 {
		t.Fatalf("rules of alice in team: %v (%v), want pod-reader and local-secrets", rules, err)
	}
}

func TestGuard(t *testing.T) {
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
	admin := &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}}
	escalator := &user.DefaultInfo{Name: "esc", Groups: []string{user.AllAuthenticated}}
	a := fixture(t,
		clusterRole("pod-reader", podReader),
		clusterRole("secret-admin", secretAdmin),
		clusterRole("role-writer", rbacv1.PolicyRule{Verbs: []string{"create", "update", "get", "list"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "rolebindings"}}),
		clusterRole("escalate-and-bind", rbacv1.PolicyRule{Verbs: []string{"escalate", "bind"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "clusterroles"}}),
		roleBinding("team", "alice-pods", "ClusterRole", "pod-reader", rbacv1.Subject{Kind: "User", Name: "alice"}),
		roleBinding("team", "alice-roles", "ClusterRole", "role-writer", rbacv1.Subject{Kind: "User", Name: "alice"}),
		roleBinding("team", "esc", "ClusterRole", "escalate-and-bind", rbacv1.Subject{Kind: "User", Name: "esc"}),
	)
	g := &Guard{Rules: a, Authorizer: a}
	ctx := func(u user.Info) context.Context {
		return genericapirequest.WithUser(genericapirequest.WithNamespace(context.Background(), "team"), u)
	}
	getPods := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	for _, tc := range []struct {
		name    string
		check   func() error
		allowed bool
	}{
		{"role within held rules", func() error { return g.ConfirmRole(ctx(alice), "team", "r", []rbacv1.PolicyRule{getPods}, false) }, true},
		{"role beyond held rules", func() error { return g.ConfirmRole(ctx(alice), "team", "r", []rbacv1.PolicyRule{secretAdmin}, false) }, false},
		{"held only in another namespace", func() error { return g.ConfirmRole(ctx(alice), "elsewhere", "r", []rbacv1.PolicyRule{getPods}, false) }, false},
		{"masters may", func() error { return g.ConfirmRole(ctx(admin), "team", "r", []rbacv1.PolicyRule{secretAdmin}, false) }, true},
		{"escalate verb", func() error {
			return g.ConfirmRole(ctx(escalator), "team", "r", []rbacv1.PolicyRule{secretAdmin}, false)
		}, true},
		{"aggregation needs escalate", func() error { return g.ConfirmRole(ctx(alice), "", "agg", nil, true) }, false},
		{"bind a role held", func() error {
			return g.ConfirmBinding(ctx(alice), "team", "b", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "pod-reader"})
		}, true},
		{"bind a role not held", func() error {
			return g.ConfirmBinding(ctx(alice), "team", "b", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "secret-admin"})
		}, false},
		{"bind verb", func() error {
			return g.ConfirmBinding(ctx(escalator), "team", "b", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "secret-admin"})
		}, true},
		{"bind a missing role", func() error {
			return g.ConfirmBinding(ctx(alice), "team", "b", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "nope"})
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check()
			if (err == nil) != tc.allowed {
				t.Fatalf("err %v, allowed want %v", err, tc.allowed)
			}
		})
	}
	err := g.ConfirmRole(ctx(alice), "team", "r", []rbacv1.PolicyRule{secretAdmin}, false)
	want := `roles.rbac.authorization.k8s.io "r" is forbidden: user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:` +
		"\n" + `{APIGroups:[""], Resources:["secrets"], Verbs:["*"]}`
	if err == nil || err.Error() != want {
		t.Errorf("message\n%v\nwant\n%s", err, want)
	}
}

func TestCachedAuthorizerFollowsChanges(t *testing.T) {
	alice := &user.DefaultInfo{Name: "alice"}
	ns := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	croles, rbs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, ns), cache.NewIndexer(cache.MetaNamespaceKeyFunc, ns)
	empty := func() cache.Indexer { return cache.NewIndexer(cache.MetaNamespaceKeyFunc, ns) }
	a := New(Listers{Roles: rbaclisters.NewRoleLister(empty()), ClusterRoles: rbaclisters.NewClusterRoleLister(croles),
		RoleBindings: rbaclisters.NewRoleBindingLister(rbs), ClusterRoleBindings: rbaclisters.NewClusterRoleBindingLister(empty())})
	h := a.Cached()
	list := res("list", "", "pods", "", "team", "")
	list.User = alice
	decide := func() authorizer.Decision {
		d, _, _ := a.Authorize(context.Background(), list)
		return d
	}
	if decide() != authorizer.DecisionNoOpinion {
		t.Fatal("allowed with no bindings")
	}
	cr, rb := clusterRole("pod-reader", podReader), roleBinding("team", "b", "ClusterRole", "pod-reader", rbacv1.Subject{Kind: "User", Name: "alice"})
	_ = croles.Add(cr)
	_ = rbs.Add(rb)
	if decide() != authorizer.DecisionNoOpinion {
		t.Fatal("the cache should still hold the old answer before the informer event")
	}
	h.OnAdd(rb, false)
	if decide() != authorizer.DecisionAllow {
		t.Fatal("binding added: not allowed")
	}
	_ = rbs.Delete(rb)
	h.OnDelete(rb)
	if decide() != authorizer.DecisionNoOpinion {
		t.Fatal("binding deleted: still allowed")
	}
}
