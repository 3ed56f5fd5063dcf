package scale

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// Fanout is the watch load of many node agents on the server, without their processes:
// each simulated agent holds what a real one does once it has synced — a watch of its own
// node's pods (a field selector), one of every Service and one of every EndpointSlice — and
// reads every event. Watches start from a resource version the harness read once, as agents
// that listed already would: the cost measured is the fan-out of changes, not a start-up
// storm of lists.
type Fanout struct {
	Agents, Streams int
	events          atomic.Int64
	broken          atomic.Int64

	mu   sync.Mutex
	seen map[string][]time.Time // probe Service name → when each agent's watch delivered it
	stop context.CancelFunc
	done sync.WaitGroup
}

// fanoutProbe prefixes the Services whose delivery is timed.
const fanoutProbe = "fanout-probe-"

// StartFanout opens agents' watches (agent i is kwok node i's) and keeps them until Stop.
// A watch the server closes (its timeout) is reopened from the last version it delivered.
func StartFanout(ctx context.Context, c kubernetes.Interface, agents int) (*Fanout, error) {
	svcs, err := c.CoreV1().Services("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, err
	}
	slices, err := c.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, err
	}
	pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &Fanout{Agents: agents, Streams: 3 * agents, seen: map[string][]time.Time{}, stop: cancel}
	for i := 0; i < agents; i++ {
		node := fields.OneTermEqualSelector("spec.nodeName", NodeName(i)).String()
		f.follow(ctx, pods.ResourceVersion, func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = node
			return c.CoreV1().Pods("").Watch(ctx, o)
		})
		f.follow(ctx, svcs.ResourceVersion, func(o metav1.ListOptions) (watch.Interface, error) {
			return c.CoreV1().Services("").Watch(ctx, o)
		})
		f.follow(ctx, slices.ResourceVersion, func(o metav1.ListOptions) (watch.Interface, error) {
			return c.DiscoveryV1().EndpointSlices("").Watch(ctx, o)
		})
	}
	return f, nil
}

// follow keeps one watch open from rv, reading its events.
func (f *Fanout) follow(ctx context.Context, rv string, open func(metav1.ListOptions) (watch.Interface, error)) {
	f.done.Add(1)
	go func() {
		defer f.done.Done()
		for ctx.Err() == nil {
			w, err := open(metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				f.broken.Add(1)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
				continue
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					f.broken.Add(1)
					rv = "" // expired: a real agent would list again; here, resume from now
					break
				}
				if o, ok := ev.Object.(metav1.Object); ok {
					rv = o.GetResourceVersion()
				}
				if ev.Type == watch.Bookmark {
					continue
				}
				f.events.Add(1)
				if s, ok := ev.Object.(*corev1.Service); ok && ev.Type == watch.Added && strings.HasPrefix(s.Name, fanoutProbe) {
					at := time.Now()
					f.mu.Lock()
					f.seen[s.Name] = append(f.seen[s.Name], at)
					f.mu.Unlock()
				}
			}
			w.Stop()
		}
	}()
}

// Delivery creates n probe Services in namespace and times each from its creation until
// every agent's Service watch has delivered it: the p50/p99 over all (agent, Service)
// deliveries, and the slowest.
func (f *Fanout) Delivery(ctx context.Context, c kubernetes.Interface, namespace string, n int) (Latency, time.Duration, error) {
	var all []time.Duration
	var slowest time.Duration
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s%d", fanoutProbe, i)
		start := time.Now()
		if _, err := c.CoreV1().Services(namespace).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
			return Latency{}, 0, err
		}
		if _, err := poll(ctx, 2*time.Minute, 10*time.Millisecond, fmt.Sprintf("%s delivered to %d agents", name, f.Agents), func() (bool, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return len(f.seen[name]) >= f.Agents, nil
		}); err != nil {
			return Latency{}, 0, err
		}
		f.mu.Lock()
		for _, at := range f.seen[name] {
			d := at.Sub(start)
			all = append(all, d)
			slowest = max(slowest, d)
		}
		f.mu.Unlock()
		_ = c.CoreV1().Services(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	}
	return latencyOf(all), slowest, nil
}

// Events is how many events the agents' watches delivered; Broken how many watches failed
// or were refused (each reopened).
func (f *Fanout) Events() int64 { return f.events.Load() }
func (f *Fanout) Broken() int64 { return f.broken.Load() }

// Stop closes every watch and waits for their readers.
func (f *Fanout) Stop() {
	f.stop()
	f.done.Wait()
}
