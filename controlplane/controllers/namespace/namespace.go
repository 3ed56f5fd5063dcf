// Package namespace empties namespaces that are being deleted: it deletes every namespaced
// object in them, waits until none is left, removes the "kubernetes" finalizer through
// namespaces/finalize and deletes the namespace for good — upstream's namespace controller.
package namespace

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/controlplane/controllers/loop"
)

// Name is the controller's name (and its service account's).
const Name = "namespace-controller"

// Controller deletes namespace contents.
type Controller struct {
	client     kubernetes.Interface
	metadata   metadata.Interface
	discovery  discovery.DiscoveryInterface
	namespaces corelisters.NamespaceLister
	synced     cache.InformerSynced
	loop       *loop.Loop
	log        *slog.Logger
}

// New wires the controller.
func New(client kubernetes.Interface, md metadata.Interface, ns coreinformers.NamespaceInformer, log *slog.Logger) *Controller {
	c := &Controller{client: client, metadata: md, discovery: client.Discovery(), namespaces: ns.Lister(),
		synced: ns.Informer().HasSynced, log: log.With("controller", Name)}
	c.loop = loop.New(Name, c.sync, log)
	_, _ = ns.Informer().AddEventHandler(c.loop.Handler())
	return c
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	c.loop.Run(ctx, 2)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	ns, err := c.namespaces.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp == nil {
		return nil
	}
	if slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		left, err := c.deleteContent(ctx, name)
		if err != nil {
			return err
		}
		if len(left) > 0 {
			c.loop.AddAfter(name, 2*time.Second)
			return nil
		}
		ns = ns.DeepCopy()
		ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
		if ns, err = c.client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if len(ns.Spec.Finalizers) > 0 {
		return nil // someone else's finalizer
	}
	err = c.client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ns.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		c.log.Info("namespace deleted", "namespace", name)
	}
	return err
}

// deleteContent deletes everything in the namespace and returns the resources that still
// have objects (graceful deletions in progress, finalizers pending).
func (c *Controller) deleteContent(ctx context.Context, ns string) ([]string, error) {
	lists, err := c.discovery.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return nil, err
	}
	var left []string
	seen := sets.New[string]()
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			verbs := sets.New(r.Verbs...)
			if strings.Contains(r.Name, "/") || !verbs.Has("list") || !verbs.Has("delete") || seen.Has(r.Name) {
				continue
			}
			seen.Insert(r.Name) // events and events.k8s.io events are the same objects
			res := c.metadata.Resource(gv.WithResource(r.Name)).Namespace(ns)
			if verbs.Has("deletecollection") {
				if err := res.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return nil, fmt.Errorf("delete %s in %s: %w", r.Name, ns, err)
				}
			}
			items, err := res.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			for _, it := range items.Items {
				if it.DeletionTimestamp == nil {
					if err := res.Delete(ctx, it.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
						return nil, err
					}
				}
			}
			if len(items.Items) > 0 {
				left = append(left, r.Name)
			}
		}
	}
	return left, nil
}
