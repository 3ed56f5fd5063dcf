package registry

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
)

// kind describes a resource: what the generic store needs (resource), and the rules that
// differ between resources as hooks on the common ones. Every served resource is a kind;
// its file in this package (named by API group) holds the kind and any subresource types.
type kind[T runtime.Object] struct {
	resource
	namespaced bool
	// status serves <resource>/status; the main resource then ignores status changes, and
	// the status a client sends on create is cleared (as upstream) unless keepStatusOnCreate.
	status bool
	// keepStatusOnCreate keeps what a client sends as status on create (Nodes, as upstream).
	keepStatusOnCreate bool
	// prepareForCreate sets fields after the status is cleared (PV and PVC phases).
	prepareForCreate func(obj T)
	// prepareForUpdate adjusts obj from old on update, after status and generation.
	prepareForUpdate func(obj, old T)
	validate         func(obj T) field.ErrorList
	// validateUpdate checks an update beyond validate; nil: metadata's immutable fields.
	validateUpdate func(obj, old T) field.ErrorList
	// validateStatus checks an update through <resource>/status.
	validateStatus func(obj, old T) field.ErrorList
	// allowCreateOnUpdate lets PUT create (Leases, Endpoints, as upstream).
	allowCreateOnUpdate bool
	// adjust changes the main store (delete strategy, hooks) before subresources copy it.
	adjust func(main *REST, s *strategy)
	// subresources are served beside the main resource, by their path ("deployments/scale").
	subresources func(main *REST, s *strategy) map[string]rest.Storage
	// serve is the main resource's storage when it adds behaviour to the store's (refused
	// deletes, extra verbs); nil serves the store itself.
	serve func(main *REST) rest.Storage
}

// serveKind returns the storages of k: "<resource>", with status "<resource>/status", and
// k's subresources; and the main store (for callers that build on it).
func serveKind[T runtime.Object](opts generic.RESTOptionsGetter, k kind[T]) (map[string]rest.Storage, *REST, error) {
	s := newStrategy(k.namespaced, k.status)
	s.allowCreateOnUpdate = k.allowCreateOnUpdate
	s.prepareForCreate = func(obj runtime.Object) {
		if k.status && !k.keepStatusOnCreate {
			clearStatus(obj)
		}
		if k.prepareForCreate != nil {
			k.prepareForCreate(obj.(T))
		}
	}
	if k.prepareForUpdate != nil {
		s.prepareForUpdate = func(obj, old runtime.Object) { k.prepareForUpdate(obj.(T), old.(T)) }
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
	if k.adjust != nil {
		k.adjust(main, s)
	}
	out := map[string]rest.Storage{r.gr.Resource: main}
	if k.serve != nil {
		out[r.gr.Resource] = k.serve(main)
	}
	if k.status {
		st := statusStrategy{strategy: s}
		if k.validateStatus != nil {
			st.validateStatus = func(obj, old runtime.Object) field.ErrorList { return k.validateStatus(obj.(T), old.(T)) }
		}
		out[r.gr.Resource+"/status"] = newStatusREST(main, st)
	}
	if k.subresources != nil {
		for path, sub := range k.subresources(main, s) {
			out[path] = sub
		}
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
