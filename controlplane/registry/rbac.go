package registry

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/controlplane/printers"
	"github.com/skiff-sh/skiff/controlplane/validation"
)

// RBACGuard refuses role and binding writes that would grant more than the writer holds
// (controlplane/rbac.Guard).
type RBACGuard interface {
	ConfirmRole(ctx context.Context, namespace, name string, rules []rbacv1.PolicyRule, aggregated bool) error
	ConfirmBinding(ctx context.Context, namespace, name string, ref rbacv1.RoleRef) error
}

// rbacResources serves rbac.authorization.k8s.io/v1. Writes pass guard first when set.
func rbacResources(opts generic.RESTOptionsGetter, guard RBACGuard) (map[string]rest.Storage, error) {
	guarded := func(confirm func(ctx context.Context, obj runtime.Object) error) func(main *REST) rest.Storage {
		return func(main *REST) rest.Storage {
			if guard == nil {
				return main
			}
			return &guardedREST{REST: main, confirm: confirm}
		}
	}
	return collect(
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*rbacv1.Role]{
				resource: resource{gr: rbacv1.Resource("roles"), singular: "role",
					newObj: func() runtime.Object { return &rbacv1.Role{} }, newList: func() runtime.Object { return &rbacv1.RoleList{} },
					printer: printers.Roles},
				namespaced: true,
				validate:   validation.Role,
				serve: guarded(func(ctx context.Context, o runtime.Object) error {
					r := o.(*rbacv1.Role)
					return guard.ConfirmRole(ctx, namespaceOf(ctx, r.Namespace), r.Name, r.Rules, false)
				}),
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*rbacv1.ClusterRole]{
				resource: resource{gr: rbacv1.Resource("clusterroles"), singular: "clusterrole",
					newObj: func() runtime.Object { return &rbacv1.ClusterRole{} }, newList: func() runtime.Object { return &rbacv1.ClusterRoleList{} },
					printer: printers.Roles},
				validate: validation.ClusterRole,
				serve: guarded(func(ctx context.Context, o runtime.Object) error {
					r := o.(*rbacv1.ClusterRole)
					return guard.ConfirmRole(ctx, "", r.Name, r.Rules, r.AggregationRule != nil)
				}),
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*rbacv1.RoleBinding]{
				resource: resource{gr: rbacv1.Resource("rolebindings"), singular: "rolebinding",
					newObj: func() runtime.Object { return &rbacv1.RoleBinding{} }, newList: func() runtime.Object { return &rbacv1.RoleBindingList{} },
					printer: printers.RoleBindings},
				namespaced: true,
				validate:   validation.RoleBinding,
				validateUpdate: func(n, o *rbacv1.RoleBinding) field.ErrorList {
					return append(validation.ObjectMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validation.RoleRefUpdate(n.RoleRef, o.RoleRef)...)
				},
				serve: guarded(func(ctx context.Context, o runtime.Object) error {
					b := o.(*rbacv1.RoleBinding)
					return guard.ConfirmBinding(ctx, namespaceOf(ctx, b.Namespace), b.Name, b.RoleRef)
				}),
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*rbacv1.ClusterRoleBinding]{
				resource: resource{gr: rbacv1.Resource("clusterrolebindings"), singular: "clusterrolebinding",
					newObj: func() runtime.Object { return &rbacv1.ClusterRoleBinding{} }, newList: func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
					printer: printers.ClusterRoleBindings},
				validate: validation.ClusterRoleBinding,
				validateUpdate: func(n, o *rbacv1.ClusterRoleBinding) field.ErrorList {
					return append(validation.ObjectMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validation.RoleRefUpdate(n.RoleRef, o.RoleRef)...)
				},
				serve: guarded(func(ctx context.Context, o runtime.Object) error {
					b := o.(*rbacv1.ClusterRoleBinding)
					return guard.ConfirmBinding(ctx, "", b.Name, b.RoleRef)
				}),
			}))
		},
	)
}

// guardedREST runs the escalation check before a create or an update reaches storage. An
// update that changes only metadata the garbage collector and finalizers write (owner
// references, finalizers) is not a grant and passes, as upstream.
type guardedREST struct {
	*REST
	confirm func(ctx context.Context, obj runtime.Object) error
}

func (r *guardedREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	if err := r.confirm(ctx, obj); err != nil {
		return nil, err
	}
	return r.REST.Create(ctx, obj, createValidation, options)
}

func (r *guardedREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	guarded := rest.WrapUpdatedObjectInfo(objInfo, func(ctx context.Context, obj, old runtime.Object) (runtime.Object, error) {
		if old != nil && onlyGCFieldsChanged(obj, old) {
			return obj, nil
		}
		return obj, r.confirm(ctx, obj)
	})
	return r.REST.Update(ctx, name, guarded, createValidation, updateValidation, forceAllowCreate, options)
}

// onlyGCFieldsChanged reports whether obj differs from old in ownerReferences and
// finalizers at most.
func onlyGCFieldsChanged(obj, old runtime.Object) bool {
	a, b := obj.DeepCopyObject(), old.DeepCopyObject()
	am, _ := objectMeta(a)
	bm, _ := objectMeta(b)
	if am == nil || bm == nil {
		return false
	}
	am.OwnerReferences, bm.OwnerReferences = nil, nil
	am.Finalizers, bm.Finalizers = nil, nil
	am.ResourceVersion, bm.ResourceVersion = "", ""
	am.ManagedFields, bm.ManagedFields = nil, nil
	return apiequality.Semantic.DeepEqual(a, b)
}

// namespaceOf is the object's namespace, or the request's when the body left it empty.
func namespaceOf(ctx context.Context, ns string) string {
	if ns != "" {
		return ns
	}
	ns, _ = genericapirequest.NamespaceFrom(ctx)
	return ns
}
