package registry

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/controlplane/printers"
	"github.com/skiff-sh/skiff/controlplane/validation"
)

// apps serves apps/v1: the workloads (+status, and scale where they have replicas) and
// ControllerRevisions.
func apps(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	selectorUpdate := func(n, o *metav1.ObjectMeta, ns, os *metav1.LabelSelector) field.ErrorList {
		return append(validation.ObjectMetaUpdate(n, o), validation.SelectorUpdate(ns, os)...)
	}
	return collect(
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*appsv1.Deployment]{
				resource: resource{gr: appsv1.Resource("deployments"), singular: "deployment",
					newObj: func() runtime.Object { return &appsv1.Deployment{} }, newList: func() runtime.Object { return &appsv1.DeploymentList{} },
					printer: printers.Deployments, shortNames: []string{"deploy"}, categories: []string{"all"}},
				namespaced: true, status: true, subresources: scaled("deployments"),
				validate: validation.Deployment,
				validateUpdate: func(n, o *appsv1.Deployment) field.ErrorList {
					return selectorUpdate(&n.ObjectMeta, &o.ObjectMeta, n.Spec.Selector, o.Spec.Selector)
				},
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*appsv1.ReplicaSet]{
				resource: resource{gr: appsv1.Resource("replicasets"), singular: "replicaset",
					newObj: func() runtime.Object { return &appsv1.ReplicaSet{} }, newList: func() runtime.Object { return &appsv1.ReplicaSetList{} },
					printer: printers.ReplicaSets, shortNames: []string{"rs"}, categories: []string{"all"},
					fields: func(obj runtime.Object) fields.Set {
						return fields.Set{"status.replicas": fmt.Sprint(obj.(*appsv1.ReplicaSet).Status.Replicas)}
					}},
				namespaced: true, status: true, subresources: scaled("replicasets"),
				validate: validation.ReplicaSet,
				validateUpdate: func(n, o *appsv1.ReplicaSet) field.ErrorList {
					return selectorUpdate(&n.ObjectMeta, &o.ObjectMeta, n.Spec.Selector, o.Spec.Selector)
				},
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*appsv1.DaemonSet]{
				resource: resource{gr: appsv1.Resource("daemonsets"), singular: "daemonset",
					newObj: func() runtime.Object { return &appsv1.DaemonSet{} }, newList: func() runtime.Object { return &appsv1.DaemonSetList{} },
					printer: printers.DaemonSets, shortNames: []string{"ds"}, categories: []string{"all"}},
				namespaced: true, status: true,
				validate: validation.DaemonSet,
				validateUpdate: func(n, o *appsv1.DaemonSet) field.ErrorList {
					return selectorUpdate(&n.ObjectMeta, &o.ObjectMeta, n.Spec.Selector, o.Spec.Selector)
				},
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*appsv1.StatefulSet]{
				resource: resource{gr: appsv1.Resource("statefulsets"), singular: "statefulset",
					newObj: func() runtime.Object { return &appsv1.StatefulSet{} }, newList: func() runtime.Object { return &appsv1.StatefulSetList{} },
					printer: printers.StatefulSets, shortNames: []string{"sts"}, categories: []string{"all"}},
				namespaced: true, status: true, subresources: scaled("statefulsets"),
				validate: validation.StatefulSet,
				validateUpdate: func(n, o *appsv1.StatefulSet) field.ErrorList {
					return append(validation.ObjectMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validation.StatefulSetUpdate(n, o)...)
				},
			}))
		},
		func() (map[string]rest.Storage, error) {
			return only(serveKind(opts, kind[*appsv1.ControllerRevision]{
				resource: resource{gr: appsv1.Resource("controllerrevisions"), singular: "controllerrevision",
					newObj: func() runtime.Object { return &appsv1.ControllerRevision{} }, newList: func() runtime.Object { return &appsv1.ControllerRevisionList{} },
					printer: printers.New(func(o runtime.Object) []any {
						cr := o.(*appsv1.ControllerRevision)
						owner := "<none>"
						if ref := metav1.GetControllerOf(cr); ref != nil {
							owner = schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).GroupKind().String() + "/" + ref.Name
						}
						return []any{owner, cr.Revision, printers.Age(cr.CreationTimestamp)}
					}, printers.Column{Name: "Controller"}, printers.Column{Name: "Revision", Type: "integer"}, printers.AgeColumn)},
				namespaced: true,
				validate: func(cr *appsv1.ControllerRevision) field.ErrorList {
					return validation.ObjectMeta(&cr.ObjectMeta, true, validation.DNSSubdomain)
				},
			}))
		},
	)
}

// scaled serves <resource>/scale beside a workload with replicas.
func scaled(resource string) func(main *REST, _ *strategy) map[string]rest.Storage {
	return func(main *REST, _ *strategy) map[string]rest.Storage {
		return map[string]rest.Storage{resource + "/scale": &ScaleREST{store: main.Store, replicas: replicasOf}}
	}
}

// scaleOf describes how a workload maps to a Scale: its desired and observed replicas and the
// selector of its pods; set writes desired replicas.
type scaleOf struct {
	spec     **int32
	status   int32
	selector *metav1.LabelSelector
}

func replicasOf(obj runtime.Object) scaleOf {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return scaleOf{&o.Spec.Replicas, o.Status.Replicas, o.Spec.Selector}
	case *appsv1.ReplicaSet:
		return scaleOf{&o.Spec.Replicas, o.Status.Replicas, o.Spec.Selector}
	case *appsv1.StatefulSet:
		return scaleOf{&o.Spec.Replicas, o.Status.Replicas, o.Spec.Selector}
	}
	panic(fmt.Sprintf("no scale for %T", obj))
}

// ScaleREST serves the scale subresource as autoscaling/v1 Scale, the way `kubectl scale`
// and autoscalers use it.
type ScaleREST struct {
	store    *genericregistry.Store
	replicas func(obj runtime.Object) scaleOf
}

var (
	_ rest.Patcher                  = &ScaleREST{}
	_ rest.GroupVersionKindProvider = &ScaleREST{}
)

// New implements rest.Storage.
func (r *ScaleREST) New() runtime.Object { return &autoscalingv1.Scale{} }

// Destroy implements rest.Storage.
func (r *ScaleREST) Destroy() {}

// GroupVersionKind implements rest.GroupVersionKindProvider.
func (r *ScaleREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return autoscalingv1.SchemeGroupVersion.WithKind("Scale")
}

func (r *ScaleREST) toScale(obj runtime.Object) (*autoscalingv1.Scale, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	s := r.replicas(obj)
	sel := ""
	if s.selector != nil {
		if ls, err := metav1.LabelSelectorAsSelector(s.selector); err == nil {
			sel = ls.String()
		}
	}
	want := int32(1)
	if *s.spec != nil {
		want = **s.spec
	}
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
			ResourceVersion: m.GetResourceVersion(), CreationTimestamp: m.GetCreationTimestamp()},
		Spec:   autoscalingv1.ScaleSpec{Replicas: want},
		Status: autoscalingv1.ScaleStatus{Replicas: s.status, Selector: sel},
	}, nil
}

// Get implements rest.Getter.
func (r *ScaleREST) Get(ctx context.Context, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.store.Get(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	return r.toScale(obj)
}

// Update implements rest.Updater: it applies the new Scale's replicas to the workload.
func (r *ScaleREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	apply := func(ctx context.Context, newObj, oldObj runtime.Object) (runtime.Object, error) {
		oldScale, err := r.toScale(oldObj)
		if err != nil {
			return nil, err
		}
		obj, err := objInfo.UpdatedObject(ctx, oldScale)
		if err != nil {
			return nil, err
		}
		scale, ok := obj.(*autoscalingv1.Scale)
		if !ok {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("expected input object type to be Scale, but %T", obj))
		}
		gk := autoscalingv1.SchemeGroupVersion.WithKind("Scale").GroupKind()
		if scale.Spec.Replicas < 0 {
			return nil, apierrors.NewInvalid(gk, name, field.ErrorList{
				field.Invalid(field.NewPath("spec", "replicas"), scale.Spec.Replicas, "must be greater than or equal to 0")})
		}
		if updateValidation != nil {
			if err := updateValidation(ctx, scale, oldScale); err != nil {
				return nil, err
			}
		}
		out := oldObj.DeepCopyObject()
		n := scale.Spec.Replicas
		*r.replicas(out).spec = &n
		if scale.ResourceVersion != "" {
			// A Scale with a resourceVersion is a conditional update of the workload.
			m, _ := meta.Accessor(out)
			m.SetResourceVersion(scale.ResourceVersion)
		}
		return out, nil
	}
	obj, _, err := r.store.Update(ctx, name, rest.DefaultUpdatedObjectInfo(nil, apply), nil, nil, false, options)
	if err != nil {
		return nil, false, err
	}
	s, err := r.toScale(obj)
	return s, false, err
}

// ConvertToTable implements rest.TableConvertor.
func (r *ScaleREST) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	return rest.NewDefaultTableConvertor(autoscalingv1.Resource("scale")).ConvertToTable(ctx, obj, opts)
}
