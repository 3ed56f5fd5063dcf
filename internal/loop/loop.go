// Package loop is the control loop every skiff controller runs: informer events enqueue keys
// into a rate-limited workqueue, workers call an idempotent sync(ctx, key), a failed key is
// retried with backoff and a successful one is forgotten.
package loop

import (
	"context"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Loop owns one controller's queue and workers.
type Loop struct {
	name  string
	queue workqueue.TypedRateLimitingInterface[string]
	sync  func(ctx context.Context, key string) error
	log   *slog.Logger
}

// New returns a loop that calls sync for every queued key.
func New(name string, sync func(ctx context.Context, key string) error, log *slog.Logger) *Loop {
	return &Loop{
		name: name,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name}),
		sync: sync,
		log:  log.With("controller", name),
	}
}

// Enqueue queues an object's namespace/name key; tombstones of deleted objects work too.
func (l *Loop) Enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		l.log.Warn("cannot key object", "err", err)
		return
	}
	l.queue.Add(key)
}

// Add queues a key.
func (l *Loop) Add(key string) { l.queue.Add(key) }

// AddAfter queues a key once d has passed.
func (l *Loop) AddAfter(key string, d time.Duration) { l.queue.AddAfter(key, d) }

// Handler enqueues the object of every add, update and delete.
func (l *Loop) Handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    l.Enqueue,
		UpdateFunc: func(_, obj any) { l.Enqueue(obj) },
		DeleteFunc: l.Enqueue,
	}
}

// Resync calls enqueue every period until ctx ends, in the background: a controller's
// periodic look at everything, for changes no event announces.
func Resync(ctx context.Context, period time.Duration, enqueue func()) {
	go func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				enqueue()
			}
		}
	}()
}

// Len is the number of queued keys.
func (l *Loop) Len() int { return l.queue.Len() }

// Run starts workers and blocks until ctx ends, then drains the queue.
func (l *Loop) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	l.queue.ShutDown()
	wg.Wait()
}

func (l *Loop) next(ctx context.Context) bool {
	key, quit := l.queue.Get()
	if quit {
		return false
	}
	defer l.queue.Done(key)
	if err := l.sync(ctx, key); err != nil {
		// A conflict is optimistic concurrency doing its job (the next sync reads the new
		// version); any other failure is visible, with how often the key has failed.
		if ctx.Err() == nil {
			if apierrors.IsConflict(err) {
				l.log.Debug("sync conflicted, retrying", "key", key, "err", err)
			} else {
				l.log.Warn("sync failed, retrying", "key", key, "err", err, "retries", l.queue.NumRequeues(key))
			}
		}
		l.queue.AddRateLimited(key)
		return true
	}
	l.queue.Forget(key)
	return true
}
