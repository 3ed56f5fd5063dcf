// Package serviceaccount keeps a "default" ServiceAccount in every active namespace, as
// upstream's serviceaccount controller does.
package serviceaccount

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's).
const Name = "service-account-controller"

// Controller ensures the default account.
type Controller struct {
	client     kubernetes.Interface
	namespaces corelisters.NamespaceLister
	accounts   corelisters.ServiceAccountLister
	loop       *loop.Loop
	synced     []cache.InformerSynced
}

// New wires the controller to namespace and service-account informers.
func New(client kubernetes.Interface, ns coreinformers.NamespaceInformer, sa coreinformers.ServiceAccountInformer, log *slog.Logger) *Controller {
	c := &Controller{client: client, namespaces: ns.Lister(), accounts: sa.Lister(),
		synced: []cache.InformerSynced{ns.Informer().HasSynced, sa.Informer().HasSynced}}
	c.loop = loop.New(Name, c.sync, log)
	_, _ = ns.Informer().AddEventHandler(c.loop.Handler())
	_, _ = sa.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if sa, ok := obj.(*corev1.ServiceAccount); ok && sa.Name == "default" {
			c.loop.Add(sa.Namespace)
		} else if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			if sa, ok := t.Obj.(*corev1.ServiceAccount); ok {
				c.loop.Add(sa.Namespace)
			}
		}
	}})
	return c
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	c.loop.Run(ctx, 1)
}

func (c *Controller) sync(ctx context.Context, ns string) error {
	n, err := c.namespaces.Get(ns)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if n.Status.Phase != corev1.NamespaceActive || n.DeletionTimestamp != nil {
		return nil
	}
	if _, err := c.accounts.ServiceAccounts(ns).Get("default"); err == nil {
		return nil
	}
	_, err = c.client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) || apierrors.IsForbidden(err) {
		return nil // created meanwhile, or the namespace is terminating
	}
	return err
}
