package storage

import (
	"context"
	"net/http"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	cacherstorage "k8s.io/apiserver/pkg/storage/cacher"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
)

// ResumableOptions wraps a RESTOptionsGetter so that every resource is served by a watch cache
// whose watches can resume from before the cache's window.
//
// Why: a watch cache starts empty at the etcd revision it listed at. Upstream answers a watch
// from an older revision with 410 Gone even when etcd still has every event since then, so
// every informer relists after an API server restart. skiff instead serves such a watch from
// etcd directly; only a revision etcd has compacted yields 410, as it must.
type ResumableOptions struct {
	generic.RESTOptionsGetter
}

// GetRESTOptions implements generic.RESTOptionsGetter.
func (g ResumableOptions) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := g.RESTOptionsGetter.GetRESTOptions(resource, example)
	if err != nil {
		return opts, err
	}
	opts.Decorator = resumableCacher
	return opts, nil
}

// resumableCacher builds etcd storage (on the shared client, see sharedClients), a watch
// cache over it, and the resumable wrapper.
func resumableCacher(config *storagebackend.ConfigForResource, resourcePrefix string,
	keyFunc func(obj runtime.Object) (string, error), newFunc, newListFunc func() runtime.Object,
	getAttrs storage.AttrFunc, triggers storage.IndexerFuncs, indexers *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
	etcd, destroyEtcd, err := newRawStorage(config, newFunc, newListFunc, resourcePrefix)
	if err != nil {
		return nil, nil, err
	}
	cacher, err := cacherstorage.NewCacherFromConfig(cacherstorage.Config{
		Storage:             etcd,
		Versioner:           storage.APIObjectVersioner{},
		GroupResource:       config.GroupResource,
		EventsHistoryWindow: config.EventsHistoryWindow,
		ResourcePrefix:      resourcePrefix,
		KeyFunc:             keyFunc,
		NewFunc:             newFunc,
		NewListFunc:         newListFunc,
		GetAttrsFunc:        getAttrs,
		IndexerFuncs:        triggers,
		Indexers:            indexers,
		Codec:               config.Codec,
	})
	if err != nil {
		destroyEtcd()
		return nil, nil, err
	}
	delegator := cacherstorage.NewCacheDelegator(cacher, etcd)
	var once sync.Once
	destroy := func() {
		once.Do(func() {
			delegator.Stop()
			cacher.Stop()
			destroyEtcd()
		})
	}
	return &resumable{Interface: delegator, etcd: etcd}, destroy, nil
}

// resumable serves watches from the cache and falls back to etcd when the cache answers
// that the requested revision is older than it holds.
type resumable struct {
	storage.Interface
	etcd storage.Interface
}

// Watch implements storage.Interface.
func (r *resumable) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := r.Interface.Watch(ctx, key, opts)
	if err != nil || opts.ResourceVersion == "" || opts.ResourceVersion == "0" || opts.SendInitialEvents != nil {
		return w, err
	}
	return newFallbackWatcher(w, func() (watch.Interface, error) { return r.etcd.Watch(ctx, key, opts) }), nil
}

// fallbackWatcher forwards a watch's events; if the very first one says the revision is too
// old for the cache, it switches to the fallback watch instead of passing the error on.
type fallbackWatcher struct {
	result chan watch.Event
	stop   chan struct{}
	once   sync.Once
}

func newFallbackWatcher(w watch.Interface, fallback func() (watch.Interface, error)) watch.Interface {
	f := &fallbackWatcher{result: make(chan watch.Event), stop: make(chan struct{})}
	go f.run(w, fallback)
	return f
}

func (f *fallbackWatcher) run(cur watch.Interface, fallback func() (watch.Interface, error)) {
	defer close(f.result)
	first := true
	for {
		select {
		case ev, ok := <-cur.ResultChan():
			if !ok {
				return
			}
			if first && IsExpired(ev) {
				if next, err := fallback(); err == nil {
					cur.Stop()
					cur = next
					first = false
					continue
				}
			}
			first = false
			select {
			case f.result <- ev:
			case <-f.stop:
				cur.Stop()
				return
			}
		case <-f.stop:
			cur.Stop()
			return
		}
	}
}

// ResultChan implements watch.Interface.
func (f *fallbackWatcher) ResultChan() <-chan watch.Event { return f.result }

// Stop implements watch.Interface.
func (f *fallbackWatcher) Stop() { f.once.Do(func() { close(f.stop) }) }

// IsExpired reports whether a watch event is the 410 a too-old resourceVersion yields.
func IsExpired(ev watch.Event) bool {
	if ev.Type != watch.Error {
		return false
	}
	s, ok := ev.Object.(*metav1.Status)
	return ok && (s.Code == http.StatusGone || s.Reason == metav1.StatusReasonExpired || s.Reason == metav1.StatusReasonGone)
}
