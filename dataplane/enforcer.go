package dataplane

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/skiff-sh/skiff/dataplane/policy"
	sharedinformers "github.com/skiff-sh/skiff/internal/informers"
)

// PodRef names a pod.
type PodRef struct{ Namespace, Name string }

// EnforcerOptions configure a node's NetworkPolicy enforcement.
type EnforcerOptions struct {
	// PinDir holds the node's pinned maps and links (PinDir(node)).
	PinDir string
	// Local lists this node's pod addresses and whose they are (the agent's IPAM, which
	// knows a pod's address before the API does).
	Local func() map[netip.Addr]PodRef
	// Host are the node's own addresses (its probes reach its pods whatever the policy);
	// the addresses of the interfaces in the agent's network namespace are added.
	Host []netip.Addr
	// Netns, if set, is where the pods' host-side veths are (the agent's --netns).
	Netns string
	// Informers, if set, is the agent's shared factory.
	Informers *sharedinformers.Shared
	// Resync rewrites the maps at least this often (30 s).
	Resync time.Duration
}

// Enforcer keeps the policy maps equal to the cluster's NetworkPolicies, pods and
// namespaces, and puts the programs on each new pod's veth once the pod's entries are in.
type Enforcer struct {
	o   EnforcerOptions
	log *slog.Logger

	mu      sync.Mutex
	p       *Policy
	alloc   *policy.Allocator
	pods    *podViews
	nss     corelisters.NamespaceLister
	netpols networkinglisters.NetworkPolicyLister
	ready   chan struct{}
	last    *policy.Result
	host    []netip.Addr
}

// NewEnforcer returns an enforcer; Run runs it.
func NewEnforcer(o EnforcerOptions, log *slog.Logger) *Enforcer {
	if o.Resync == 0 {
		o.Resync = 30 * time.Second
	}
	return &Enforcer{o: o, log: log, alloc: policy.NewAllocator(), ready: make(chan struct{})}
}

// Run loads the programs and keeps the maps in line with the cluster until ctx ends.
func (e *Enforcer) Run(ctx context.Context, client kubernetes.Interface) error {
	p, err := LoadPolicy(e.o.PinDir)
	if err != nil {
		return err
	}
	defer p.Close()
	if kept, gone := p.Refresh(); kept+gone > 0 {
		e.log.Info("policy programs refreshed on existing pod veths", "veths", kept/2, "gone", gone/2)
	}
	factory, start := sharedinformers.Factory(ctx, e.o.Informers, client)
	pods, nss, netpols := factory.Core().V1().Pods(), factory.Core().V1().Namespaces(), factory.Networking().V1().NetworkPolicies()
	kick := make(chan struct{}, 1)
	watched := []cache.SharedIndexInformer{nss.Informer(), netpols.Informer()}
	podInf := pods.Informer()
	start() // after asking for the informers: Start starts only those asked for
	release, err := sharedinformers.Watch(ctx, sharedinformers.Trigger(kick), watched...)
	if err != nil {
		return err
	}
	defer release()
	views := &podViews{m: map[PodRef]policy.Pod{}}
	releasePods, err := sharedinformers.Watch(ctx, views.handler(kick), podInf)
	if err != nil {
		return err
	}
	defer releasePods()
	e.mu.Lock()
	e.p, e.pods, e.nss, e.netpols = p, views, nss.Lister(), netpols.Lister()
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.p = nil
		e.mu.Unlock()
	}()
	if err := e.inNetns(func() error { e.host = append(append([]netip.Addr(nil), e.o.Host...), hostAddrs()...); return nil }); err != nil {
		return err
	}
	e.log.Info("network policy enforcement running", "pins", e.o.PinDir, "host", e.host)
	for {
		if err := e.Sync(); err != nil {
			return fmt.Errorf("writing the policy maps: %w", err)
		}
		select {
		case <-e.ready:
		default:
			close(e.ready)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
			select { // coalesce a burst
			case <-ctx.Done():
				return nil
			case <-time.After(20 * time.Millisecond):
			}
		case <-time.After(e.o.Resync):
			// The periodic pass compares with the kernel's maps, not the last write.
			e.mu.Lock()
			e.p.Reread()
			e.mu.Unlock()
		}
	}
}

// Sync compiles the current state and writes it.
func (e *Enforcer) Sync() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.syncLocked()
}

func (e *Enforcer) syncLocked() error {
	if e.p == nil {
		return fmt.Errorf("network policy enforcement is not running")
	}
	local := e.o.Local()
	byPod := map[PodRef]netip.Addr{}
	for ip, ref := range local {
		byPod[ref] = ip
	}
	pods := make([]policy.Pod, 0, e.pods.len())
	seen := map[netip.Addr]bool{}
	e.pods.each(func(ref PodRef, pp policy.Pod) {
		if ip, ok := byPod[ref]; ok && !pp.HostNetwork {
			pp.IPs = []netip.Addr{ip} // the IPAM's, known before the API's status
		}
		for _, ip := range pp.IPs {
			if _, ok := local[ip]; ok {
				seen[ip] = true
			}
		}
		pods = append(pods, pp)
	})
	namespaces, _ := e.nss.List(labels.Everything())
	var nss []policy.Namespace
	for _, ns := range namespaces {
		nss = append(nss, policy.Namespace{Name: ns.Name, Labels: ns.Labels})
	}
	netpols, _ := e.netpols.List(labels.Everything())
	isLocal := func(a netip.Addr) bool { _, ok := local[a]; return ok }
	// Only this node's pods are endpoints: the rules compiled are the node's, whatever the
	// cluster's size (every pod still gets an identity: peers are anywhere).
	res, errs := policy.Compile(e.alloc, netpols, pods, nss, isLocal)
	for _, err := range errs {
		e.log.Warn("network policy", "err", err)
	}
	// A local address whose pod the informer has not shown yet is isolated both ways
	// until it does: its policies are unknown, so nothing passes.
	for ip := range local {
		if !seen[ip] {
			res.Endpoints[ip] = policy.Endpoint{Pod: local[ip].Namespace + "/" + local[ip].Name, Ingress: true, Egress: true}
		}
	}
	if _, err := e.p.Sync(res, isLocal, e.host); err != nil {
		return err
	}
	e.last = res
	return nil
}

// AttachPod writes the pod's entries and then puts the programs on its veth: the pod's first
// packet meets its policy. CNI ADD calls it after creating the veth and before the pod's
// containers start; it waits (up to ctx) for enforcement to be running.
func (e *Enforcer) AttachPod(ctx context.Context, hostIf string) error {
	select {
	case <-e.ready:
	case <-ctx.Done():
		return fmt.Errorf("network policy enforcement not running yet: %w", ctx.Err())
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.syncLocked(); err != nil {
		return err
	}
	return e.inNetns(func() error { return e.p.Attach(hostIf) })
}

// inNetns runs f in the pods' network namespace (or here, without one).
func (e *Enforcer) inNetns(f func() error) error {
	if e.o.Netns == "" {
		return f()
	}
	return ns.WithNetNSPath(e.o.Netns, func(ns.NetNS) error { return f() })
}

// DetachPod removes what AttachPod made for a veth.
func (e *Enforcer) DetachPod(hostIf string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.p != nil {
		e.p.Detach(hostIf)
	}
}

// Last is the last compiled state (nil before the first sync), for inspection.
func (e *Enforcer) Last() *policy.Result {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

// Drops reads the drop counters (nil when not running).
func (e *Enforcer) Drops() ([]Drop, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.p == nil {
		return nil, nil
	}
	return e.p.Drops()
}

// podViews are the cluster's pods as the compiler takes them, converted once per pod change
// (with their identity keys) rather than once per pod on every compilation.
type podViews struct {
	mu sync.Mutex
	m  map[PodRef]policy.Pod
}

// handler keeps the views and kicks a compilation.
func (v *podViews) handler(kick chan struct{}) cache.ResourceEventHandler {
	trigger := sharedinformers.Trigger(kick)
	set := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		pp := PolicyPod(pod)
		pp.Key = policy.IdentityKey(pp)
		v.mu.Lock()
		v.m[PodRef{pod.Namespace, pod.Name}] = pp
		v.mu.Unlock()
		trigger.OnAdd(obj, false)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				v.mu.Lock()
				delete(v.m, PodRef{pod.Namespace, pod.Name})
				v.mu.Unlock()
			}
			trigger.OnDelete(obj)
		},
	}
}

// each calls f with every view, under the lock (f only copies).
func (v *podViews) each(f func(PodRef, policy.Pod)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for k, p := range v.m {
		f(k, p)
	}
}

func (v *podViews) len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.m)
}

// PolicyPod is what the compiler needs of a pod.
func PolicyPod(pod *corev1.Pod) policy.Pod {
	pp := policy.Pod{Namespace: pod.Namespace, Name: pod.Name, Labels: pod.Labels, HostNetwork: pod.Spec.HostNetwork}
	for _, ip := range pod.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			pp.IPs = append(pp.IPs, a)
		}
	}
	if len(pp.IPs) == 0 && pod.Status.PodIP != "" {
		if a, err := netip.ParseAddr(pod.Status.PodIP); err == nil {
			pp.IPs = append(pp.IPs, a)
		}
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		pp.IPs = nil // a finished pod's address may already be another's
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.Name == "" {
					continue
				}
				proto := policy.TCP
				switch p.Protocol {
				case corev1.ProtocolUDP:
					proto = policy.UDP
				case corev1.ProtocolSCTP:
					proto = policy.SCTP
				}
				pp.Ports = append(pp.Ports, policy.NamedPort{Name: p.Name, Protocol: proto, Port: uint16(p.ContainerPort)})
			}
		}
	}
	return pp
}

// hostAddrs are the IPv4 addresses of the interfaces in this network namespace.
func hostAddrs() []netip.Addr {
	var out []netip.Addr
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP.To4()); ok && !ip.IsLoopback() {
				out = append(out, ip)
			}
		}
	}
	return out
}
