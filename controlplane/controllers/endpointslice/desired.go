package endpointslice

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/controlplane/controllers/podutil"
)

// MaxEndpointsPerSlice is upstream's default.
const MaxEndpointsPerSlice = 100

// Group is the endpoints of one address type that share one port mapping; a Service whose
// named target port resolves differently on different pods gets one group per mapping.
type Group struct {
	AddressType discoveryv1.AddressType
	Ports       []discoveryv1.EndpointPort
	Endpoints   []discoveryv1.Endpoint
}

// AddressTypes are the address types a Service's slices have, as upstream's: one per IP
// family of the Service; for a Service stored without families, its ClusterIP's, and both
// for a headless one.
func AddressTypes(svc *corev1.Service) []discoveryv1.AddressType {
	var out []discoveryv1.AddressType
	for _, f := range svc.Spec.IPFamilies {
		switch f {
		case corev1.IPv4Protocol:
			out = append(out, discoveryv1.AddressTypeIPv4)
		case corev1.IPv6Protocol:
			out = append(out, discoveryv1.AddressTypeIPv6)
		}
	}
	if len(out) > 0 {
		return out
	}
	if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		if a, err := netip.ParseAddr(ip); err == nil && a.Is6() {
			return []discoveryv1.AddressType{discoveryv1.AddressTypeIPv6}
		}
		return []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4}
	}
	return []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6}
}

// podIP is the pod's address of an address type ("" when it has none of that family).
func podIP(p *corev1.Pod, t discoveryv1.AddressType) string {
	ips := p.Status.PodIPs
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips = []corev1.PodIP{{IP: p.Status.PodIP}}
	}
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip.IP); err == nil && a.Is4() == (t == discoveryv1.AddressTypeIPv4) {
			return ip.IP
		}
	}
	return ""
}

// Desired computes the endpoint groups of a Service from its selected pods: for each of the
// Service's address types, the pods with an address of that family, in stable order, with
// ready/serving/terminating conditions, nodeName and targetRef. It is the controller's
// decision core: no I/O.
func Desired(svc *corev1.Service, pods []*corev1.Pod) []Group {
	groups := map[string]*Group{}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	types := AddressTypes(svc)
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, t := range types {
			if ip := podIP(p, t); ip != "" {
				addEndpoint(groups, svc, p, t, ip)
			}
		}
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Group, 0, len(keys))
	for _, k := range keys {
		out = append(out, *groups[k])
	}
	return out
}

// addEndpoint adds pod p, at ip, to its group of address type t.
func addEndpoint(groups map[string]*Group, svc *corev1.Service, p *corev1.Pod, t discoveryv1.AddressType, ip string) {
	ports := portsFor(svc, p)
	key := string(t) + "/" + portsKey(ports)
	g, ok := groups[key]
	if !ok {
		g = &Group{AddressType: t, Ports: ports}
		groups[key] = g
	}
	ready := podutil.IsReady(p)
	terminating := p.DeletionTimestamp != nil
	ep := discoveryv1.Endpoint{
		Addresses: []string{ip},
		Conditions: discoveryv1.EndpointConditions{
			Ready:       ptr.To(ready && !terminating || svc.Spec.PublishNotReadyAddresses),
			Serving:     ptr.To(ready || svc.Spec.PublishNotReadyAddresses),
			Terminating: ptr.To(terminating),
		},
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
	}
	if p.Spec.NodeName != "" {
		ep.NodeName = ptr.To(p.Spec.NodeName)
	}
	if p.Spec.Hostname != "" && p.Spec.Subdomain == svc.Name {
		ep.Hostname = ptr.To(p.Spec.Hostname)
	}
	g.Endpoints = append(g.Endpoints, ep)
}

func portsFor(svc *corev1.Service, p *corev1.Pod) []discoveryv1.EndpointPort {
	var out []discoveryv1.EndpointPort
	for _, sp := range svc.Spec.Ports {
		port, ok := targetPort(sp, p)
		if !ok {
			continue
		}
		ep := discoveryv1.EndpointPort{Port: ptr.To(port), Protocol: ptr.To(sp.Protocol)}
		if sp.Name != "" || len(svc.Spec.Ports) > 1 {
			ep.Name = ptr.To(sp.Name)
		} else {
			ep.Name = ptr.To("")
		}
		if sp.AppProtocol != nil {
			ep.AppProtocol = sp.AppProtocol
		}
		out = append(out, ep)
	}
	return out
}

// targetPort resolves a Service port's targetPort on a pod (a name is looked up among the
// pod's container ports).
func targetPort(sp corev1.ServicePort, p *corev1.Pod) (int32, bool) {
	tp := sp.TargetPort
	if tp.Type == intstr.Int {
		if tp.IntVal == 0 {
			return sp.Port, true
		}
		return tp.IntVal, true
	}
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == tp.StrVal && cp.Protocol == sp.Protocol {
				return cp.ContainerPort, true
			}
		}
	}
	return 0, false
}

func portsKey(ports []discoveryv1.EndpointPort) string {
	var b strings.Builder
	for _, p := range ports {
		fmt.Fprintf(&b, "%s/%s/%d;", ptr.Deref(p.Name, ""), ptr.Deref(p.Protocol, ""), ptr.Deref(p.Port, 0))
	}
	return b.String()
}

// LegacyEndpoints renders groups as the v1 Endpoints subsets older tools read.
func LegacyEndpoints(groups []Group) []corev1.EndpointSubset {
	var subsets []corev1.EndpointSubset
	for _, g := range groups {
		var s corev1.EndpointSubset
		for _, p := range g.Ports {
			s.Ports = append(s.Ports, corev1.EndpointPort{Name: ptr.Deref(p.Name, ""), Port: ptr.Deref(p.Port, 0),
				Protocol: ptr.Deref(p.Protocol, corev1.ProtocolTCP), AppProtocol: p.AppProtocol})
		}
		for _, e := range g.Endpoints {
			a := corev1.EndpointAddress{IP: e.Addresses[0], NodeName: e.NodeName, TargetRef: e.TargetRef}
			if e.Hostname != nil {
				a.Hostname = *e.Hostname
			}
			if ptr.Deref(e.Conditions.Ready, false) {
				s.Addresses = append(s.Addresses, a)
			} else if !ptr.Deref(e.Conditions.Terminating, false) {
				s.NotReadyAddresses = append(s.NotReadyAddresses, a)
			}
		}
		if len(s.Addresses)+len(s.NotReadyAddresses) > 0 {
			subsets = append(subsets, s)
		}
	}
	return subsets
}

// EndpointsChanged says whether a pod update can change any Service's endpoints: the
// fields Desired reads, and the labels that decide which Services select the pod.
func EndpointsChanged(old, cur *corev1.Pod) bool {
	return !maps.Equal(old.Labels, cur.Labels) || old.UID != cur.UID ||
		old.Status.PodIP != cur.Status.PodIP || !slices.Equal(old.Status.PodIPs, cur.Status.PodIPs) || old.Status.Phase != cur.Status.Phase ||
		podutil.IsReady(old) != podutil.IsReady(cur) || (old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) ||
		old.Spec.NodeName != cur.Spec.NodeName || old.Spec.Hostname != cur.Spec.Hostname || old.Spec.Subdomain != cur.Spec.Subdomain
}
