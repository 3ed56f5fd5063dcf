package registry

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/controlplane/printers"
	"github.com/skiff-sh/skiff/controlplane/validation"
)

func leases(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	st := newStrategy(true, false)
	st.validate = func(_ context.Context, o runtime.Object) field.ErrorList {
		return validation.Lease(o.(*coordinationv1.Lease))
	}
	st.validateUpdate = metaUpdate
	s, err := newREST(opts, resource{
		gr: coordinationv1.Resource("leases"), singular: "lease",
		newObj: func() runtime.Object { return &coordinationv1.Lease{} }, newList: func() runtime.Object { return &coordinationv1.LeaseList{} },
		strategy: st, printer: printers.Leases,
	})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"leases": s}, nil
}
