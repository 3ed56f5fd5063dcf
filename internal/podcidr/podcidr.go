// Package podcidr reads a Node's pod CIDRs. A dual-stack cluster gives each node a block per
// family (spec.podCIDRs, either family first); the agent's IPAM, the node IPAM controller and
// the BGP speaker read them all.
package podcidr

import (
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
