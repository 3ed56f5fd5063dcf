// Package podcidr reads a Node's pod CIDRs. A dual-stack cluster gives each node a block per
// family (spec.podCIDRs, either family first); the agent's pod network and the BGP speaker
// use the IPv4 one until they carry IPv6 too.
package podcidr

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// All are the node's blocks: spec.podCIDRs, or spec.podCIDR alone when a client set only it.
func All(n *corev1.Node) []string {
	if len(n.Spec.PodCIDRs) > 0 {
		return n.Spec.PodCIDRs
	}
	if n.Spec.PodCIDR != "" {
		return []string{n.Spec.PodCIDR}
	}
	return nil
}

// IPv4 is the node's IPv4 block, or "" when it has none (yet).
func IPv4(n *corev1.Node) string {
	for _, c := range All(n) {
		if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Is4() {
			return c
		}
	}
	return ""
}
