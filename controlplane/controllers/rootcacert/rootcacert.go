// Package rootcacert publishes the cluster CA as the kube-root-ca.crt ConfigMap (key ca.crt)
// in every namespace, as upstream's root-ca-cert-publisher does; pods read it through their
// projected service-account volume.
package rootcacert

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
const Name = "root-ca-cert-publisher"

// ConfigMapName is the published ConfigMap.
const ConfigMapName = "kube-root-ca.crt"

// Controller publishes the CA.
type Controller struct {
	client     kubernetes.Interface
	namespaces corelisters.NamespaceLister
	configMaps corelisters.ConfigMapLister
	caPEM      string
	loop       *loop.Loop
	synced     []cache.InformerSynced
}

// New wires the controller; caPEM is the cluster CA certificate.
func New(client kubernetes.Interface, ns coreinformers.NamespaceInformer, cm coreinformers.ConfigMapInformer, caPEM []byte, log *slog.Logger) *Controller {
	c := &Controller{client: client, namespaces: ns.Lister(), configMaps: cm.Lister(), caPEM: string(caPEM),
		synced: []cache.InformerSynced{ns.Informer().HasSynced, cm.Informer().HasSynced}}
	c.loop = loop.New(Name, c.sync, log)
	_, _ = ns.Informer().AddEventHandler(c.loop.Handler())
	onCM := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == ConfigMapName {
			c.loop.Add(cm.Namespace)
		}
	}
	_, _ = cm.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { onCM(obj) }, DeleteFunc: onCM,
	})
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
	if n.DeletionTimestamp != nil {
		return nil
	}
	cm, err := c.configMaps.ConfigMaps(ns).Get(ConfigMapName)
	switch {
	case apierrors.IsNotFound(err):
		_, err = c.client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Annotations: map[string]string{"kubernetes.io/description": description}},
			Data:       map[string]string{"ca.crt": c.caPEM},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) || apierrors.IsForbidden(err) {
			return nil
		}
		return err
	case err != nil:
		return err
	case cm.Data["ca.crt"] == c.caPEM:
		return nil
	}
	cm = cm.DeepCopy()
	cm.Data = map[string]string{"ca.crt": c.caPEM}
	_, err = c.client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

const description = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."
