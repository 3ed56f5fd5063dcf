package informers

import (
	"context"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/informers/admissionregistration"
	"k8s.io/client-go/informers/apiserverinternal"
	"k8s.io/client-go/informers/apps"
	"k8s.io/client-go/informers/autoscaling"
	"k8s.io/client-go/informers/batch"
	"k8s.io/client-go/informers/certificates"
	"k8s.io/client-go/informers/coordination"
	"k8s.io/client-go/informers/core"
	"k8s.io/client-go/informers/discovery"
	"k8s.io/client-go/informers/events"
	"k8s.io/client-go/informers/extensions"
	"k8s.io/client-go/informers/flowcontrol"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/informers/lifecycle"
	"k8s.io/client-go/informers/networking"
	"k8s.io/client-go/informers/node"
	"k8s.io/client-go/informers/policy"
	"k8s.io/client-go/informers/rbac"
	"k8s.io/client-go/informers/resource"
	"k8s.io/client-go/informers/scheduling"
	"k8s.io/client-go/informers/storage"
	"k8s.io/client-go/informers/storagemigration"
	"k8s.io/client-go/tools/cache"
)

// Scoped is one run of a part over a process's shared factory — the scheduler's or the
// controller manager's term as leader — for parts written against a factory of their own:
// it is a whole informers.SharedInformerFactory, every handler added through it is
// recorded, and Release removes them all. The informers themselves (and their caches and
// indexers) stay with the shared factory, so the scheduler and the controllers hold one
// copy of each pod between them, and a part that lost its lease and runs again finds its
// informers synced.
type Scoped struct {
	shared *Shared
	mu     sync.Mutex
	regs   []registration
}

type registration struct {
	inf cache.SharedIndexInformer
	reg cache.ResourceEventHandlerRegistration
}

// Scope starts a run over s.
func (s *Shared) Scope() *Scoped { return &Scoped{shared: s} }

// Release removes every handler added through the scope.
func (s *Scoped) Release() {
	s.mu.Lock()
	regs := s.regs
	s.regs = nil
	s.mu.Unlock()
	for _, r := range regs {
		_ = r.inf.RemoveEventHandler(r.reg)
	}
}

func (s *Scoped) record(inf cache.SharedIndexInformer, reg cache.ResourceEventHandlerRegistration, err error) (cache.ResourceEventHandlerRegistration, error) {
	if err == nil {
		s.mu.Lock()
		s.regs = append(s.regs, registration{inf, reg})
		s.mu.Unlock()
	}
	return reg, err
}

// InformerFor is the shared factory's informer, with its handlers recorded.
func (s *Scoped) InformerFor(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc) cache.SharedIndexInformer {
	return scopedInformer{SharedIndexInformer: s.shared.InformerFor(obj, newFunc), scope: s}
}

// InformerName is the shared factory's (its informers' metrics identity).
func (s *Scoped) InformerName() *cache.InformerName { return s.shared.InformerName() }

// Start starts the informers asked for, for the shared factory's lifetime (not stop's): the
// other parts use them too.
func (s *Scoped) Start(<-chan struct{})            { s.shared.Start() }
func (s *Scoped) StartWithContext(context.Context) { s.shared.Start() }

// Shutdown is the shared factory's owner's to do; a scope's end is Release.
func (s *Scoped) Shutdown() {}

func (s *Scoped) WaitForCacheSync(stop <-chan struct{}) map[reflect.Type]bool {
	return s.shared.WaitForCacheSync(stop)
}

func (s *Scoped) WaitForCacheSyncWithContext(ctx context.Context) cache.SyncResult {
	return s.shared.WaitForCacheSyncWithContext(ctx)
}

func (s *Scoped) ForResource(gvr schema.GroupVersionResource) (informers.GenericInformer, error) {
	g, err := s.shared.ForResource(gvr)
	if err != nil {
		return nil, err
	}
	return scopedGeneric{GenericInformer: g, scope: s}, nil
}

// The API groups, each built over the scope (so their informers come through InformerFor);
// the shared factory watches every namespace with no list options.
func (s *Scoped) Admissionregistration() admissionregistration.Interface {
	return admissionregistration.New(s, "", nil)
}
func (s *Scoped) Internal() apiserverinternal.Interface { return apiserverinternal.New(s, "", nil) }
func (s *Scoped) Apps() apps.Interface                  { return apps.New(s, "", nil) }
func (s *Scoped) Autoscaling() autoscaling.Interface    { return autoscaling.New(s, "", nil) }
func (s *Scoped) Batch() batch.Interface                { return batch.New(s, "", nil) }
func (s *Scoped) Certificates() certificates.Interface  { return certificates.New(s, "", nil) }
func (s *Scoped) Coordination() coordination.Interface  { return coordination.New(s, "", nil) }
func (s *Scoped) Core() core.Interface                  { return core.New(s, "", nil) }
func (s *Scoped) Discovery() discovery.Interface        { return discovery.New(s, "", nil) }
func (s *Scoped) Events() events.Interface              { return events.New(s, "", nil) }
func (s *Scoped) Extensions() extensions.Interface      { return extensions.New(s, "", nil) }
func (s *Scoped) Flowcontrol() flowcontrol.Interface    { return flowcontrol.New(s, "", nil) }
func (s *Scoped) Lifecycle() lifecycle.Interface        { return lifecycle.New(s, "", nil) }
func (s *Scoped) Networking() networking.Interface      { return networking.New(s, "", nil) }
func (s *Scoped) Node() node.Interface                  { return node.New(s, "", nil) }
func (s *Scoped) Policy() policy.Interface              { return policy.New(s, "", nil) }
func (s *Scoped) Rbac() rbac.Interface                  { return rbac.New(s, "", nil) }
func (s *Scoped) Resource() resource.Interface          { return resource.New(s, "", nil) }
func (s *Scoped) Scheduling() scheduling.Interface      { return scheduling.New(s, "", nil) }
func (s *Scoped) Storage() storage.Interface            { return storage.New(s, "", nil) }
func (s *Scoped) Storagemigration() storagemigration.Interface {
	return storagemigration.New(s, "", nil)
}

var _ informers.SharedInformerFactory = (*Scoped)(nil)

// scopedInformer records the handlers added to a shared informer.
type scopedInformer struct {
	cache.SharedIndexInformer
	scope *Scoped
}

func (i scopedInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := i.SharedIndexInformer.AddEventHandler(h)
	return i.scope.record(i.SharedIndexInformer, reg, err)
}

func (i scopedInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(h, resync)
	return i.scope.record(i.SharedIndexInformer, reg, err)
}

func (i scopedInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := i.SharedIndexInformer.AddEventHandlerWithOptions(h, o)
	return i.scope.record(i.SharedIndexInformer, reg, err)
}

type scopedGeneric struct {
	informers.GenericInformer
	scope *Scoped
}

func (g scopedGeneric) Informer() cache.SharedIndexInformer {
	return scopedInformer{SharedIndexInformer: g.GenericInformer.Informer(), scope: g.scope}
}
