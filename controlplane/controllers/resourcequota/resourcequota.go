// Package resourcequota is upstream's resource quota controller: it keeps every
// ResourceQuota's status.hard equal to its spec and status.used equal to what the objects
// in its namespace charge (controlplane/quota's evaluators), recomputing a namespace's
// quotas whenever an object they count changes and every 5 minutes. The quota admission in
// the API server charges new objects against status.used at once; this controller
// corrects it, and gives back what deleted objects held.
package resourcequota

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	skiffquota "github.com/skiff-sh/skiff/controlplane/quota"
	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name; its service account is upstream's.
const Name = "resourcequota-controller"

// resync recomputes every quota this often, as upstream's --resource-quota-sync-period.
const resync = 5 * time.Minute

// Controller keeps quota status.
type Controller struct {
	client   kubernetes.Interface
	quotas   corelisters.ResourceQuotaLister
	registry quota.Registry
	synced   []cache.InformerSynced
	loop     *loop.Loop
}

// Watched are the resources whose changes recompute their namespace's quotas.
func Watched() []schema.GroupVersionResource {
	return append([]schema.GroupVersionResource{corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithResource("services"),
		corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")}, skiffquota.CountedResources...)
}

// New wires the controller to the quota informer and, through factory, to the informers of
// every counted resource.
func New(client kubernetes.Interface, quotas coreinformers.ResourceQuotaInformer, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	c := &Controller{client: client, quotas: quotas.Lister(), synced: []cache.InformerSynced{quotas.Informer().HasSynced}}
	listerFor := func(gvr schema.GroupVersionResource) (cache.GenericLister, error) {
		inf, err := factory.ForResource(gvr)
		if err != nil {
			return nil, err
		}
		return inf.Lister(), nil
	}
	c.registry = generic.NewRegistry(skiffquota.Evaluators(listerFor, clock.RealClock{}))
	c.loop = loop.New(Name, c.sync, log)
	// A quota is recalculated when it is new or its hard limits changed, not when only its
	// usage did: the admission plugin charges a pod to the quota's status before the pod is
	// stored, and a recalculation at that write, from a pod informer that cannot have the pod
	// yet, took the charge back, so the next pod was admitted over the limit (seen in the
	// conformance spec "ResourceQuota should create a ResourceQuota and capture the life of a
	// pod"). Upstream's controller ignores usage-only updates the same way; the counted
	// resources' own events and the periodic resync catch the rest.
	_, _ = quotas.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.loop.Enqueue,
		DeleteFunc: c.loop.Enqueue,
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.ResourceQuota)
			n, ok2 := cur.(*corev1.ResourceQuota)
			if ok1 && ok2 && apiequality.Semantic.DeepEqual(o.Spec, n.Spec) && apiequality.Semantic.DeepEqual(n.Spec.Hard, n.Status.Hard) {
				return
			}
			c.loop.Enqueue(cur)
		},
	})
	namespaceOf := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if m, ok := obj.(metav1.Object); ok {
			c.enqueueNamespace(m.GetNamespace())
		}
	}
	for _, gvr := range Watched() {
		inf, err := factory.ForResource(gvr)
		if err != nil {
			return nil, err
		}
		update := func(_, obj any) { namespaceOf(obj) }
		if gvr.Resource == "resourcequotas" && gvr.Group == "" {
			// Quotas are counted too (count/resourcequotas), but only their creation and
			// deletion change the count; an update is the quota's own (see above).
			update = func(_, _ any) {}
		}
		_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: namespaceOf, UpdateFunc: update, DeleteFunc: namespaceOf})
		c.synced = append(c.synced, inf.Informer().HasSynced)
	}
	return c, nil
}

func (c *Controller) enqueueNamespace(ns string) {
	qs, _ := c.quotas.ResourceQuotas(ns).List(labels.Everything())
	for _, q := range qs {
		c.loop.Add(q.Namespace + "/" + q.Name)
	}
}

// Run syncs until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	loop.Resync(ctx, resync, func() {
		qs, _ := c.quotas.List(labels.Everything())
		for _, q := range qs {
			c.loop.Add(q.Namespace + "/" + q.Name)
		}
	})
	c.loop.Run(ctx, 2)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	q, err := c.quotas.ResourceQuotas(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	used, err := Usage(q, c.registry)
	if err != nil {
		return err
	}
	want := corev1.ResourceQuotaStatus{Hard: q.Spec.Hard.DeepCopy(), Used: used}
	if apiequality.Semantic.DeepEqual(want, q.Status) {
		return nil
	}
	cp := q.DeepCopy()
	cp.Status = want
	_, err = c.client.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		c.loop.Add(key) // admission charged it meanwhile; recompute
		return nil
	}
	return err
}

// Usage is what q's namespace uses of each resource q limits, zero included.
func Usage(q *corev1.ResourceQuota, registry quota.Registry) (corev1.ResourceList, error) {
	used, err := quota.CalculateUsage(q.Namespace, q.Spec.Scopes, q.Spec.Hard, registry, q.Spec.ScopeSelector)
	if err != nil {
		return nil, err
	}
	out := corev1.ResourceList{}
	for r := range q.Spec.Hard {
		v := used[r]
		out[r] = v
	}
	return out, nil
}
