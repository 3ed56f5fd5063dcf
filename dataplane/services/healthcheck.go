package services

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// HealthCheck is what one healthCheckNodePort answers: a LoadBalancer Service with
// externalTrafficPolicy Local and how many of its ready endpoints run on this node.
type HealthCheck struct {
	Namespace, Name string
	Port            uint16
	LocalEndpoints  int
}

// HealthChecks lists the health checks this node serves, without I/O.
func HealthChecks(services []*corev1.Service, epSlices []*discoveryv1.EndpointSlice, node string) []HealthCheck {
	// Only LoadBalancer Services with externalTrafficPolicy Local have one; most clusters
	// have few or none, so their endpoints are the only ones counted.
	var out []HealthCheck
	index := map[string]int{}
	for _, svc := range services {
		p := svc.Spec.HealthCheckNodePort
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal || p <= 0 || p > 65535 {
			continue
		}
		index[svc.Namespace+"/"+svc.Name] = len(out)
		out = append(out, HealthCheck{Namespace: svc.Namespace, Name: svc.Name, Port: uint16(p)})
	}
	if len(out) == 0 {
		return nil
	}
	// A dual-stack pod is in a slice of each family: count each family's endpoints and take
	// the larger, so a pod counts once (and an IPv6-only Service's count too).
	perFamily := make([]map[discoveryv1.AddressType]int, len(out))
	for _, s := range epSlices {
		i, ok := index[s.Namespace+"/"+s.Labels[discoveryv1.LabelServiceName]]
		if !ok {
			continue
		}
		if perFamily[i] == nil {
			perFamily[i] = map[discoveryv1.AddressType]int{}
		}
		for _, ep := range s.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			if ready && ep.NodeName != nil && *ep.NodeName == node && len(ep.Addresses) > 0 {
				perFamily[i][s.AddressType]++
			}
		}
	}
	for i, counts := range perFamily {
		for _, n := range counts {
			out[i].LocalEndpoints = max(out[i].LocalEndpoints, n)
		}
	}
	return out
}
