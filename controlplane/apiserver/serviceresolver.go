package apiserver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// endpointResolver resolves a webhook's Service reference to one of its ready endpoints,
// as kube-aggregator's endpoint resolver: the API server reaches pod addresses directly, so
// a webhook (a CRD's conversion webhook) needs no Service proxy on the server's host.
type endpointResolver struct {
	services rest.Getter
	slices   rest.Lister
}

// ResolveEndpoint implements webhook.ServiceResolver.
func (r endpointResolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	ctx := genericapirequest.WithNamespace(context.Background(), namespace)
	obj, err := r.services.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return PickEndpoint(obj.(*corev1.Service), r.listSlices(ctx, name), port)
}

func (r endpointResolver) listSlices(ctx context.Context, service string) []discoveryv1.EndpointSlice {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: service})
	obj, err := r.slices.List(ctx, &metainternalversion.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil
	}
	return obj.(*discoveryv1.EndpointSliceList).Items
}

// PickEndpoint is a random ready endpoint of svc's port, as https://<address>:<target port>.
func PickEndpoint(svc *corev1.Service, slices []discoveryv1.EndpointSlice, port int32) (*url.URL, error) {
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == port {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil {
		return nil, fmt.Errorf("service %s/%s has no port %d", svc.Namespace, svc.Name, port)
	}
	var ready []string
	for _, s := range slices {
		var target int32
		for _, p := range s.Ports {
			if p.Port != nil && (p.Name == nil && sp.Name == "" || p.Name != nil && *p.Name == sp.Name) {
				target = *p.Port
			}
		}
		if target == 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				ready = append(ready, net.JoinHostPort(a, strconv.Itoa(int(target))))
			}
		}
	}
	if len(ready) == 0 {
		return nil, fmt.Errorf("service %s/%s has no ready endpoints for port %d", svc.Namespace, svc.Name, port)
	}
	return &url.URL{Scheme: "https", Host: ready[rand.IntN(len(ready))]}, nil
}
