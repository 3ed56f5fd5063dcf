package lbipam

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	bgpconfig "github.com/skiff-sh/skiff/bgp/config"
	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's).
const Name = "loadbalancer-ipam-controller"

// ConfigMapName is the ConfigMap in kube-system whose loadBalancerPools are read.
const ConfigMapName = "skiff-bgp"

// Controller allocates LoadBalancer addresses.
type Controller struct {
	client   kubernetes.Interface
	flags    []netip.Prefix
	services corelisters.ServiceLister
	cms      corelisters.ConfigMapLister
	recorder record.EventRecorder
	loop     *loop.Loop
	synced   []cache.InformerSynced
	log      *slog.Logger

	mu sync.Mutex
	// failed is the last allocation error reported per Service, so each is an event once.
	failed map[string]string
}

const key = "all"

// New wires the controller; cidrs are --loadbalancer-cidr.
func New(client kubernetes.Interface, services coreinformers.ServiceInformer, cms coreinformers.ConfigMapInformer, cidrs []string,
	recorder record.EventRecorder, log *slog.Logger) (*Controller, error) {
	c := &Controller{client: client, services: services.Lister(), cms: cms.Lister(), recorder: recorder, log: log, failed: map[string]string{},
		synced: []cache.InformerSynced{services.Informer().HasSynced, cms.Informer().HasSynced}}
	for _, s := range cidrs {
		p, err := bgpconfig.ParsePool(s)
		if err != nil {
			return nil, fmt.Errorf("--loadbalancer-cidr: %w", err)
		}
		c.flags = append(c.flags, p)
	}
	c.loop = loop.New(Name, c.sync, log)
	// One key: the allocation is decided over every Service at once.
	kick := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.loop.Add(key) },
		UpdateFunc: func(_, _ any) { c.loop.Add(key) },
		DeleteFunc: func(any) { c.loop.Add(key) },
	}
	_, _ = services.Informer().AddEventHandler(kick)
	_, _ = cms.Informer().AddEventHandler(cache.FilteringResourceEventHandler{Handler: kick, FilterFunc: func(obj any) bool {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		cm, ok := obj.(*corev1.ConfigMap)
		return ok && cm.Namespace == metav1.NamespaceSystem && cm.Name == ConfigMapName
	}})
	return c, nil
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	c.loop.Add(key)
	c.loop.Run(ctx, 1)
}

// Pools are the flag's pools, then the ConfigMap's.
func (c *Controller) pools() ([]netip.Prefix, error) {
	pools := append([]netip.Prefix(nil), c.flags...)
	cm, err := c.cms.ConfigMaps(metav1.NamespaceSystem).Get(ConfigMapName)
	if apierrors.IsNotFound(err) {
		return pools, nil
	}
	if err != nil {
		return nil, err
	}
	more, err := bgpconfig.LoadBalancerPools(cm)
	if err != nil {
		return pools, err
	}
	return append(pools, more...), nil
}

func statusAddr(svc *corev1.Service) netip.Addr {
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil {
			return a
		}
	}
	return netip.Addr{}
}

func (c *Controller) sync(ctx context.Context, _ string) error {
	pools, perr := c.pools()
	if perr != nil {
		// A broken ConfigMap takes no address away: the flag's pools still serve, and the
		// Services holding addresses of the ConfigMap's keep them until it is fixed.
		c.log.Warn("loadBalancerPools", "err", perr)
	}
	svcs, err := c.services.List(labels.Everything())
	if err != nil {
		return err
	}
	var wants []Want
	byKey := map[string]*corev1.Service{}
	for _, svc := range svcs {
		k := svc.Namespace + "/" + svc.Name
		if !Ours(svc) {
			if svc.Spec.Type != corev1.ServiceTypeLoadBalancer && len(svc.Status.LoadBalancer.Ingress) > 0 {
				// No longer a LoadBalancer: its address is released.
				if err := c.writeStatus(ctx, svc, netip.Addr{}); err != nil {
					return err
				}
			}
			continue
		}
		byKey[k] = svc
		w := Want{Key: k, Order: svc.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z") + "/" + string(svc.UID), Current: statusAddr(svc)}
		if svc.Spec.LoadBalancerIP != "" {
			a, err := netip.ParseAddr(svc.Spec.LoadBalancerIP)
			if err != nil {
				c.fail(svc, fmt.Errorf("loadBalancerIP %q is not an IP address", svc.Spec.LoadBalancerIP))
				continue
			}
			w.Requested = a
		}
		if perr != nil && w.Current.IsValid() && !inAny(c.flags, w.Current) {
			continue // see above
		}
		wants = append(wants, w)
	}
	var errs []string
	for k, r := range Allocate(pools, wants) {
		svc := byKey[k]
		if r.Err != nil {
			c.fail(svc, r.Err)
			if err := c.writeStatus(ctx, svc, netip.Addr{}); err != nil {
				errs = append(errs, err.Error())
			}
			continue
		}
		c.mu.Lock()
		delete(c.failed, k)
		c.mu.Unlock()
		if r.Addr != statusAddr(svc) {
			if err := c.writeStatus(ctx, svc, r.Addr); err != nil {
				errs = append(errs, err.Error())
				continue
			}
			c.recorder.Eventf(svc, corev1.EventTypeNormal, "IPAllocated", "Assigned IP %s", r.Addr)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func inAny(pools []netip.Prefix, a netip.Addr) bool {
	for _, p := range pools {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// fail reports an allocation failure as a Warning event, once per distinct error.
func (c *Controller) fail(svc *corev1.Service, err error) {
	k := svc.Namespace + "/" + svc.Name
	c.mu.Lock()
	same := c.failed[k] == err.Error()
	c.failed[k] = err.Error()
	c.mu.Unlock()
	if !same {
		c.recorder.Event(svc, corev1.EventTypeWarning, "AllocationFailed", err.Error())
	}
}

// writeStatus sets the Service's status.loadBalancer to addr (none: empty).
func (c *Controller) writeStatus(ctx context.Context, svc *corev1.Service, addr netip.Addr) error {
	var ingress []corev1.LoadBalancerIngress
	if addr.IsValid() {
		ingress = []corev1.LoadBalancerIngress{{IP: addr.String(), IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}
	}
	if len(ingress) == 0 && len(svc.Status.LoadBalancer.Ingress) == 0 {
		return nil
	}
	u := svc.DeepCopy()
	u.Status.LoadBalancer.Ingress = ingress
	_, err := c.client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
