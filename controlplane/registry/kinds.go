package registry

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
)

// kind describes a resource served with the common rules: validation on create and
// update, and optionally a status subresource whose status is cleared on create.
type kind[T runtime.Object] struct {
	resource
	namespaced bool
	// status serves <resource>/status; the main resource then ignores status changes.
	status bool
	// prepareForCreate sets fields after the status is cleared (PV and PVC phases).
	prepareForCreate func(obj T)
	validate         func(obj T) field.ErrorList
	validateUpdate   func(obj, old T) field.ErrorList
}

// serveKind returns the storages of k: "<resource>" and, with status, "<resource>/status".
func serveKind[T runtime.Object](opts generic.RESTOptionsGetter, k kind[T]) (map[string]rest.Storage, *REST, error) {
	s := newStrategy(k.namespaced, k.status)
	s.prepareForCreate = func(obj runtime.Object) {
		if k.status {
			clearStatus(obj)
		}
		if k.prepareForCreate != nil {
			k.prepareForCreate(obj.(T))
		}
	}
	if k.validate != nil {
		s.validate = func(_ context.Context, obj runtime.Object) field.ErrorList { return k.validate(obj.(T)) }
	}
	s.validateUpdate = func(obj, old runtime.Object) field.ErrorList {
		if k.validateUpdate != nil {
			return k.validateUpdate(obj.(T), old.(T))
		}
		return metaUpdate(obj, old)
	}
	r := k.resource
	r.strategy = s
	main, err := newREST(opts, r)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]rest.Storage{r.gr.Resource: main}
	if k.status {
		out[r.gr.Resource+"/status"] = newStatusREST(main, statusStrategy{strategy: s})
	}
	return out, main, nil
}

// clearStatus zeroes obj.Status: what clients send as status on create is not theirs to set.
func clearStatus(obj runtime.Object) {
	v := reflect.ValueOf(obj).Elem().FieldByName("Status")
	if v.IsValid() && v.CanSet() {
		v.Set(reflect.Zero(v.Type()))
	}
}
