// Package endpointslice publishes, for every Service with a selector, EndpointSlices of its
// pods (ready, serving and terminating endpoints with ports, nodeName and targetRef, at most
// 100 a slice) and the legacy Endpoints object, as upstream's endpointslice and endpoints
// controllers do.
package endpointslice

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/controlplane/controllers/podindex"
	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's).
const Name = "endpointslice-controller"

// ManagedBy is the managed-by label value of the slices this controller owns.
const ManagedBy = "endpointslice-controller.k8s.io"

// Controller reconciles EndpointSlices and Endpoints.
type Controller struct {
	// podIndex finds a Service's pods through the label index (podindex).
	podIndex  podindex.Lister
	client    kubernetes.Interface
	services  corelisters.ServiceLister
	pods      corelisters.PodLister
	slices    discoverylisters.EndpointSliceLister
	endpoints corelisters.EndpointsLister
	synced    []cache.InformerSynced
	loop      *loop.Loop
	writes    *tracker
}

// New wires the controller.
func New(client kubernetes.Interface, svc coreinformers.ServiceInformer, pods coreinformers.PodInformer,
	slices discoveryinformers.EndpointSliceInformer, eps coreinformers.EndpointsInformer, log *slog.Logger) *Controller {
	_ = podindex.Add(pods.Informer()) // without it, Selected lists the namespace
	c := &Controller{client: client, services: svc.Lister(), pods: pods.Lister(), slices: slices.Lister(), endpoints: eps.Lister(),
		podIndex: podindex.Lister{Indexer: pods.Informer().GetIndexer()},
		synced:   []cache.InformerSynced{svc.Informer().HasSynced, pods.Informer().HasSynced, slices.Informer().HasSynced, eps.Informer().HasSynced},
		writes:   newTracker()}
	c.loop = loop.New(Name, c.sync, log)
	_, _ = svc.Informer().AddEventHandler(c.loop.Handler())
	onPod := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		list, _ := c.services.Services(p.Namespace).List(labels.Everything())
		for _, s := range list {
			if s.Spec.Selector != nil && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(p.Labels)) {
				c.loop.Add(s.Namespace + "/" + s.Name)
			}
		}
	}
	_, _ = pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onPod,
		UpdateFunc: func(old, obj any) {
			// Most pod updates (status conditions other than Ready, annotations, a
			// container's restart count) change no endpoint: skip them, as upstream does.
			if o, ok := old.(*corev1.Pod); ok {
				if p, ok := obj.(*corev1.Pod); ok && !EndpointsChanged(o, p) {
					return
				}
			}
			onPod(old) // labels may have changed: the old services lose the pod
			onPod(obj)
		},
		DeleteFunc: onPod,
	})
	_, _ = slices.Informer().AddEventHandler(ManagedSlices(ManagedBy, c.loop.Add))
	// Our own writes, as the cache sees them (see tracker).
	observe := func(obj any, deleted bool) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj, deleted = t.Obj, true
		}
		if s, ok := obj.(*discoveryv1.EndpointSlice); ok && s.Labels[discoveryv1.LabelManagedBy] == ManagedBy {
			key := s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]
			c.writes.observe(key, s, deleted)
			if deleted {
				c.loop.Add(key) // a deletion of ours seen: the waiting sync may go on
			}
		}
	}
	_, _ = slices.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { observe(o, false) },
		UpdateFunc: func(_, o any) { observe(o, false) },
		DeleteFunc: func(o any) { observe(o, true) },
	})
	return c
}

// ManagedSlices is a handler that, when a slice a controller manages (label managed-by) is
// changed or deleted behind its back, queues that slice's Service ("namespace/name") again.
func ManagedSlices(managedBy string, add func(key string)) cache.ResourceEventHandler {
	onSlice := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if s, ok := obj.(*discoveryv1.EndpointSlice); ok && s.Labels[discoveryv1.LabelManagedBy] == managedBy {
			add(s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName])
		}
	}
	return cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, o any) { onSlice(o) }, DeleteFunc: onSlice}
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	c.loop.Run(ctx, 5)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.writes.forget(key)
		// Owner references let the garbage collector remove our slices; the Endpoints object
		// has none (upstream's never had), so it goes here, as upstream's endpoints controller
		// deletes it: whoever wrote it, a Service's Endpoints do not outlive it.
		if err := c.client.CoreV1().Endpoints(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	}
	if err != nil {
		return err
	}
	if svc.Spec.Selector == nil || svc.DeletionTimestamp != nil {
		return nil
	}
	pods, err := c.podIndex.Selected(ns, svc.Spec.Selector)
	if err != nil {
		return err
	}
	groups := Desired(svc, pods)
	return errors.Join(c.reconcileSlices(ctx, svc, groups), c.reconcileEndpoints(ctx, svc, groups))
}

func (c *Controller) reconcileSlices(ctx context.Context, svc *corev1.Service, want []Group) error {
	existing, err := c.slices.EndpointSlices(svc.Namespace).List(labels.SelectorFromSet(labels.Set{
		discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: ManagedBy}))
	if err != nil {
		return err
	}
	key := svc.Namespace + "/" + svc.Name
	if c.writes.stale(key, existing) {
		// The cache has not seen our last writes yet; their events queue this key again.
		c.loop.AddAfter(key, 100*time.Millisecond)
		return nil
	}
	// An address type of the Service without endpoints keeps one empty slice carrying the
	// ports, as upstream keeps a placeholder per address type.
	for _, t := range AddressTypes(svc) {
		if !slices.ContainsFunc(want, func(g Group) bool { return g.AddressType == t }) {
			want = append(want, Group{AddressType: t, Ports: portsFor(svc, &corev1.Pod{})})
		}
	}
	owner := metav1.NewControllerRef(svc, corev1.SchemeGroupVersion.WithKind("Service"))
	newSlice := func(g Group) *discoveryv1.EndpointSlice {
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				GenerateName:    svc.Name + "-",
				Namespace:       svc.Namespace,
				Labels:          map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: ManagedBy},
				OwnerReferences: []metav1.OwnerReference{*owner},
			},
			AddressType: g.AddressType,
			Endpoints:   g.Endpoints,
			Ports:       g.Ports,
		}
		for k, v := range svc.Labels {
			if _, reserved := slice.Labels[k]; !reserved {
				slice.Labels[k] = v
			}
		}
		return slice
	}
	plan := Place(existing, want, MaxEndpointsPerSlice, newSlice)
	slices := c.client.DiscoveryV1().EndpointSlices(svc.Namespace)
	var errs []error
	for _, s := range plan.Create {
		got, err := slices.Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.writes.record(key, got.Name, got.ResourceVersion)
	}
	for _, upd := range plan.Update {
		got, err := slices.Update(ctx, upd, metav1.UpdateOptions{})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.writes.record(key, got.Name, got.ResourceVersion)
	}
	for _, s := range plan.Delete {
		if err := slices.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		c.writes.record(key, s.Name, "")
	}
	return errors.Join(errs...)
}

func (c *Controller) reconcileEndpoints(ctx context.Context, svc *corev1.Service, groups []Group) error {
	// v1 Endpoints hold one family, the Service's primary, as upstream's controller writes them.
	primary := AddressTypes(svc)[0]
	subsets := LegacyEndpoints(slices.DeleteFunc(slices.Clone(groups), func(g Group) bool { return g.AddressType != primary }))
	cur, err := c.endpoints.Endpoints(svc.Namespace).Get(svc.Name)
	if apierrors.IsNotFound(err) {
		ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace, Labels: svc.Labels}, Subsets: subsets}
		_, err = c.client.CoreV1().Endpoints(svc.Namespace).Create(ctx, ep, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	if apiequality.Semantic.DeepEqual(cur.Subsets, subsets) {
		return nil
	}
	upd := cur.DeepCopy()
	upd.Subsets = subsets
	_, err = c.client.CoreV1().Endpoints(svc.Namespace).Update(ctx, upd, metav1.UpdateOptions{})
	return err
}
