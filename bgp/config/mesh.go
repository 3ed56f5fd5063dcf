package config

import (
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// MeshPeers lists the node-mesh sessions of self: when cfg.NodeMesh, one per other node
// that has an InternalIP (IPv4 preferred, IPv6 on an IPv6-only node), sorted by address;
// none otherwise. A peer's AS
// is that node's bgp.skiff.sh/asn annotation, else cfg.ClusterASN (cfg.ASN when zero):
// iBGP when it equals cfg.ASN, eBGP when it does not.
//
// Skipped are self (by name, or any node at one of self's addresses, cfg.IPv4 or cfg.IPv6),
// nodes being deleted, nodes with an invalid ASN annotation (their own agent refuses to
// start BGP, so no session could come up), nodes at the address of one of cfg.Peers (the
// explicit peer wins) and, of several nodes claiming one address, all but the first by
// name. Timers are the defaults (90s hold, 30s keepalive) and there is no password.
func MeshPeers(self *corev1.Node, nodes []*corev1.Node, cfg Config) []Peer {
	if !cfg.NodeMesh {
		return nil
	}
	skip := nodeAddrs(self)
	for _, a := range []netip.Addr{cfg.IPv4, cfg.IPv6} {
		if a.IsValid() {
			skip[a] = true
		}
	}
	for _, p := range cfg.Peers {
		skip[p.Address] = true
	}
	defaultASN := cfg.ClusterASN
	if defaultASN == 0 {
		defaultASN = cfg.ASN
	}
	type candidate struct {
		peer Peer
		node string
	}
	var cands []candidate
	for _, n := range nodes {
		if n == nil || n.DeletionTimestamp != nil || (self != nil && n.Name == self.Name) {
			continue
		}
		addr, err := sessionAddr(n)
		if err != nil || skip[addr] {
			continue
		}
		if addr.Is4() && !cfg.IPv4.IsValid() && cfg.IPv6.IsValid() {
			// An IPv6-only node meets dual-stack ones over IPv6, and IPv4-only ones not at all.
			if _, v6, _ := internalIPs(n); v6.IsValid() && !skip[v6] {
				addr = v6
			} else {
				continue
			}
		}
		asn := defaultASN
		if v, ok := n.Annotations[AnnotationASN]; ok {
			if asn, err = parseASNAnnotation(v); err != nil {
				continue
			}
		}
		if checkASN(int64(asn)) != nil {
			continue
		}
		cands = append(cands, candidate{node: n.Name, peer: Peer{
			Address:       addr,
			ASN:           asn,
			HoldTime:      DefaultHoldTime,
			KeepaliveTime: defaultKeepalive(DefaultHoldTime),
			Name:          "mesh-" + n.Name,
		}})
	}
	sort.Slice(cands, func(i, j int) bool {
		if c := cands[i].peer.Address.Compare(cands[j].peer.Address); c != 0 {
			return c < 0
		}
		return cands[i].node < cands[j].node
	})
	var peers []Peer
	for _, c := range cands {
		if len(peers) > 0 && peers[len(peers)-1].Address == c.peer.Address {
			continue
		}
		peers = append(peers, c.peer)
	}
	return peers
}
