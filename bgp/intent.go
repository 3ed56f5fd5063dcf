package bgp

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/skiff-sh/skiff/bgp/config"
	"github.com/skiff-sh/skiff/internal/podcidr"
)

// Intent is what a node's speaker is to do, given its resolved configuration and the
// cluster: the sessions it keeps and the prefixes it advertises. The speaker's loop applies
// it; the scenario tests (testdata/scenarios) render it.
type Intent struct {
	// Peers are the configured peers that apply to the node, then the node mesh; of each
	// mesh pair, the node with the lower address waits for the other to dial.
	Peers []config.Peer
	// Advertised are the node's pod CIDRs (none until it has them), then its LoadBalancer
	// addresses (ServicePrefixes); IPv6 ones only when the node has an IPv6 address to be
	// their next hop.
	Advertised []netip.Prefix
}

// Want computes a node's Intent. Pure.
func Want(c config.Config, self *corev1.Node, all []*corev1.Node, services []*corev1.Service, slices []*discoveryv1.EndpointSlice) Intent {
	mesh := config.MeshPeers(self, all, c)
	for i := range mesh {
		local := c.IPv4
		if mesh[i].Address.Is6() {
			local = c.IPv6
		}
		mesh[i].Passive = local.Less(mesh[i].Address)
	}
	var blocks []netip.Prefix
	for _, s := range podcidr.All(self) {
		if p, err := netip.ParsePrefix(s); err == nil && (p.Addr().Is4() || c.IPv6.IsValid()) {
			blocks = append(blocks, p.Masked())
		}
	}
	advertised := blocks
	for _, p := range ServicePrefixes(self.Name, services, slices) {
		if p.Addr().Is4() || c.IPv6.IsValid() {
			advertised = append(advertised, p)
		}
	}
	return Intent{
		Peers:      append(append([]config.Peer(nil), c.Peers...), mesh...),
		Advertised: advertised,
	}
}
