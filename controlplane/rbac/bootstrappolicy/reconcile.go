package bootstrappolicy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/auth/rbac/reconciliation"
)

// Reconcile writes the default policy (ClusterRoles, ControllerRoles, NamespaceRoles and
// their bindings) and skiff's (SkiffClusterRoles, ...) the way kube-apiserver's
// rbac/bootstrap-roles post-start hook does: a missing role or binding is created, a
// missing rule, aggregation selector, label or annotation added to an existing role, a
// missing subject to an existing binding, and a binding whose roleRef differs recreated;
// nothing is removed. An object annotated rbac.authorization.kubernetes.io/autoupdate:
// "false" is left alone. ClusterRoles go first, then ClusterRoleBindings, Roles and
// RoleBindings (namespaces, kube-system and kube-public, created if missing).
//
// Every object is tried; the errors are returned together, and the caller retries (a
// second run only reads). ctx is checked between objects: the reconciliation helpers
// make their requests without one.
func Reconcile(ctx context.Context, client kubernetes.Interface, log *slog.Logger) error {
	r := reconciler{ctx: ctx, log: log}
	rbac := client.RbacV1()

	clusterRoles := reconciliation.ClusterRoleModifier{Client: rbac.ClusterRoles()}
	for _, role := range slices.Concat(ClusterRoles(), ControllerRoles(), SkiffClusterRoles()) {
		r.role("ClusterRole", &reconciliation.ReconcileRoleOptions{
			Role:    reconciliation.ClusterRoleRuleOwner{ClusterRole: &role},
			Client:  clusterRoles,
			Confirm: true,
		})
	}

	clusterBindings := reconciliation.ClusterRoleBindingClientAdapter{Client: rbac.ClusterRoleBindings()}
	for _, binding := range slices.Concat(ClusterRoleBindings(), ControllerRoleBindings(), SkiffClusterRoleBindings()) {
		r.binding("ClusterRoleBinding", &reconciliation.ReconcileRoleBindingOptions{
			RoleBinding: reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: &binding},
			Client:      clusterBindings,
			Confirm:     true,
		})
	}

	namespaces := client.CoreV1().Namespaces()
	roles := reconciliation.RoleModifier{Client: rbac, NamespaceClient: namespaces}
	for _, role := range byNamespace(NamespaceRoles(), SkiffRoles()) {
		r.role("Role", &reconciliation.ReconcileRoleOptions{
			Role:    reconciliation.RoleRuleOwner{Role: &role},
			Client:  roles,
			Confirm: true,
		})
	}

	bindings := reconciliation.RoleBindingClientAdapter{Client: rbac, NamespaceClient: namespaces}
	for _, binding := range byNamespace(NamespaceRoleBindings(), SkiffRoleBindings()) {
		r.binding("RoleBinding", &reconciliation.ReconcileRoleBindingOptions{
			RoleBinding: reconciliation.RoleBindingAdapter{RoleBinding: &binding},
			Client:      bindings,
			Confirm:     true,
		})
	}

	return errors.Join(r.errs...)
}

// byNamespace flattens maps of namespace to objects, namespaces in order.
func byNamespace[T any](sets ...map[string][]T) []T {
	var out []T
	for _, set := range sets {
		for _, ns := range slices.Sorted(maps.Keys(set)) {
			out = append(out, set[ns]...)
		}
	}
	return out
}

type reconciler struct {
	ctx  context.Context
	log  *slog.Logger
	errs []error
}

// stopped records ctx's error once and says whether to stop.
func (r *reconciler) stopped() bool {
	err := r.ctx.Err()
	if err != nil && (len(r.errs) == 0 || !errors.Is(r.errs[len(r.errs)-1], err)) {
		r.errs = append(r.errs, err)
	}
	return err != nil
}

func (r *reconciler) role(kind string, o *reconciliation.ReconcileRoleOptions) {
	if r.stopped() {
		return
	}
	ns, name := o.Role.GetNamespace(), o.Role.GetName()
	res, err := o.Run()
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("reconciling %s %s: %w", kind, objectName(ns, name), err))
		return
	}
	missing := len(res.MissingRules) + len(res.MissingAggregationRuleSelectors)
	switch {
	case res.Protected:
		if missing > 0 {
			r.log.Warn("not reconciling RBAC object annotated autoupdate=false, it lacks default permissions",
				"kind", kind, "name", objectName(ns, name), "missingRules", rulesText(res.MissingRules),
				"missingAggregationSelectors", len(res.MissingAggregationRuleSelectors))
		}
	case res.Operation == reconciliation.ReconcileCreate:
		r.log.Info("created default RBAC object", "kind", kind, "name", objectName(ns, name))
	case res.Operation == reconciliation.ReconcileUpdate:
		r.log.Info("updated default RBAC object", "kind", kind, "name", objectName(ns, name),
			"addedRules", rulesText(res.MissingRules), "addedAggregationSelectors", len(res.MissingAggregationRuleSelectors))
	}
}

func (r *reconciler) binding(kind string, o *reconciliation.ReconcileRoleBindingOptions) {
	if r.stopped() {
		return
	}
	ns, name := o.RoleBinding.GetNamespace(), o.RoleBinding.GetName()
	res, err := o.Run()
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("reconciling %s %s: %w", kind, objectName(ns, name), err))
		return
	}
	switch {
	case res.Protected:
		if len(res.MissingSubjects) > 0 || res.Operation == reconciliation.ReconcileRecreate {
			r.log.Warn("not reconciling RBAC object annotated autoupdate=false, it differs from the default",
				"kind", kind, "name", objectName(ns, name), "missingSubjects", subjectsText(res.MissingSubjects),
				"roleRefDiffers", res.Operation == reconciliation.ReconcileRecreate)
		}
	case res.Operation == reconciliation.ReconcileCreate:
		r.log.Info("created default RBAC object", "kind", kind, "name", objectName(ns, name))
	case res.Operation == reconciliation.ReconcileRecreate:
		r.log.Info("recreated default RBAC object with its default roleRef", "kind", kind, "name", objectName(ns, name))
	case res.Operation == reconciliation.ReconcileUpdate:
		r.log.Info("updated default RBAC object", "kind", kind, "name", objectName(ns, name),
			"addedSubjects", subjectsText(res.MissingSubjects))
	}
}

func objectName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

func rulesText(rs []rbacv1.PolicyRule) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		s := fmt.Sprintf("%v", r.Verbs)
		if len(r.NonResourceURLs) > 0 {
			s += fmt.Sprintf(" urls=%v", r.NonResourceURLs)
		} else {
			s += fmt.Sprintf(" groups=%q resources=%v", r.APIGroups, r.Resources)
		}
		if len(r.ResourceNames) > 0 {
			s += fmt.Sprintf(" names=%v", r.ResourceNames)
		}
		out = append(out, s)
	}
	return out
}

func subjectsText(ss []rbacv1.Subject) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.Kind+" "+objectName(s.Namespace, s.Name))
	}
	return out
}
