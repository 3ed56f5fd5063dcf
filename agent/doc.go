// Package agent is the node agent (the kubelet's role): it supervises the node's containerd,
// installs skiff-cni, registers the Node and keeps its Lease, owns pod IPAM and runs the pods
// bound to the node through CRI. Subpackages hold each part; Run wires them.
package agent
