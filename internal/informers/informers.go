// Package informers lets the long-running parts of one process share one informer factory —
// one watch per resource for the agent's pods, service proxy and BGP speaker, as the kubelet
// shares its — while each part still comes and goes on its own: a part restarted by the
// supervisor adds its handlers again and must not leave the last attempt's behind.
package informers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Shared is a process's informer factory with the lifetime of its owner: informers asked
// for by a part start with the owner's context, never the part's, so a part's restart does
// not stop a watch the others use.
type Shared struct {
	informers.SharedInformerFactory
	ctx context.Context
}

// StripManagedFields is an informer transform that drops objects' managed fields, as
// kube-controller-manager's and kube-scheduler's informers do: no controller reads them, and
// on a pod written by four managers they are a quarter of the object.
func StripManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil && a.GetManagedFields() != nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// NewFactory is client-go's factory with the managed fields stripped from what it caches:
// every in-process informer factory of skiff's controllers, scheduler and agent.
func NewFactory(client kubernetes.Interface, options ...informers.SharedInformerOption) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, 0, append([]informers.SharedInformerOption{informers.WithTransform(StripManagedFields)}, options...)...)
}

// NewShared makes the factory; it stops when ctx ends. Its pods are NodeViewPods: a node's
// parts read only that of the cluster's pods.
func NewShared(ctx context.Context, client kubernetes.Interface) *Shared {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(nodeView))
	context.AfterFunc(ctx, f.Shutdown)
	return &Shared{SharedInformerFactory: f, ctx: ctx}
}

// Own makes f a Shared factory that stops when ctx ends: the control plane's, whose pods are
// whole (NewFactory), shared by the scheduler and the controllers through Scope.
func Own(ctx context.Context, f informers.SharedInformerFactory) *Shared {
	context.AfterFunc(ctx, f.Shutdown)
	return &Shared{SharedInformerFactory: f, ctx: ctx}
}

// Start starts every informer asked for so far that has not started.
func (s *Shared) Start() { s.SharedInformerFactory.Start(s.ctx.Done()) }

// Watch adds h to each informer and waits until every one has synced and h has seen what
// each held. release removes h again: defer it, so a part that returned (to be restarted)
// leaves nothing behind. Watch returns ctx's error if ctx ends first (release is then
// already done).
func Watch(ctx context.Context, h cache.ResourceEventHandler, infs ...cache.SharedIndexInformer) (release func(), err error) {
	var regs []cache.ResourceEventHandlerRegistration
	release = func() {
		for i, r := range regs {
			_ = infs[i].RemoveEventHandler(r)
		}
	}
	for _, inf := range infs {
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			release()
			return func() {}, fmt.Errorf("adding an event handler: %w", err)
		}
		regs = append(regs, reg)
	}
	synced := make([]cache.InformerSynced, 0, len(regs))
	for _, r := range regs {
		synced = append(synced, r.HasSynced)
	}
	// client-go's WaitForCacheSync looks every 100 ms; a node's parts (its BGP session, its
	// DNS) wait on this at start, so look every 10 ms: the check is a few atomic loads.
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		for _, s := range synced {
			if !s() {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		release()
		return func() {}, ctx.Err()
	}
	return release, nil
}

// Trigger is a handler that only signals "something changed" on kick, coalescing bursts
// into one pending signal, for parts that recompute everything from listers.
func Trigger(kick chan struct{}) cache.ResourceEventHandler {
	fire := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: func(any) { fire() }, UpdateFunc: func(any, any) { fire() }, DeleteFunc: func(any) { fire() }}
}
