package proxy

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/dataplane/services"
)

// changed is the set of Service keys ("namespace/name", or HostPortsKey) whose frontends may
// differ from what the maps hold, filled by the informers' handlers and taken by each sync;
// kick wakes the sync.
type changed struct {
	kick chan struct{}

	mu   sync.Mutex
	keys map[string]bool
}

func newChanged() *changed {
	return &changed{kick: make(chan struct{}, 1), keys: map[string]bool{}}
}

// add records keys and wakes the sync.
func (c *changed) add(keys ...string) {
	c.mu.Lock()
	for _, k := range keys {
		if k != "" {
			c.keys[k] = true
		}
	}
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// take returns the recorded keys, sorted, and forgets them.
func (c *changed) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.keys))
	for k := range c.keys {
		out = append(out, k)
	}
	clear(c.keys)
	sort.Strings(out)
	return out
}

// handler records the key keyOf names for every object an event carries (an update's old
// and new: a slice that moved to another Service changes both).
func (c *changed) handler(keyOf func(any) string) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.add(keyOf(obj)) },
		UpdateFunc: func(old, obj any) { c.add(keyOf(old), keyOf(obj)) },
		DeleteFunc: func(obj any) { c.add(keyOf(obj)) },
	}
}

// serviceKeyOf is a Service's key (also of a deleted one whose last state is unknown).
func serviceKeyOf(obj any) string {
	key, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	return key
}

// slicesByService is the EndpointSlice informer's index by services.SliceServiceKey.
const slicesByService = "skiff.sh/service"

// indexSlicesByService adds the index slicesOf reads, once (a restarted proxy finds it).
func indexSlicesByService(inf cache.SharedIndexInformer) error {
	if _, ok := inf.GetIndexer().GetIndexers()[slicesByService]; ok {
		return nil
	}
	err := inf.AddIndexers(cache.Indexers{slicesByService: func(obj any) ([]string, error) {
		if key := services.SliceServiceKey(obj); key != "" {
			return []string{key}, nil
		}
		return nil, nil
	}})
	if err != nil {
		return fmt.Errorf("indexing EndpointSlices by Service: %w", err)
	}
	return nil
}

// slicesOf are the EndpointSlices of the Service key.
func slicesOf(inf cache.SharedIndexInformer, key string) []*discoveryv1.EndpointSlice {
	objs, _ := inf.GetIndexer().ByIndex(slicesByService, key)
	out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			out = append(out, s)
		}
	}
	return out
}

// splitKey splits "namespace/name".
func splitKey(key string) (namespace, name string) {
	namespace, name, _ = strings.Cut(key, "/")
	return namespace, name
}

// hasHealthCheck is whether the node serves a health check for svc (see HealthChecks).
func hasHealthCheck(svc *corev1.Service) bool {
	p := svc.Spec.HealthCheckNodePort
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal && p > 0 && p <= 65535
}
