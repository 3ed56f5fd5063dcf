package netpol

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/dataplane/policy"
	sharedinformers "github.com/skiff-sh/skiff/internal/informers"
)

// PodRef names a pod.
type PodRef struct{ Namespace, Name string }

// Informers are the watches the enforcer reads, each from the agent's shared factory.
type Informers struct {
	Pods            coreinformers.PodInformer
	Namespaces      coreinformers.NamespaceInformer
	NetworkPolicies networkinginformers.NetworkPolicyInformer
	// Start starts the informers asked for so far (sharedinformers.Shared.Start).
	Start func()
	// ClusterNetworkPolicies, if set, is an informer of policy.networking.k8s.io v1beta1
	// ClusterNetworkPolicies, started by StartCluster (nil when the API server does not
	// serve them).
	ClusterNetworkPolicies cache.SharedIndexInformer
	StartCluster           func()
}

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
	// Informers are the watches Run reads, from the agent's shared factory.
	Informers Informers
	// Resync rewrites the maps at least this often (30 s).
	Resync time.Duration
	// Node is this node's name: another node's pod that starts, moves or goes with an
	// identity that exists changes only its addresses' identities, written without a
	// compilation. Empty: every change compiles.
	Node string
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
	cnps    cache.Store // ClusterNetworkPolicies (nil: none)
	ready   chan struct{}
	last    *policy.Result
	host    []netip.Addr
	// names and views name flow events (names.go) without taking mu.
	names atomic.Pointer[names]
	views atomic.Pointer[podViews]
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
	pods, nss, netpols := e.o.Informers.Pods, e.o.Informers.Namespaces, e.o.Informers.NetworkPolicies
	kick := make(chan struct{}, 1)
	watched := []cache.SharedIndexInformer{nss.Informer(), netpols.Informer()}
	var cnpStore cache.Store
	if cnps := e.o.Informers.ClusterNetworkPolicies; cnps != nil {
		watched = append(watched, cnps)
		cnpStore = cnps.GetStore()
		e.o.Informers.StartCluster()
	}
	podInf := pods.Informer()
	e.o.Informers.Start() // after asking for the informers: Start starts only those asked for
	views := &podViews{m: map[PodRef]policy.Pod{}, node: e.o.Node, full: true, ips: map[netip.Addr]string{}, owner: map[netip.Addr]PodRef{}}
	release, err := sharedinformers.Watch(ctx, views.fullHandler(kick), watched...)
	if err != nil {
		return err
	}
	defer release()
	releasePods, err := sharedinformers.Watch(ctx, views.handler(kick), podInf)
	if err != nil {
		return err
	}
	defer releasePods()
	e.mu.Lock()
	e.p, e.pods, e.nss, e.netpols, e.cnps = p, views, nss.Lister(), netpols.Lister(), cnpStore
	e.mu.Unlock()
	e.views.Store(views)
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
		full, ips := views.take()
		switch {
		case full:
			if err := e.Sync(); err != nil {
				return fmt.Errorf("writing the policy maps: %w", err)
			}
		case len(ips) > 0:
			if err := e.setIdentities(ips); err != nil {
				return fmt.Errorf("writing the policy maps: %w", err)
			}
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
			// The periodic pass compiles everything and compares with the kernel's maps,
			// not the last write.
			e.mu.Lock()
			e.p.Reread()
			e.mu.Unlock()
			views.markFull()
		}
	}
}

// setIdentities writes other nodes' pods' addresses with the identities their keys have
// ("" removes an address), compiling everything instead if one has none yet: a new identity
// may be some rule's peer.
func (e *Enforcer) setIdentities(ips map[netip.Addr]string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.p == nil {
		return fmt.Errorf("network policy enforcement is not running")
	}
	set := make(map[netip.Addr]policy.Identity, len(ips))
	for ip, key := range ips {
		if key == "" {
			set[ip] = Unidentified
			continue
		}
		id, ok := e.alloc.Lookup(key)
		if !ok {
			return e.syncLocked()
		}
		set[ip] = id
	}
	return e.p.SetPeerIdentities(set)
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
	netpols, _ := e.netpols.List(labels.Everything())
	var cnps []*policy.ClusterNetworkPolicy
	if e.cnps != nil {
		for _, obj := range e.cnps.List() {
			if c, ok := obj.(*policy.ClusterNetworkPolicy); ok {
				cnps = append(cnps, c)
			}
		}
	}
	e.pods.rekey(policy.ClusterSelectorKeys(cnps, policy.SelectorKeys(netpols)))
	local := e.o.Local()
	byPod := map[PodRef][]netip.Addr{} // a dual-stack pod has an address per family
	for ip, ref := range local {
		byPod[ref] = append(byPod[ref], ip)
	}
	pods := make([]policy.Pod, 0, e.pods.len())
	seen := map[netip.Addr]bool{}
	e.pods.each(func(ref PodRef, pp policy.Pod) {
		if ips, ok := byPod[ref]; ok && !pp.HostNetwork {
			slices.SortFunc(ips, func(a, b netip.Addr) int { return a.Compare(b) }) // IPv4 first
			pp.IPs = ips                                                            // the IPAM's, known before the API's status
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
	isLocal := func(a netip.Addr) bool { _, ok := local[a]; return ok }
	// Only this node's pods are endpoints: the rules compiled are the node's, whatever the
	// cluster's size (every pod still gets an identity: peers are anywhere).
	res, errs := policy.CompileWithCluster(e.alloc, netpols, cnps, pods, nss, isLocal)
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
	e.names.Store(&names{res: res, policies: append([]string(nil), e.p.list...)})
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
// (with their identity keys) rather than once per pod on every compilation, and what the
// changes since the last pass ask of it: a compilation (full), or only some addresses'
// identities (ips: address → identity key, "" when it has none any more). Most changes in a
// large cluster are the second kind — another node's pod of an existing workload started,
// or went — and cost one map write instead of a compilation of the whole cluster.
type podViews struct {
	node string

	mu   sync.Mutex
	m    map[PodRef]policy.Pod
	full bool
	ips  map[netip.Addr]string
	// owner is which pod each remote address is of now: a pod that went does not take its
	// address's identity from the pod that has it since.
	owner map[netip.Addr]PodRef
	// keys are the label keys the policies' selectors name (nil until the first
	// compilation: every label); views' identity keys count only those.
	keys map[string]bool
}

// rekey makes keys the label keys identities count, working every view's key out again
// when they changed (a policy naming a label no policy named before).
func (v *podViews) rekey(keys map[string]bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.keys != nil && maps.Equal(v.keys, keys) {
		return
	}
	v.keys = keys
	for ref, pp := range v.m {
		pp.Key = policy.IdentityKeyFor(pp, keys)
		v.m[ref] = pp
	}
}

// take returns and clears what the changes since the last call ask for.
func (v *podViews) take() (full bool, ips map[netip.Addr]string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	full, ips = v.full, v.ips
	v.full, v.ips = false, map[netip.Addr]string{}
	return full, ips
}

func (v *podViews) markFull() {
	v.mu.Lock()
	v.full = true
	v.mu.Unlock()
}

// fullHandler marks every change a compilation (namespaces, policies) and kicks.
func (v *podViews) fullHandler(kick chan struct{}) cache.ResourceEventHandler {
	trigger := sharedinformers.Trigger(kick)
	mark := func() { v.markFull(); trigger.OnAdd(nil, false) }
	return cache.ResourceEventHandlerFuncs{AddFunc: func(any) { mark() }, UpdateFunc: func(any, any) { mark() }, DeleteFunc: func(any) { mark() }}
}

// handler keeps the views and kicks a pass when a change matters to the maps.
func (v *podViews) handler(kick chan struct{}) cache.ResourceEventHandler {
	trigger := sharedinformers.Trigger(kick)
	set := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		pp := PolicyPod(pod)
		ref := PodRef{pod.Namespace, pod.Name}
		v.mu.Lock()
		pp.Key = policy.IdentityKeyFor(pp, v.keys)
		old, had := v.m[ref]
		v.m[ref] = pp
		changed := !had || !sameView(old, pp)
		if changed {
			v.note(ref, pod.Spec.NodeName, old, had, pp, true)
		}
		v.mu.Unlock()
		if changed {
			trigger.OnAdd(obj, false)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return
			}
			ref := PodRef{pod.Namespace, pod.Name}
			v.mu.Lock()
			old, had := v.m[ref]
			delete(v.m, ref)
			if had {
				v.note(ref, pod.Spec.NodeName, old, true, policy.Pod{}, false)
			}
			v.mu.Unlock()
			trigger.OnDelete(obj)
		},
	}
}

// note records what a pod's change (old → now; gone when !exists) asks for. Called with
// v.mu held.
func (v *podViews) note(ref PodRef, node string, old policy.Pod, had bool, now policy.Pod, exists bool) {
	if v.node == "" || node == v.node || old.HostNetwork || now.HostNetwork {
		v.full = true // this node's pods are endpoints; host-network pods were never identified
		return
	}
	if had {
		for _, ip := range old.IPs {
			if v.owner[ip] == ref {
				delete(v.owner, ip)
				v.ips[ip] = ""
			}
		}
	}
	if exists {
		for _, ip := range now.IPs {
			v.owner[ip] = ref
			v.ips[ip] = now.Key
		}
	}
}

// sameView reports whether two views of a pod give the maps the same: its identity key
// (namespace, labels, named ports) and addresses.
func sameView(a, b policy.Pod) bool {
	return a.Key == b.Key && a.HostNetwork == b.HostNetwork && slices.Equal(a.IPs, b.IPs)
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

// hostAddrs are the addresses of the interfaces in this network namespace, both families
// (IPv6 link-local ones are the node's to the programs already).
func hostAddrs() []netip.Addr {
	var out []netip.Addr
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && !ip.Unmap().IsLoopback() && !ip.IsLinkLocalUnicast() {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}
