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

// endpointSlices serves discovery.k8s.io/v1 EndpointSlices; the address type is immutable.
func endpointSlices(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return only(serveKind(opts, kind[*discoveryv1.EndpointSlice]{
		resource: resource{gr: discoveryv1.Resource("endpointslices"), singular: "endpointslice",
			newObj: func() runtime.Object { return &discoveryv1.EndpointSlice{} }, newList: func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
			printer: printers.EndpointSlices},
		namespaced: true,
		validate:   validation.EndpointSlice,
		validateUpdate: func(n, o *discoveryv1.EndpointSlice) field.ErrorList {
			errs := validation.ObjectMetaUpdate(&n.ObjectMeta, &o.ObjectMeta)
			if n.AddressType != o.AddressType {
				errs = append(errs, field.Invalid(field.NewPath("addressType"), n.AddressType, "field is immutable"))
			}
			return errs
		},
	}))
}
