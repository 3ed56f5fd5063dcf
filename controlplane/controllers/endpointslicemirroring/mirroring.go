// Package endpointslicemirroring mirrors the Endpoints of Services without a selector —
// endpoints an operator or an external controller writes by hand, an external database
// behind a Service, say — into EndpointSlices, as upstream's endpointslicemirroring
// controller does, so that everything reading slices (the service proxy, DNS) sees them.
package endpointslicemirroring

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/controlplane/controllers/endpointslice"
	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's).
const Name = "endpointslicemirroring-controller"

// ManagedBy is the managed-by label value of the slices this controller owns.
const ManagedBy = "endpointslicemirroring-controller.k8s.io"

// SkipMirror on an Endpoints object keeps it from being mirrored, as upstream.
const SkipMirror = "endpointslice.kubernetes.io/skip-mirror"

// MaxEndpoints is how many addresses of one subset are mirrored, as upstream's default.
const MaxEndpoints = 1000

// Desired is the slices that mirror an Endpoints object: one per subset and address family,
// ready addresses ready, notReadyAddresses not, with hostname, nodeName and targetRef. It is
// the decision core: no I/O.
func Desired(eps *corev1.Endpoints) []discoveryv1.EndpointSlice {
	var out []discoveryv1.EndpointSlice
	for _, ss := range eps.Subsets {
		var ports []discoveryv1.EndpointPort
		for _, p := range ss.Ports {
			ports = append(ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Port: ptr.To(p.Port),
				Protocol: ptr.To(p.Protocol), AppProtocol: p.AppProtocol})
		}
		byFamily := map[discoveryv1.AddressType][]discoveryv1.Endpoint{}
		add := func(a corev1.EndpointAddress, ready bool) {
			ip, err := netip.ParseAddr(a.IP)
			if err != nil {
				return // not an address a slice can hold; upstream skips it too
			}
			family := discoveryv1.AddressTypeIPv4
			if ip.Is6() && !ip.Is4In6() {
				family = discoveryv1.AddressTypeIPv6
			}
			if len(byFamily[family]) >= MaxEndpoints {
				return
			}
			ep := discoveryv1.Endpoint{Addresses: []string{a.IP}, TargetRef: a.TargetRef, NodeName: a.NodeName,
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}
			if a.Hostname != "" {
				ep.Hostname = ptr.To(a.Hostname)
			}
			byFamily[family] = append(byFamily[family], ep)
		}
		for _, a := range ss.Addresses {
			add(a, true)
		}
		for _, a := range ss.NotReadyAddresses {
			add(a, false)
		}
		for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
			if eps := byFamily[family]; len(eps) > 0 {
				out = append(out, discoveryv1.EndpointSlice{AddressType: family, Endpoints: eps, Ports: ports})
			}
		}
	}
	return out
}

// Controller reconciles mirrored EndpointSlices.
type Controller struct {
	client    kubernetes.Interface
	services  corelisters.ServiceLister
	endpoints corelisters.EndpointsLister
	slices    discoverylisters.EndpointSliceLister
	synced    []cache.InformerSynced
	loop      *loop.Loop
}

// New wires the controller: a change to an Endpoints object, its Service or a mirrored
// slice syncs that Endpoints object's key.
func New(client kubernetes.Interface, svc coreinformers.ServiceInformer, eps coreinformers.EndpointsInformer,
	slices discoveryinformers.EndpointSliceInformer, log *slog.Logger) *Controller {
	c := &Controller{client: client, services: svc.Lister(), endpoints: eps.Lister(), slices: slices.Lister(),
		synced: []cache.InformerSynced{svc.Informer().HasSynced, eps.Informer().HasSynced, slices.Informer().HasSynced}}
	c.loop = loop.New(Name, c.sync, log)
	_, _ = eps.Informer().AddEventHandler(c.loop.Handler())
	_, _ = svc.Informer().AddEventHandler(c.loop.Handler())
	_, _ = slices.Informer().AddEventHandler(endpointslice.ManagedSlices(ManagedBy, c.loop.Add))
	return c
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	c.loop.Run(ctx, 2)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	var want []discoveryv1.EndpointSlice
	eps, err := c.endpoints.Endpoints(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		svc, err := c.services.Services(ns).Get(name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return err
		case svc.Spec.Selector == nil && eps.Labels[SkipMirror] != "true" && eps.DeletionTimestamp == nil:
			// A Service with a selector has its slices from the endpointslice controller.
			want = Desired(eps)
			for i := range want {
				want[i].Labels = sliceLabels(eps, name)
			}
		}
	}
	return c.reconcile(ctx, ns, name, eps, want)
}

// sliceLabels are the Endpoints' labels with the service name and managed-by labels.
func sliceLabels(eps *corev1.Endpoints, service string) map[string]string {
	l := map[string]string{}
	for k, v := range eps.Labels {
		if k != SkipMirror {
			l[k] = v
		}
	}
	l[discoveryv1.LabelServiceName] = service
	l[discoveryv1.LabelManagedBy] = ManagedBy
	return l
}

func (c *Controller) reconcile(ctx context.Context, ns, service string, eps *corev1.Endpoints, want []discoveryv1.EndpointSlice) error {
	existing, err := c.slices.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{
		discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: ManagedBy}))
	if err != nil {
		return err
	}
	groups := make([]endpointslice.Group, 0, len(want))
	for _, w := range want {
		groups = append(groups, endpointslice.Group{AddressType: w.AddressType, Ports: w.Ports, Endpoints: w.Endpoints})
	}
	var labelSet map[string]string
	if len(want) > 0 {
		labelSet = want[0].Labels
	}
	// Subsets of one address type and ports share slices, and an address stays in the slice
	// that lists it (see endpointslice.Place); with nothing to mirror, every slice goes.
	plan := endpointslice.Place(existing, groups, MaxEndpoints, func(g endpointslice.Group) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{GenerateName: service + "-", Namespace: ns, Labels: labelSet,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(eps, corev1.SchemeGroupVersion.WithKind("Endpoints"))}},
			AddressType: g.AddressType, Endpoints: g.Endpoints, Ports: g.Ports,
		}
	})
	api := c.client.DiscoveryV1().EndpointSlices(ns)
	var errs []error
	for _, s := range plan.Create {
		if _, err := api.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range plan.Update {
		if _, err := api.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range plan.Delete {
		if err := api.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
