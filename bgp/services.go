package bgp

import (
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/skiff-sh/skiff/bgp/config"
)

// ServicePrefixes decides which LoadBalancer addresses node advertises, each as a /32 (IPv6:
// a /128), IPv4's first:
// every address of a skiff LoadBalancer Service with externalTrafficPolicy Cluster (any
// node forwards to its backends), and of one with Local only while a ready endpoint of it
// runs on node — withdrawn when the last one goes, so the routers send its traffic only
// where the client's address can be kept. spec.externalIPs are served but not advertised:
// any user who may write a Service may set them, and announcing them to the routers would
// let that user attract anyone's traffic (CVE-2020-8554). Pure.
func ServicePrefixes(node string, services []*corev1.Service, slices []*discoveryv1.EndpointSlice) []netip.Prefix {
	local := map[string]bool{} // namespace/service with a ready endpoint on node
	for _, s := range slices {
		svc := s.Labels[discoveryv1.LabelServiceName]
		if svc == "" {
			continue
		}
		for _, ep := range s.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			if ready && ep.NodeName != nil && *ep.NodeName == node {
				local[s.Namespace+"/"+svc] = true
			}
		}
	}
	seen := map[netip.Prefix]bool{}
	var out []netip.Prefix
	for _, svc := range services {
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || (svc.Spec.LoadBalancerClass != nil && *svc.Spec.LoadBalancerClass != config.LoadBalancerClass) {
			continue
		}
		if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal && !local[svc.Namespace+"/"+svc.Name] {
			continue
		}
		for _, in := range svc.Status.LoadBalancer.Ingress {
			a, err := netip.ParseAddr(in.IP)
			if err != nil || a.Is4In6() {
				continue
			}
			p := netip.PrefixFrom(a, a.BitLen())
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr().Less(out[j].Addr()) })
	return out
}
