package registry

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
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

func networkPolicies(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	s, err := simple(opts, resource{
		gr: networkingv1.Resource("networkpolicies"), singular: "networkpolicy",
		newObj: func() runtime.Object { return &networkingv1.NetworkPolicy{} }, newList: func() runtime.Object { return &networkingv1.NetworkPolicyList{} },
		printer: printers.NetworkPolicies, shortNames: []string{"netpol"},
	}, func(o runtime.Object) field.ErrorList {
		return validation.NetworkPolicy(o.(*networkingv1.NetworkPolicy))
	}, metaUpdate)
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"networkpolicies": s}, nil
}

// serviceCIDRs serves networking.k8s.io/v1 ServiceCIDRs (`kubectl get servicecidrs`,
// kube-proxy's nftables mode watches them): the API server keeps the default one for its
// --service-cidr; validation refuses others, which skiff's allocator would not use.
func serviceCIDRs(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	s := newStrategy(false, true)
	s.validate = func(_ context.Context, o runtime.Object) field.ErrorList {
		return validation.ServiceCIDR(o.(*networkingv1.ServiceCIDR))
	}
	s.validateUpdate = func(obj, old runtime.Object) field.ErrorList {
		return validation.ServiceCIDRUpdate(obj.(*networkingv1.ServiceCIDR), old.(*networkingv1.ServiceCIDR))
	}
	main, err := newREST(opts, resource{
		gr: networkingv1.Resource("servicecidrs"), singular: "servicecidr",
		newObj: func() runtime.Object { return &networkingv1.ServiceCIDR{} }, newList: func() runtime.Object { return &networkingv1.ServiceCIDRList{} },
		strategy: s, printer: printers.ServiceCIDRs,
	})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"servicecidrs": main, "servicecidrs/status": newStatusREST(main, statusStrategy{strategy: s})}, nil
}

// SelfSubjectReviewREST answers `kubectl auth whoami`.
type SelfSubjectReviewREST struct{}

var (
	_ rest.Creater              = SelfSubjectReviewREST{}
	_ rest.Scoper               = SelfSubjectReviewREST{}
	_ rest.SingularNameProvider = SelfSubjectReviewREST{}
)

// New implements rest.Storage.
func (SelfSubjectReviewREST) New() runtime.Object { return &authenticationv1.SelfSubjectReview{} }

// Destroy implements rest.Storage.
func (SelfSubjectReviewREST) Destroy() {}

// NamespaceScoped implements rest.Scoper.
func (SelfSubjectReviewREST) NamespaceScoped() bool { return false }

// GetSingularName implements rest.SingularNameProvider.
func (SelfSubjectReviewREST) GetSingularName() string { return "selfsubjectreview" }

// Create returns the requester's identity.
func (SelfSubjectReviewREST) Create(ctx context.Context, obj runtime.Object, _ rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewUnauthorized("no user")
	}
	extra := map[string]authenticationv1.ExtraValue{}
	for k, v := range u.GetExtra() {
		extra[k] = v
	}
	return &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
		UserInfo: authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: extra},
	}}, nil
}
