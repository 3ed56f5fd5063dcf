package controllermanager

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/controlplane/controllers/garbagecollector"
)

// startedInformers lets the garbage collector watch a resource through the typed informer a
// controller has already started in factory, rather than through a metadata informer of its
// own: one watch (and one set of reflector and watcher goroutines on both ends of it) per
// resource instead of two. Resources no controller watches stay metadata-only, so the
// collector does not come to cache whole Secrets where upstream's would.
func startedInformers(factory informers.SharedInformerFactory) garbagecollector.SharedInformers {
	return func(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind) cache.SharedIndexInformer {
		if !startedKinds(factory).Has(gvk) {
			return nil
		}
		inf, err := factory.ForResource(gvr)
		if err != nil {
			return nil
		}
		return inf.Informer()
	}
}

// startedKinds lists the kinds of factory's started informers. The factory tells which it has
// started only through WaitForCacheSync's answer, keyed by object type; asked with a context
// that is already done it answers at once.
func startedKinds(factory informers.SharedInformerFactory) sets.Set[schema.GroupVersionKind] {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	kinds := sets.New[schema.GroupVersionKind]()
	for t := range factory.WaitForCacheSyncWithContext(done).Synced {
		if t.Kind() != reflect.Pointer {
			continue
		}
		obj, ok := reflect.New(t.Elem()).Interface().(runtime.Object)
		if !ok {
			continue
		}
		gvks, _, err := scheme.Scheme.ObjectKinds(obj)
		if err != nil {
			continue
		}
		for _, gvk := range gvks {
			kinds.Insert(gvk)
		}
	}
	return kinds
}
