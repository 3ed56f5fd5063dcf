package services

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// Frontend is what clients connect to.
type Frontend struct {
	Addr  netip.Addr
	Port  uint16
	Proto corev1.Protocol
}

func (f Frontend) String() string {
	return netip.AddrPortFrom(f.Addr, f.Port).String() + "/" + string(f.Proto)
}

// Backend is one endpoint address and port.
type Backend struct {
	Addr netip.Addr
	Port uint16
	// Local is true when the endpoint runs on this node.
	Local bool
}

// Service is one frontend with its backends, ready for the maps.
type Service struct {
	// Name is "namespace/name:port/PROTO" (the port's name, or its number when unnamed).
	Name     string
	ID       uint32
	Frontend Frontend
	Backends []Backend
	// Affinity is sessionAffinity ClientIP's timeout; zero means none.
	Affinity time.Duration
	// Maglev selects backends by consistent hashing instead of at random.
	Maglev bool
	// ExternalLocal marks a NodePort frontend of externalTrafficPolicy Local: only local
	// backends, no SNAT, so the client's address is kept.
	ExternalLocal bool
	// HostNetnsOnly marks a frontend only the node's own network namespace has (a hostPort
	// on 127.0.0.1): in a pod's namespace that address is the pod's own loopback.
	HostNetnsOnly bool
}

// Node is the node the maps are compiled for.
type Node struct {
	Name string
	// IP is the node's IPv4 address, on which NodePorts are served (invalid: none).
	IP netip.Addr
	// IP6 is the node's IPv6 address, on which NodePorts are served over IPv6 (invalid: none).
	IP6 netip.Addr
}

// Addrs are the node's addresses, IPv4 first.
func (n Node) Addrs() []netip.Addr {
	var out []netip.Addr
	if n.IP.Is4() {
		out = append(out, n.IP)
	}
	if n.IP6.Is6() && !n.IP6.Is4In6() {
		out = append(out, n.IP6)
	}
	return out
}

// defaultAffinityTimeout is upstream's sessionAffinityConfig.clientIP.timeoutSeconds default.
const defaultAffinityTimeout = 10800 * time.Second

// Compile turns Services and their EndpointSlices into frontends: one per ClusterIP and port
// (TCP and UDP; headless and ExternalName Services have none), in each of a dual-stack
// Service's families, a frontend's backends being the endpoints of its family. Backends are the ready
// endpoints; when none is ready, the serving-but-terminating ones, as upstream kube-proxy
// does. ids keeps each frontend's id stable across calls (it is updated with new ones), so
// an update rewrites a frontend's backends in place.
//
// node is the node the maps are for: backends on it are marked local; a Service with
// internalTrafficPolicy Local gets only its endpoints (none means refused, as upstream); and
// NodePort and LoadBalancer Services get a frontend on its address per nodePort, with only
// local backends when externalTrafficPolicy is Local.
//
// pods are the cluster's pods (nil: none): the hostPorts of those on node become frontends
// too (see HostPorts).
func Compile(services []*corev1.Service, epSlices []*discoveryv1.EndpointSlice, pods []*corev1.Pod, ids map[string]uint32, node Node) []Service {
	c := Compiler{Node: node, IDs: ids}
	return c.Compile(services, epSlices, pods)
}

// Compiler is Compile with a memory: a Service whose object and EndpointSlices carry the
// resourceVersions they had in the previous call reuses the frontends compiled then, so one
// change among 10,000 Services recompiles one. Objects without a resourceVersion are always
// compiled afresh.
type Compiler struct {
	Node Node
	// IDs keeps frontend ids stable (see Compile).
	IDs  map[string]uint32
	memo map[string]compiled
	// groups are the frontends (with ids) each Service key had in the last call, and the
	// node's hostPorts under HostPortsKey: what Recompile's changes start from.
	groups map[string][]Service
	// used are the ids of IDs, kept beside it so a Recompile costs O(the Service).
	used map[uint32]bool
}

// HostPortsKey names the node's hostPort frontends among the Services' keys.
const HostPortsKey = "\x00hostports"

// ServiceChange is one Service's frontends before and after a change (nil: none), with ids.
type ServiceChange struct {
	Key      string
	Old, New []Service
}

type compiled struct {
	version string
	out     []Service
}

// Compile is the package's Compile, remembering each Service's result for the next call.
func (c *Compiler) Compile(services []*corev1.Service, epSlices []*discoveryv1.EndpointSlice, pods []*corev1.Pod) []Service {
	bySvc := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range epSlices {
		if key := SliceServiceKey(s); key != "" {
			bySvc[key] = append(bySvc[key], s)
		}
	}
	var out []Service
	memo := map[string]compiled{}
	byKey := make(map[string][]Service, len(services)+1)
	for _, svc := range services {
		key := svc.Namespace + "/" + svc.Name
		m := c.compiled(key, svc, bySvc[key])
		if m.version != "" {
			memo[key] = m
		}
		byKey[key] = m.out
		out = append(out, m.out...)
	}
	c.memo = memo
	// A hostPort that a Service frontend (or an older pod's hostPort) already holds is left
	// out: the agent admits no two pods on one host port, but a Service's external address or
	// NodePort may name the same address and port, and the Service keeps it.
	if hostPorts := HostPorts(pods, c.Node); len(hostPorts) > 0 {
		taken := make(map[Frontend]bool, len(out))
		for _, s := range out {
			taken[s.Frontend] = true
		}
		for _, hp := range hostPorts {
			if !taken[hp.Frontend] {
				taken[hp.Frontend] = true
				out = append(out, hp)
				byKey[HostPortsKey] = append(byKey[HostPortsKey], hp)
			}
		}
	}
	// In name order, so two new names whose ids collide get the same ids on every node.
	slices.SortFunc(out, byName)

	used := map[uint32]bool{}
	for _, id := range c.IDs {
		used[id] = true
	}
	live := map[string]bool{}
	for i := range out {
		name := out[i].Name
		live[name] = true
		id, ok := c.IDs[name]
		if !ok {
			id = newID(name, used)
			c.IDs[name] = id
			used[id] = true
		}
		out[i].ID = id
	}
	for name := range c.IDs {
		if !live[name] {
			delete(used, c.IDs[name])
			delete(c.IDs, name)
		}
	}
	c.used = used
	// Each Service's frontends as programmed (and the hostPorts kept), for Recompile.
	c.groups = make(map[string][]Service, len(byKey))
	for key, frontends := range byKey {
		if len(frontends) == 0 {
			continue
		}
		g := slices.Clone(frontends)
		for i := range g {
			g[i].ID = c.IDs[g[i].Name]
		}
		slices.SortFunc(g, byName)
		c.groups[key] = g
	}
	return out
}

// compiled is key's frontends for svc and its slices: the last call's when their
// versions are unchanged, else compiled afresh.
func (c *Compiler) compiled(key string, svc *corev1.Service, slicesOf []*discoveryv1.EndpointSlice) compiled {
	version := versionOf(svc, slicesOf)
	if m, ok := c.memo[key]; ok && version != "" && m.version == version {
		return m
	}
	return compiled{version: version, out: compileService(svc, slicesOf, c.Node)}
}

func byName(a, b Service) int { return cmp.Compare(a.Name, b.Name) }

// Recompile compiles one Service (svc nil: deleted) with its EndpointSlices and returns how its frontends changed since the last
// Compile or Recompile. Ids of frontends it no longer has are freed, new ones get ids in
// name order. It costs O(the Service), so a change among 10,000 Services costs one.
func (c *Compiler) Recompile(key string, svc *corev1.Service, epSlices []*discoveryv1.EndpointSlice) ServiceChange {
	var fresh []Service
	if svc != nil {
		m := c.compiled(key, svc, epSlices)
		if m.version != "" {
			if c.memo == nil {
				c.memo = map[string]compiled{}
			}
			c.memo[key] = m
		} else {
			delete(c.memo, key)
		}
		fresh = slices.Clone(m.out)
	} else {
		delete(c.memo, key)
	}
	return c.regroup(key, fresh)
}

// RecompileHostPorts is Recompile for the hostPorts of the node's pods (see HostPorts).
func (c *Compiler) RecompileHostPorts(pods []*corev1.Pod) ServiceChange {
	return c.regroup(HostPortsKey, HostPorts(pods, c.Node))
}

// regroup gives fresh (key's new frontends) their ids and records it as key's group.
func (c *Compiler) regroup(key string, fresh []Service) ServiceChange {
	if c.IDs == nil {
		c.IDs = map[string]uint32{}
	}
	if c.used == nil {
		c.used = make(map[uint32]bool, len(c.IDs))
		for _, id := range c.IDs {
			c.used[id] = true
		}
	}
	old := c.groups[key]
	slices.SortFunc(fresh, byName)
	keep := make(map[string]bool, len(fresh))
	for _, s := range fresh {
		keep[s.Name] = true
	}
	for _, s := range old {
		if id, ok := c.IDs[s.Name]; ok && !keep[s.Name] {
			delete(c.IDs, s.Name)
			delete(c.used, id)
		}
	}
	for i := range fresh {
		id, ok := c.IDs[fresh[i].Name]
		if !ok {
			id = newID(fresh[i].Name, c.used)
			c.IDs[fresh[i].Name] = id
			c.used[id] = true
		}
		fresh[i].ID = id
	}
	if c.groups == nil {
		c.groups = map[string][]Service{}
	}
	if len(fresh) == 0 {
		delete(c.groups, key)
	} else {
		c.groups[key] = fresh
	}
	return ServiceChange{Key: key, Old: old, New: fresh}
}

// versionOf identifies a Service's inputs: its resourceVersion and its slices' (in a fixed
// order); empty when one has none.
func versionOf(svc *corev1.Service, epSlices []*discoveryv1.EndpointSlice) string {
	if svc.ResourceVersion == "" {
		return ""
	}
	parts := make([]string, 0, len(epSlices))
	for _, s := range epSlices {
		if s.ResourceVersion == "" {
			return ""
		}
		parts = append(parts, s.Name+"@"+s.ResourceVersion)
	}
	slices.Sort(parts)
	return string(svc.UID) + "@" + svc.ResourceVersion + "|" + strings.Join(parts, ",")
}

// compileService makes one Service's frontends (without ids).
func compileService(svc *corev1.Service, slicesOf []*discoveryv1.EndpointSlice, node Node) []Service {
	var out []Service
	add := func(name string, s Service) {
		s.Name = name
		out = append(out, s)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	maglev := svc.Annotations[AnnotationLBAlgorithm] == "maglev"
	var affinity time.Duration
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		affinity = defaultAffinityTimeout
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			affinity = time.Duration(*c.ClientIP.TimeoutSeconds) * time.Second
		}
	}
	// A NodePort is served on the node's address of each family the Service has (a
	// single-stack Service has no endpoints of the other).
	if svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
		for _, nodeIP := range node.Addrs() {
			if !hasFamily(svc, nodeIP) {
				continue
			}
			suffix := "@nodeport"
			if nodeIP.Is6() {
				suffix = "@nodeport6"
			}
			for _, port := range svc.Spec.Ports {
				if port.NodePort == 0 || (port.Protocol != corev1.ProtocolTCP && port.Protocol != corev1.ProtocolUDP) {
					continue
				}
				only := ""
				if local {
					only = node.Name
				}
				add(fmt.Sprintf("%s/%s:%d/%s%s", svc.Namespace, svc.Name, port.NodePort, port.Protocol, suffix), Service{
					Frontend: Frontend{Addr: nodeIP, Port: uint16(port.NodePort), Proto: port.Protocol}, ExternalLocal: local, Maglev: maglev, Affinity: affinity,
					Backends: backends(slicesOf, port, only, node.Name, nodeIP.Is6())})
			}
		}
	}
	// LoadBalancer addresses (status.loadBalancer.ingress) and spec.externalIPs are served
	// as NodePorts are, on the Service's own ports: the nodes' routers send them here
	// (the BGP speaker advertises the addresses), and externalTrafficPolicy applies.
	local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	for _, ip := range externalAddrs(svc) {
		if !hasFamily(svc, ip) {
			continue // as upstream: an address of a family the Service lacks has no endpoints
		}
		only := ""
		if local {
			only = node.Name
		}
		for _, port := range svc.Spec.Ports {
			if port.Protocol != corev1.ProtocolTCP && port.Protocol != corev1.ProtocolUDP {
				continue
			}
			add(fmt.Sprintf("%s/%s:%d/%s@%s", svc.Namespace, svc.Name, port.Port, port.Protocol, ip), Service{
				Frontend: Frontend{Addr: ip, Port: uint16(port.Port), Proto: port.Protocol}, ExternalLocal: local, Maglev: maglev, Affinity: affinity,
				Backends: backends(slicesOf, port, only, node.Name, ip.Is6())})
		}
	}
	for _, ipText := range clusterIPs(svc) {
		ip, err := netip.ParseAddr(ipText)
		if err != nil || ip.Is4In6() {
			continue
		}
		for _, port := range svc.Spec.Ports {
			if port.Protocol != corev1.ProtocolTCP && port.Protocol != corev1.ProtocolUDP {
				continue
			}
			portName := port.Name
			if portName == "" {
				portName = fmt.Sprint(port.Port)
			}
			name := fmt.Sprintf("%s/%s:%s/%s", svc.Namespace, svc.Name, portName, port.Protocol)
			if len(clusterIPs(svc)) > 1 {
				name += "@" + ip.String()
			}
			localOnly := ""
			if p := svc.Spec.InternalTrafficPolicy; p != nil && *p == corev1.ServiceInternalTrafficPolicyLocal {
				localOnly = node.Name
			}
			add(name, Service{Affinity: affinity, Maglev: maglev, Frontend: Frontend{Addr: ip, Port: uint16(port.Port), Proto: port.Protocol},
				Backends: backends(slicesOf, port, localOnly, node.Name, ip.Is6())})
		}
	}
	return out
}

// loopback is where a hostPort without a hostIP is also served on the node, as the CNI portmap
// plugin serves it for clients on the node.
var loopback, loopback6 = netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()

// HostPorts makes the hostPorts of node's pods into frontends, as the CNI portmap plugin maps
// them for the kubelet: hostIP:hostPort/protocol goes to the pod's address of hostIP's family
// and containerPort, with the pod as the one, local, backend and the client's address kept. A
// port without a hostIP is served on the node's address of each family the pod has, and on
// 127.0.0.1 and ::1 (for the node's own processes and host-network pods); 0.0.0.0 and :: are
// that in one family. Pods that have no address yet, that have finished,
// that share the node's network (their ports are the node's already) or that run on other
// nodes have none. When two pods name one frontend (the agent admits only one; the other is
// being replaced), the older pod keeps it.
func HostPorts(pods []*corev1.Pod, node Node) []Service {
	var candidates []*corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName != node.Name || node.Name == "" || p.Spec.HostNetwork ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || (!podIP(p, false).IsValid() && !podIP(p, true).IsValid()) {
			continue
		}
		candidates = append(candidates, p)
	}
	slices.SortFunc(candidates, func(a, b *corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	var out []Service
	seen := map[Frontend]bool{}
	for _, p := range candidates {
		pod4, pod6 := podIP(p, false), podIP(p, true)
		for _, port := range podPorts(p) {
			if port.HostPort <= 0 || port.HostPort > 65535 || port.ContainerPort <= 0 || port.ContainerPort > 65535 {
				continue
			}
			proto := port.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			if proto != corev1.ProtocolTCP && proto != corev1.ProtocolUDP {
				continue
			}
			for _, addr := range hostPortAddrs(port.HostIP, node) {
				to := pod4
				if addr.Is6() {
					to = pod6
				}
				f := Frontend{Addr: addr, Port: uint16(port.HostPort), Proto: proto}
				if !to.IsValid() || seen[f] {
					continue
				}
				seen[f] = true
				out = append(out, Service{
					Name:          fmt.Sprintf("%s/%s:%d/%s@hostport@%s", p.Namespace, p.Name, port.HostPort, proto, addr),
					Frontend:      f,
					Backends:      []Backend{{Addr: to, Port: uint16(port.ContainerPort), Local: true}},
					ExternalLocal: true,
					HostNetnsOnly: addr.IsLoopback(),
				})
			}
		}
	}
	return out
}

// podPorts are the ports of a pod's containers and of its sidecars (restartable init
// containers), which run beside them.
func podPorts(p *corev1.Pod) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			out = append(out, c.Ports...)
		}
	}
	for _, c := range p.Spec.Containers {
		out = append(out, c.Ports...)
	}
	return out
}

// hostPortAddrs are the addresses a hostIP names on the node: itself when it is an address,
// the node's address and loopback of its family when it is 0.0.0.0 or ::, of both families
// when it is empty, none when it is not an address.
func hostPortAddrs(hostIP string, node Node) []netip.Addr {
	v4, v6 := true, true
	if hostIP != "" {
		a, err := netip.ParseAddr(hostIP)
		if err != nil || a.Is4In6() {
			return nil
		}
		if !a.IsUnspecified() {
			return []netip.Addr{a}
		}
		v4, v6 = a.Is4(), a.Is6()
	}
	var out []netip.Addr
	if v4 {
		if node.IP.Is4() {
			out = append(out, node.IP)
		}
		out = append(out, loopback)
	}
	if v6 {
		if node.IP6.Is6() {
			out = append(out, node.IP6)
		}
		out = append(out, loopback6)
	}
	return out
}

// podIP is the pod's address of a family (invalid: none yet).
func podIP(p *corev1.Pod, v6 bool) netip.Addr {
	texts := []string{p.Status.PodIP}
	for _, ip := range p.Status.PodIPs {
		texts = append(texts, ip.IP)
	}
	for _, t := range texts {
		if a, err := netip.ParseAddr(t); err == nil && a.Is6() == v6 && !a.Is4In6() {
			return a
		}
	}
	return netip.Addr{}
}

// externalAddrs are the Service's LoadBalancer and external addresses, once each.
func externalAddrs(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	var texts []string
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, in := range svc.Status.LoadBalancer.Ingress {
			texts = append(texts, in.IP)
		}
	}
	texts = append(texts, svc.Spec.ExternalIPs...)
	for _, t := range texts {
		if a, err := netip.ParseAddr(t); err == nil && !a.Is4In6() && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

func clusterIPs(svc *corev1.Service) []string {
	if len(svc.Spec.ClusterIPs) > 0 {
		return svc.Spec.ClusterIPs
	}
	if svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		return []string{svc.Spec.ClusterIP}
	}
	return nil
}

// hasFamily says whether svc has addr's family: one of its ipFamilies, or of its ClusterIPs
// when those are unset (objects made before dual-stack, and unit tests).
func hasFamily(svc *corev1.Service, addr netip.Addr) bool {
	want := corev1.IPv4Protocol
	if addr.Is6() {
		want = corev1.IPv6Protocol
	}
	if len(svc.Spec.IPFamilies) > 0 {
		return slices.Contains(svc.Spec.IPFamilies, want)
	}
	ips := clusterIPs(svc)
	if len(ips) == 0 || ips[0] == corev1.ClusterIPNone {
		return want == corev1.IPv4Protocol
	}
	for _, t := range ips {
		if a, err := netip.ParseAddr(t); err == nil && a.Is6() == addr.Is6() {
			return true
		}
	}
	return false
}

// backends picks the endpoints of port from slices: ready ones, else serving terminating ones;
// with localOnly, only that node's; only IPv6 ones when v6, else only IPv4 ones. Endpoints on
// node are marked Local.
func backends(epSlices []*discoveryv1.EndpointSlice, port corev1.ServicePort, localOnly, node string, v6 bool) []Backend {
	var ready, terminating []Backend
	for _, s := range epSlices {
		if (s.AddressType == discoveryv1.AddressTypeIPv6) != v6 || s.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		var target int32 = -1
		for _, p := range s.Ports {
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			proto := corev1.ProtocolTCP
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			if name == port.Name && proto == port.Protocol && p.Port != nil {
				target = *p.Port
			}
		}
		if target < 0 || target > 65535 {
			continue
		}
		for _, ep := range s.Endpoints {
			if localOnly != "" && (ep.NodeName == nil || *ep.NodeName != localOnly) {
				continue
			}
			c := ep.Conditions
			isReady := c.Ready == nil || *c.Ready
			serving := c.Serving != nil && *c.Serving
			terminatingNow := c.Terminating != nil && *c.Terminating
			for _, a := range ep.Addresses {
				addr, err := netip.ParseAddr(a)
				if err != nil || addr.Is6() != v6 || addr.Is4In6() {
					continue
				}
				b := Backend{Addr: addr, Port: uint16(target), Local: node != "" && ep.NodeName != nil && *ep.NodeName == node}
				switch {
				case isReady:
					ready = append(ready, b)
				case serving && terminatingNow:
					terminating = append(terminating, b)
				}
			}
		}
	}
	out := ready
	if len(out) == 0 {
		out = terminating
	}
	slices.SortFunc(out, func(a, b Backend) int {
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c
		}
		return cmp.Compare(a.Port, b.Port)
	})
	return slices.Compact(out)
}

// newID derives an id from the name (stable across agents and restarts in the common case),
// probing past ids in use; 0 is never used.
func newID(name string, used map[uint32]bool) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	id := h.Sum32()
	for id == 0 || used[id] {
		id++
	}
	return id
}

// SliceServiceKey is the key of the Service an EndpointSlice belongs to ("" for none).
func SliceServiceKey(obj any) string {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return ""
	}
	name := s.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return ""
	}
	return s.Namespace + "/" + name
}

// HasHostPorts is whether obj is a pod of node's that asks for a host port (a deleted pod whose
// last state is unknown may have: yes).
func HasHostPorts(obj any, node string) bool {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return true
	}
	if p.Spec.NodeName != node {
		return false
	}
	for _, port := range podPorts(p) {
		if port.HostPort > 0 {
			return true
		}
	}
	return false
}
