package rbac

import (
	"context"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// Guard keeps RBAC from being a way around itself, as upstream's escalation checks: a user
// may write a role only with permissions it holds, and bind a role only if it holds the
// role's permissions — unless it is allowed the `escalate` (roles) or `bind` (bindings) verb
// on that role, or is in system:masters.
type Guard struct {
	// Rules resolves what the requesting user holds.
	Rules *Authorizer
	// Authorizer is the whole chain, asked about escalate and bind.
	Authorizer authorizer.Authorizer
}

// ConfirmRole allows writing a Role (namespace set) or ClusterRole with these rules.
// A ClusterRole with an aggregationRule gets its rules from other roles, so only
// system:masters and holders of `escalate` may write one.
func (g *Guard) ConfirmRole(ctx context.Context, namespace, name string, rules []rbacv1.PolicyRule, aggregated bool) error {
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return apierrors.NewForbidden(roleResource(namespace), name, fmt.Errorf("no user on the request"))
	}
	if privileged(u) || g.allowed(ctx, u, "escalate", roleResource(namespace).Resource, namespace, name) {
		return nil
	}
	if aggregated {
		return apierrors.NewForbidden(roleResource(namespace), name,
			fmt.Errorf("must have cluster-admin privileges to use the aggregationRule"))
	}
	return g.confirmNoEscalation(u, roleResource(namespace), namespace, name, rules)
}

// ConfirmBinding allows writing a binding in namespace ("" for a ClusterRoleBinding) to ref.
func (g *Guard) ConfirmBinding(ctx context.Context, namespace, name string, ref rbacv1.RoleRef) error {
	gr := rbacv1.Resource("clusterrolebindings")
	if namespace != "" {
		gr = rbacv1.Resource("rolebindings")
	}
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return apierrors.NewForbidden(gr, name, fmt.Errorf("no user on the request"))
	}
	refResource := "clusterroles"
	if ref.Kind == "Role" {
		refResource = "roles"
	}
	if privileged(u) || g.allowed(ctx, u, "bind", refResource, namespace, ref.Name) {
		return nil
	}
	rules, err := g.Rules.RoleRules(ref, namespace)
	if err != nil {
		return apierrors.NewForbidden(gr, name, missing(err, ref, namespace))
	}
	return g.confirmNoEscalation(u, gr, namespace, name, rules)
}

func (g *Guard) confirmNoEscalation(u user.Info, gr schema.GroupResource, namespace, name string, rules []rbacv1.PolicyRule) error {
	held, resolveErr := g.Rules.Rules(u, namespace)
	covered, missingRules := validation.Covers(held, rules)
	if covered {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "user %q (groups=%q) is attempting to grant RBAC permissions not currently held:", u.GetName(), u.GetGroups())
	for _, r := range missingRules {
		b.WriteString("\n" + CompactString(r))
	}
	if resolveErr != nil {
		fmt.Fprintf(&b, "; resolution errors: %v", resolveErr)
	}
	return apierrors.NewForbidden(gr, name, fmt.Errorf("%s", b.String()))
}

func (g *Guard) allowed(ctx context.Context, u user.Info, verb, resource, namespace, name string) bool {
	d, _, err := g.Authorizer.Authorize(ctx, authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: rbacv1.GroupName,
		Resource: resource, Namespace: namespace, Name: name, ResourceRequest: true})
	return err == nil && d == authorizer.DecisionAllow
}

func privileged(u user.Info) bool { return slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) }

func roleResource(namespace string) schema.GroupResource {
	if namespace == "" {
		return rbacv1.Resource("clusterroles")
	}
	return rbacv1.Resource("roles")
}

// CompactString prints a rule as upstream's escalation messages do:
// {APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}.
func CompactString(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, values []string) {
		if len(values) == 0 {
			return
		}
		q := make([]string, len(values))
		for i, v := range values {
			q[i] = fmt.Sprintf("%q", v)
		}
		parts = append(parts, name+":["+strings.Join(q, " ")+"]")
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("ResourceNames", r.ResourceNames)
	add("NonResourceURLs", r.NonResourceURLs)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}
