package registry

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/controlplane/allocator"
	"github.com/skiff-sh/skiff/controlplane/printers"
	"github.com/skiff-sh/skiff/controlplane/validation"
)

func networkPolicies(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return only(serveKind(opts, kind[*networkingv1.NetworkPolicy]{
		resource: resource{gr: networkingv1.Resource("networkpolicies"), singular: "networkpolicy",
			newObj: func() runtime.Object { return &networkingv1.NetworkPolicy{} }, newList: func() runtime.Object { return &networkingv1.NetworkPolicyList{} },
			printer: printers.NetworkPolicies, shortNames: []string{"netpol"}},
		namespaced: true,
		validate:   validation.NetworkPolicy,
	}))
}

// serviceCIDRs serves networking.k8s.io/v1 ServiceCIDRs (`kubectl get servicecidrs`,
// kube-proxy's nftables mode watches them): the API server keeps the default one for its
// --service-cidr; validation refuses others, which skiff's allocator would not use.
func serviceCIDRs(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return only(serveKind(opts, kind[*networkingv1.ServiceCIDR]{
		resource: resource{gr: networkingv1.Resource("servicecidrs"), singular: "servicecidr",
			newObj: func() runtime.Object { return &networkingv1.ServiceCIDR{} }, newList: func() runtime.Object { return &networkingv1.ServiceCIDRList{} },
			printer: printers.ServiceCIDRs},
		status:         true,
		validate:       validation.ServiceCIDR,
		validateUpdate: validation.ServiceCIDRUpdate,
	}))
}

// ipAddresses serves networking.k8s.io/v1 IPAddresses (`kubectl get ipaddresses`): one per
// allocated ClusterIP, named by the address, with the Service as its parent, as upstream's
// allocator keeps them — they are the allocator's reservations (see ipAddressStore). Others
// may be created by hand, which reserves the address.
func ipAddresses(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return only(serveKind(opts, kind[*networkingv1.IPAddress]{
		resource: resource{gr: networkingv1.Resource("ipaddresses"), singular: "ipaddress",
			newObj: func() runtime.Object { return &networkingv1.IPAddress{} }, newList: func() runtime.Object { return &networkingv1.IPAddressList{} },
			printer: printers.IPAddresses},
		validate:       validation.IPAddress,
		validateUpdate: validation.IPAddressUpdate,
	}))
}

// LegacyIPPrefix is where skiff kept ClusterIP reservations before IPAddresses: one etcd key
// per address. Such keys are still honoured (an address held there is not handed out again)
// until the repair loop has made each an IPAddress and removed it.
const LegacyIPPrefix = "/registry/skiff/ranges/serviceips/"

// LegacyStore reads and removes those keys.
type LegacyStore interface {
	Held(ctx context.Context, key string) (bool, error)
	Release(ctx context.Context, key string) error
}

// ipAddressStore is the ClusterIP allocator's Store: reserving an address creates its
// IPAddress (the create fails if any IPAddress of that name exists, so two API servers never
// hand out one address), releasing deletes it if the allocator made it. The owner is the
// Service's "namespace/name".
type ipAddressStore struct {
	store  *genericregistry.Store
	legacy LegacyStore // nil: none
}

// Reserve implements allocator.Store.
func (s *ipAddressStore) Reserve(ctx context.Context, key, owner string) (bool, error) {
	ip, err := netip.ParseAddr(key)
	if err != nil {
		return false, fmt.Errorf("reserving %q: not an address", key)
	}
	if s.legacy != nil {
		held, err := s.legacy.Held(ctx, LegacyIPPrefix+ip.String())
		if err != nil || held {
			return false, err
		}
	}
	namespace, name, _ := strings.Cut(owner, "/")
	ctx = genericapirequest.WithNamespace(ctx, metav1.NamespaceNone)
	_, err = s.store.Create(ctx, allocator.NewIPAddress(ip, namespace, name), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// Release implements allocator.Store: the address's IPAddress goes if the allocator made it
// (one made by hand stays), and so does a legacy reservation.
func (s *ipAddressStore) Release(ctx context.Context, key string) error {
	if s.legacy != nil {
		if err := s.legacy.Release(ctx, LegacyIPPrefix+key); err != nil {
			return err
		}
	}
	ctx = genericapirequest.WithNamespace(ctx, metav1.NamespaceNone)
	obj, err := s.store.Get(ctx, key, &metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	ip := obj.(*networkingv1.IPAddress)
	if ip.Labels[networkingv1.LabelManagedBy] != allocator.ManagedBy {
		return nil
	}
	_, _, err = s.store.Delete(ctx, key, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ip.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or replaced by another's reservation
	}
	return err
}
