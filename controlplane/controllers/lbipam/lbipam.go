package lbipam

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
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

// statusAddr is the Service's status address of a family (invalid: none).
func statusAddr(svc *corev1.Service, v6 bool) netip.Addr {
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil && a.Is6() == v6 {
			return a
		}
	}
	return netip.Addr{}
}

// statusAddrs are the Service's status addresses in order.
func statusAddrs(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// families are the Service's IP families as booleans (true: IPv6), in its order; a Service
// without ipFamilies (made before dual-stack) is IPv4.
func families(svc *corev1.Service) []bool {
	if len(svc.Spec.IPFamilies) == 0 {
		return []bool{false}
	}
	var out []bool
	for _, f := range svc.Spec.IPFamilies {
		out = append(out, f == corev1.IPv6Protocol)
	}
	return out
}

// ofFamily are the pools of a family.
func ofFamily(pools []netip.Prefix, v6 bool) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range pools {
		if p.Addr().Is6() == v6 {
			out = append(out, p)
		}
	}
	return out
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
	// Each family is allocated on its own, from its pools: a dual-stack Service gets an
	// address of each (in its ipFamilies order), as MetalLB and Cilium give one; a family
	// without any pool is left out of a Service that gets the other, and is an error for one
	// that has only it.
	wants := map[bool][]Want{}
	byKey := map[string]*corev1.Service{}
	for _, svc := range svcs {
		k := svc.Namespace + "/" + svc.Name
		if !Ours(svc) {
			if svc.Spec.Type != corev1.ServiceTypeLoadBalancer && len(svc.Status.LoadBalancer.Ingress) > 0 {
				// No longer a LoadBalancer: its address is released.
				if err := c.writeStatus(ctx, svc, nil); err != nil {
					return err
				}
			}
			continue
		}
		var requested netip.Addr
		if svc.Spec.LoadBalancerIP != "" {
			a, err := netip.ParseAddr(svc.Spec.LoadBalancerIP)
			if err != nil {
				c.fail(svc, fmt.Errorf("loadBalancerIP %q is not an IP address", svc.Spec.LoadBalancerIP))
				continue
			}
			if !slices.Contains(families(svc), a.Is6()) {
				c.fail(svc, fmt.Errorf("loadBalancerIP %s is not of the Service's ipFamilies %v", a, svc.Spec.IPFamilies))
				continue
			}
			requested = a
		}
		if perr != nil && slices.ContainsFunc(statusAddrs(svc), func(a netip.Addr) bool { return !inAny(c.flags, a) }) {
			continue // see above: left as it is until the ConfigMap is fixed
		}
		byKey[k] = svc
		order := svc.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z") + "/" + string(svc.UID)
		for _, v6 := range families(svc) {
			w := Want{Key: k, Order: order, Current: statusAddr(svc, v6)}
			if requested.IsValid() && requested.Is6() == v6 {
				w.Requested = requested
			}
			wants[v6] = append(wants[v6], w)
		}
	}
	results := map[bool]map[string]Result{}
	for v6, ws := range wants {
		results[v6] = Allocate(ofFamily(pools, v6), ws)
	}
	var errs []string
	for k, svc := range byKey {
		var addrs []netip.Addr
		var failure error
		fams := families(svc)
		for _, v6 := range fams {
			r := results[v6][k]
			switch {
			case r.Err == nil:
				addrs = append(addrs, r.Addr)
			case len(ofFamily(pools, v6)) == 0 && len(fams) > 1:
				// no pool of this family: the Service is served in the other
			case failure == nil:
				failure = r.Err
			}
		}
		if failure == nil && len(addrs) == 0 {
			failure = fmt.Errorf("no LoadBalancer pool of the Service's ipFamilies %v (%s)", svc.Spec.IPFamilies, poolList(pools))
		}
		if failure != nil {
			c.fail(svc, failure)
			if err := c.writeStatus(ctx, svc, nil); err != nil {
				errs = append(errs, err.Error())
			}
			continue
		}
		c.mu.Lock()
		delete(c.failed, k)
		c.mu.Unlock()
		if !slices.Equal(addrs, statusAddrs(svc)) {
			if err := c.writeStatus(ctx, svc, addrs); err != nil {
				errs = append(errs, err.Error())
				continue
			}
			c.recorder.Eventf(svc, corev1.EventTypeNormal, "IPAllocated", "Assigned IP %s", joinAddrs(addrs))
		}
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func joinAddrs(addrs []netip.Addr) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
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

// writeStatus sets the Service's status.loadBalancer to addrs (none: empty).
func (c *Controller) writeStatus(ctx context.Context, svc *corev1.Service, addrs []netip.Addr) error {
	var ingress []corev1.LoadBalancerIngress
	for _, a := range addrs {
		ingress = append(ingress, corev1.LoadBalancerIngress{IP: a.String(), IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)})
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
