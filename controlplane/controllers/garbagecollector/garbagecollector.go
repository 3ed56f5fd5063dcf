// Package garbagecollector deletes objects whose owners are gone, as upstream's garbage
// collector: it watches the metadata of every listable resource, keeps an ownership graph by
// UID, deletes dependents of deleted owners (background deletion), deletes the dependents of
// owners being deleted in the foreground and then lets the owner go, and orphans dependents
// (removes the owner reference) for owners deleted with propagationPolicy=Orphan.
package garbagecollector

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	sharedinformers "github.com/skiff-sh/skiff/internal/informers"
	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's).
const Name = "generic-garbage-collector"

// ignored resources never own or depend on anything worth collecting.
var ignored = sets.New("events", "leases")

// SharedInformers finds an informer another part of the process already runs for a resource
// of kind gvk (a controller's typed informer), or returns nil. The collector watches such a
// resource through that informer instead of opening a second watch of its metadata, as
// upstream's collector takes its informers from the controller manager's shared factory.
type SharedInformers func(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind) cache.SharedIndexInformer

// Controller collects garbage.
type Controller struct {
	md        metadata.Interface
	shared    SharedInformers
	discovery discovery.DiscoveryInterface
	mapper    *restmapper.DeferredDiscoveryRESTMapper
	graph     *graph
	loop      *loop.Loop
	log       *slog.Logger
	synced    []cache.InformerSynced
	factory   metadatainformer.SharedInformerFactory

	mu      sync.Mutex
	watched sets.Set[schema.GroupVersionResource]
}

// New wires the collector to every resource discovery lists: through shared's informer where
// it has one (shared may be nil), else to the resource's metadata.
func New(md metadata.Interface, disc discovery.DiscoveryInterface, shared SharedInformers, log *slog.Logger) *Controller {
	c := &Controller{md: md, shared: shared, discovery: disc, graph: newGraph(), log: log.With("controller", Name),
		mapper:  restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
		factory: metadatainformer.NewSharedInformerFactoryWithOptions(md, 0, metadatainformer.WithTransform(sharedinformers.StripManagedFields)), watched: sets.New[schema.GroupVersionResource]()}
	c.loop = loop.New(Name, c.sync, log)
	return c
}

func (c *Controller) watch(gvr schema.GroupVersionResource, kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watched.Has(gvr) {
		return
	}
	c.watched.Insert(gvr)
	var inf cache.SharedIndexInformer
	if c.shared != nil {
		inf = c.shared(gvr, gvr.GroupVersion().WithKind(kind))
	}
	if inf == nil {
		inf = c.factory.ForResource(gvr).Informer()
	}
	// observe reads only object metadata, so full objects from a shared typed informer and
	// PartialObjectMetadata from the collector's own are alike to it.
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.observe(gvr, obj, false) },
		UpdateFunc: func(_, obj any) { c.observe(gvr, obj, false) },
		DeleteFunc: func(obj any) { c.observe(gvr, obj, true) },
	})
	if err != nil {
		c.log.Error("watching", "resource", gvr, "err", err)
		c.watched.Delete(gvr)
		return
	}
	// The registration's HasSynced, not the informer's: the collector's graph must have seen
	// everything a shared informer held before it was added.
	c.synced = append(c.synced, reg.HasSynced)
}

// rediscoverPeriod is how often discovery is asked again for resources added since (the
// kinds of new CustomResourceDefinitions), as upstream's collector resyncs its monitors.
const rediscoverPeriod = 30 * time.Second

// Run discovers resources, waits for their caches and collects until ctx ends; resources
// served later are watched from when discovery lists them.
func (c *Controller) Run(ctx context.Context) {
	if err := c.discover(); err != nil {
		c.log.Error("discovery", "err", err)
		return
	}
	c.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	c.log.Info("garbage collector synced", "resources", c.watched.Len())
	loop.Resync(ctx, rediscoverPeriod, func() {
		before := c.watchedCount()
		if err := c.discover(); err != nil {
			c.log.Warn("rediscovery", "err", err)
		}
		if c.watchedCount() != before {
			c.mapper.Reset()
			c.factory.Start(ctx.Done())
			c.log.Info("garbage collector watches new resources", "resources", c.watchedCount())
		}
	})
	c.loop.Run(ctx, 5)
}

func (c *Controller) watchedCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watched.Len()
}

// discover watches every listed resource that can be listed, watched, patched and deleted.
func (c *Controller) discover() error {
	lists, err := c.discovery.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		return err
	}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			v := sets.New(r.Verbs...)
			if strings.Contains(r.Name, "/") || ignored.Has(r.Name) || !v.HasAll("list", "watch", "delete", "patch") {
				continue
			}
			c.watch(gv.WithResource(r.Name), r.Kind)
		}
	}
	return nil
}

func (c *Controller) observe(gvr schema.GroupVersionResource, obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = t.Obj, true
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	o := &object{gvr: gvr, namespace: m.GetNamespace(), name: m.GetName(), uid: m.GetUID(), owners: m.GetOwnerReferences(),
		finalizers: m.GetFinalizers(), deleting: m.GetDeletionTimestamp() != nil}
	if deleted {
		c.graph.remove(o.uid)
		for _, d := range c.graph.dependentsOf(o.uid) {
			c.loop.Add(string(d.uid))
		}
		return
	}
	c.graph.upsert(o)
	if len(o.owners) > 0 || o.deleting {
		c.loop.Add(string(o.uid))
	}
	if o.deleting {
		for _, d := range c.graph.dependentsOf(o.uid) {
			c.loop.Add(string(d.uid))
		}
	}
}

func (c *Controller) sync(ctx context.Context, key string) error {
	o, ok := c.graph.get(types.UID(key))
	if !ok {
		return nil
	}
	if o.deleting {
		if err := c.finishOwner(ctx, o); err != nil {
			return err
		}
	}
	if len(o.owners) == 0 || o.deleting {
		return nil
	}
	return c.attemptToDelete(ctx, o)
}

// ownerState is what became of one owner reference.
type ownerState int

const (
	ownerAlive ownerState = iota
	ownerGone
	ownerForeground // being deleted, waiting for its dependents
	ownerOrphaning  // being deleted, orphaning its dependents
)

func (c *Controller) ownerState(ctx context.Context, dep object, ref metav1.OwnerReference) (ownerState, error) {
	if owner, ok := c.graph.get(ref.UID); ok {
		switch {
		case owner.deleting && owner.hasFinalizer(metav1.FinalizerDeleteDependents):
			return ownerForeground, nil
		case owner.deleting && owner.hasFinalizer(metav1.FinalizerOrphanDependents):
			return ownerOrphaning, nil
		}
		return ownerAlive, nil
	}
	// Not in the graph (yet): ask the API server, by the reference's kind.
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return ownerGone, nil
	}
	mapping, err := c.mapper.RESTMapping(gv.WithKind(ref.Kind).GroupKind(), gv.Version)
	if err != nil {
		c.mapper.Reset()
		if meta.IsNoMatchError(err) {
			return ownerGone, nil
		}
		return ownerAlive, err
	}
	var r metadata.ResourceInterface = c.md.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		r = c.md.Resource(mapping.Resource).Namespace(dep.namespace)
	}
	live, err := r.Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ownerGone, nil
	}
	if err != nil {
		return ownerAlive, err
	}
	if live.UID != ref.UID {
		return ownerGone, nil
	}
	return ownerAlive, nil
}

func (c *Controller) resource(o object) metadata.ResourceInterface {
	if o.namespace == "" {
		return c.md.Resource(o.gvr)
	}
	return c.md.Resource(o.gvr).Namespace(o.namespace)
}

// attemptToDelete deletes a dependent whose owners are all gone (or going in the
// foreground), and drops references to gone and foreground-deleting owners from one that
// still has a live owner.
//
// The graph decides only that nothing needs doing. A decision that writes the dependent is
// made again on the live object, and the write is conditional on its resourceVersion, as
// upstream's collector reads the latest object first: the graph can be a moment behind. An
// owner deleted with propagationPolicy=Orphan drops its reference from the dependent and
// then goes; the dependent's informer may deliver that patch after the owner's informer
// delivered the deletion, and a decision on the stale references would delete the orphan (a
// conformance spec saw its ReplicaSet go so).
func (c *Controller) attemptToDelete(ctx context.Context, dep object) error {
	gone, waiting, alive, err := c.classify(ctx, dep)
	if err != nil || (alive > 0 && len(gone)+len(waiting) == 0) {
		return err
	}
	latest, err := c.resource(dep).Get(ctx, dep.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if latest.UID != dep.uid || len(latest.OwnerReferences) == 0 {
		return nil
	}
	dep.owners, dep.resourceVersion = latest.OwnerReferences, latest.ResourceVersion
	if gone, waiting, alive, err = c.classify(ctx, dep); err != nil {
		return err
	}
	switch {
	case alive > 0 && len(gone)+len(waiting) == 0:
		return nil
	case alive > 0:
		// The dependent stays. References to owners that are gone, and to owners being
		// deleted in the foreground (which would otherwise wait for it forever), are dropped.
		var keep []metav1.OwnerReference
		for _, ref := range dep.owners {
			if !slices.Contains(gone, ref.UID) && !slices.Contains(waiting, ref.UID) {
				keep = append(keep, ref)
			}
		}
		return c.patchMeta(ctx, dep, map[string]any{"ownerReferences": keep})
	case len(waiting) > 0:
		// A dependent of a foreground deletion that has dependents of its own is deleted in
		// the foreground too. If one of those is itself waiting for its dependents, the
		// references may form a circle (a owns b owns c owns a) in which each waits for the
		// next forever: as upstream, this one's references stop blocking first.
		if c.dependentWaiting(dep) && blocks(dep.owners) {
			unblocked := make([]metav1.OwnerReference, len(dep.owners))
			for i, ref := range dep.owners {
				ref.BlockOwnerDeletion = ptr.To(false)
				unblocked[i] = ref
			}
			if err := c.patchMeta(ctx, dep, map[string]any{"ownerReferences": unblocked}); err != nil {
				return err
			}
			dep.resourceVersion = "" // the patch moved it; it was conditional, the delete need not be
		}
		return c.delete(ctx, dep, metav1.DeletePropagationForeground)
	default:
		return c.delete(ctx, dep, metav1.DeletePropagationBackground)
	}
}

// classify sorts dep's owner references: owners gone, owners waiting for their dependents
// (foreground deletion), and how many are alive or orphaning.
func (c *Controller) classify(ctx context.Context, dep object) (gone, waiting []types.UID, alive int, err error) {
	for _, ref := range dep.owners {
		st, err := c.ownerState(ctx, dep, ref)
		if err != nil {
			return nil, nil, 0, err
		}
		switch st {
		case ownerGone:
			gone = append(gone, ref.UID)
		case ownerForeground:
			waiting = append(waiting, ref.UID)
		case ownerOrphaning, ownerAlive:
			alive++
		}
	}
	return gone, waiting, alive, nil
}

// dependentWaiting says whether one of o's dependents is being deleted in the foreground.
func (c *Controller) dependentWaiting(o object) bool {
	for _, d := range c.graph.dependentsOf(o.uid) {
		if d.deleting && d.hasFinalizer(metav1.FinalizerDeleteDependents) {
			return true
		}
	}
	return false
}

// blocks says whether any of the references blocks its owner's deletion.
func blocks(refs []metav1.OwnerReference) bool {
	for _, r := range refs {
		if r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
			return true
		}
	}
	return false
}

func (c *Controller) delete(ctx context.Context, o object, policy metav1.DeletionPropagation) error {
	uid := o.uid
	pre := &metav1.Preconditions{UID: &uid}
	if o.resourceVersion != "" {
		pre.ResourceVersion = &o.resourceVersion
	}
	err := c.resource(o).Delete(ctx, o.name, metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: pre})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		c.log.Info("deleted dependent", "resource", o.gvr.Resource, "object", o.namespace+"/"+o.name, "propagation", policy)
	}
	return err
}

// finishOwner completes a foreground or orphan deletion of an owner.
func (c *Controller) finishOwner(ctx context.Context, owner object) error {
	switch {
	case owner.hasFinalizer(metav1.FinalizerOrphanDependents):
		for _, d := range c.graph.dependentsOf(owner.uid) {
			var keep []metav1.OwnerReference
			for _, ref := range d.owners {
				if ref.UID != owner.uid {
					keep = append(keep, ref)
				}
			}
			if err := c.patchMeta(ctx, d, map[string]any{"ownerReferences": keep}); err != nil {
				return err
			}
		}
		return c.removeFinalizer(ctx, owner, metav1.FinalizerOrphanDependents)
	case owner.hasFinalizer(metav1.FinalizerDeleteDependents):
		if n := c.graph.blockingDependents(owner.uid); n > 0 {
			c.loop.AddAfter(string(owner.uid), time.Second)
			return nil
		}
		return c.removeFinalizer(ctx, owner, metav1.FinalizerDeleteDependents)
	}
	return nil
}

func (c *Controller) removeFinalizer(ctx context.Context, o object, f string) error {
	keep := slices.DeleteFunc(slices.Clone(o.finalizers), func(s string) bool { return s == f })
	return c.patchMeta(ctx, o, map[string]any{"finalizers": keep})
}

// patchMeta merge-patches metadata fields, guarded by the object's UID.
func (c *Controller) patchMeta(ctx context.Context, o object, fields map[string]any) error {
	fields["uid"] = o.uid
	if o.resourceVersion != "" {
		fields["resourceVersion"] = o.resourceVersion // conflicts if the object changed since
	}
	for k, v := range fields {
		if s, ok := v.([]metav1.OwnerReference); ok && len(s) == 0 {
			fields[k] = nil
		}
		if s, ok := v.([]string); ok && len(s) == 0 {
			fields[k] = nil
		}
	}
	body, err := json.Marshal(map[string]any{"metadata": fields})
	if err != nil {
		return err
	}
	_, err = c.resource(o).Patch(ctx, o.name, types.MergePatchType, body, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("patch %s %s/%s: %w", o.gvr.Resource, o.namespace, o.name, err)
	}
	return nil
}
