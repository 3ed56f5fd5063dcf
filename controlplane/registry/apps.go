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

func apps(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	out := map[string]rest.Storage{}

	ds := newStrategy(true, true)
	ds.validate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		return validation.Deployment(obj.(*appsv1.Deployment))
	}
	ds.validateUpdate = func(obj, old runtime.Object) field.ErrorList {
		n, o := obj.(*appsv1.Deployment), old.(*appsv1.Deployment)
		return append(validation.ObjectMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validation.SelectorUpdate(n.Spec.Selector, o.Spec.Selector)...)
	}
	deploy, err := newREST(opts, resource{
		gr: appsv1.Resource("deployments"), singular: "deployment",
		newObj: func() runtime.Object { return &appsv1.Deployment{} }, newList: func() runtime.Object { return &appsv1.DeploymentList{} },
		strategy: ds, printer: printers.Deployments, shortNames: []string{"deploy"}, categories: []string{"all"},
	})
	if err != nil {
		return nil, err
	}
	out["deployments"] = deploy
	out["deployments/status"] = newStatusREST(deploy, statusStrategy{strategy: ds})
	out["deployments/scale"] = &ScaleREST{store: deploy.Store, replicas: replicasOf}

	rss := newStrategy(true, true)
	rss.validate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		return validation.ReplicaSet(obj.(*appsv1.ReplicaSet))
	}
	rss.validateUpdate = func(obj, old runtime.Object) field.ErrorList {
		n, o := obj.(*appsv1.ReplicaSet), old.(*appsv1.ReplicaSet)
		return append(validation.ObjectMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validation.SelectorUpdate(n.Spec.Selector, o.Spec.Selector)...)
	}
	rs, err := newREST(opts, resource{
		gr: appsv1.Resource("replicasets"), singular: "replicaset",
		newObj: func() runtime.Object { return &appsv1.ReplicaSet{} }, newList: func() runtime.Object { return &appsv1.ReplicaSetList{} },
		strategy: rss, printer: printers.ReplicaSets, shortNames: []string{"rs"}, categories: []string{"all"},
		fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"status.replicas": fmt.Sprint(obj.(*appsv1.ReplicaSet).Status.Replicas)}
		},
	})
	if err != nil {
		return nil, err
	}
	out["replicasets"] = rs
	out["replicasets/status"] = newStatusREST(rs, statusStrategy{strategy: rss})
	out["replicasets/scale"] = &ScaleREST{store: rs.Store, replicas: replicasOf}

	dss := newStrategy(true, true)
	dss.validate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		return validation.DaemonSet(obj.(*appsv1.DaemonSet))
	}
	dss.validateUpdate = func(obj, old runtime.Object) field.ErrorList {
		n, o := obj.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet)
		return append(validation.ObjectMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validation.SelectorUpdate(n.Spec.Selector, o.Spec.Selector)...)
	}
	daemons, err := newREST(opts, resource{
		gr: appsv1.Resource("daemonsets"), singular: "daemonset",
		newObj: func() runtime.Object { return &appsv1.DaemonSet{} }, newList: func() runtime.Object { return &appsv1.DaemonSetList{} },
		strategy: dss, printer: printers.DaemonSets, shortNames: []string{"ds"}, categories: []string{"all"},
	})
	if err != nil {
		return nil, err
	}
	out["daemonsets"] = daemons
	out["daemonsets/status"] = newStatusREST(daemons, statusStrategy{strategy: dss})

	sss := newStrategy(true, true)
	sss.validate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		return validation.StatefulSet(obj.(*appsv1.StatefulSet))
	}
	sss.validateUpdate = func(obj, old runtime.Object) field.ErrorList {
		n, o := obj.(*appsv1.StatefulSet), old.(*appsv1.StatefulSet)
		return append(validation.ObjectMetaUpdate(&n.ObjectMeta, &o.ObjectMeta), validation.StatefulSetUpdate(n, o)...)
	}
	sets, err := newREST(opts, resource{
		gr: appsv1.Resource("statefulsets"), singular: "statefulset",
		newObj: func() runtime.Object { return &appsv1.StatefulSet{} }, newList: func() runtime.Object { return &appsv1.StatefulSetList{} },
		strategy: sss, printer: printers.StatefulSets, shortNames: []string{"sts"}, categories: []string{"all"},
	})
	if err != nil {
		return nil, err
	}
	out["statefulsets"] = sets
	out["statefulsets/status"] = newStatusREST(sets, statusStrategy{strategy: sss})
	out["statefulsets/scale"] = &ScaleREST{store: sets.Store, replicas: replicasOf}

	crs, err := simple(opts, resource{
		gr: appsv1.Resource("controllerrevisions"), singular: "controllerrevision",
		newObj: func() runtime.Object { return &appsv1.ControllerRevision{} }, newList: func() runtime.Object { return &appsv1.ControllerRevisionList{} },
		printer: printers.New(func(o runtime.Object) []any {
			cr := o.(*appsv1.ControllerRevision)
			owner := "<none>"
			if ref := metav1.GetControllerOf(cr); ref != nil {
				owner = schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).GroupKind().String() + "/" + ref.Name
			}
			return []any{owner, cr.Revision, printers.Age(cr.CreationTimestamp)}
		}, printers.Column{Name: "Controller"}, printers.Column{Name: "Revision", Type: "integer"}, printers.AgeColumn),
	}, func(o runtime.Object) field.ErrorList {
		cr := o.(*appsv1.ControllerRevision)
		return validation.ObjectMeta(&cr.ObjectMeta, true, validation.DNSSubdomain)
	}, metaUpdate)
	if err != nil {
		return nil, err
	}
	out["controllerrevisions"] = crs
	return out, nil
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
