// Package bgp is the node agent's routing: an embedded GoBGP speaker that advertises the
// node's pod CIDR and learns the other nodes' blocks, between nodes (a full iBGP mesh by
// default) and with top-of-rack routers, and a kernel-route reconciler that installs what was
// learned with netlink as `proto bgp` routes, ECMP where several paths tie.
//
// The pieces:
//   - config/ resolves a node's BGP configuration (ConfigMap kube-system/skiff-bgp, node
//     annotations, agent flags) without I/O;
//   - routes.go decides, without I/O, which kernel routes the learned paths call for;
//   - kernel.go applies that decision to the kernel's main table;
//   - speaker.go runs GoBGP and keeps its peers and advertisement in line with the config;
//   - bfd/ is BFD (RFC 5880), which GoBGP lacks: run.go resets a session whose peer BFD
//     declares lost, unless the peer is only restarting (graceful restart).
package bgp

// GoBGP is built from third_party/gobgp, upstream's release with three edits (hack/gobgpfork).
//go:generate go run ../hack/gobgpfork -out ../third_party/gobgp
