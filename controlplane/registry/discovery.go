package registry

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/controlplane/printers"
	"github.com/skiff-sh/skiff/controlplane/validation"
)

func endpointSlices(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	s, err := simple(opts, resource{
		gr: discoveryv1.Resource("endpointslices"), singular: "endpointslice",
		newObj: func() runtime.Object { return &discoveryv1.EndpointSlice{} }, newList: func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
		printer: printers.EndpointSlices,
	}, func(o runtime.Object) field.ErrorList {
		return validation.EndpointSlice(o.(*discoveryv1.EndpointSlice))
	},
		func(obj, old runtime.Object) field.ErrorList {
			n, o := obj.(*discoveryv1.EndpointSlice), old.(*discoveryv1.EndpointSlice)
			errs := validation.ObjectMetaUpdate(&n.ObjectMeta, &o.ObjectMeta)
			if n.AddressType != o.AddressType {
				errs = append(errs, field.Invalid(field.NewPath("addressType"), n.AddressType, "field is immutable"))
			}
			return errs
		})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"endpointslices": s}, nil
}
