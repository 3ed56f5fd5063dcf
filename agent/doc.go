// Package agent is the node agent (the kubelet's role): it supervises the node's containerd,
// installs skiff-cni, registers the Node and keeps its Lease, owns pod IPAM and runs the pods
// bound to the node through CRI. Subpackages hold each part; Run wires them in groups, each
// a method of nodeAgent (agent.go): infrastructure (client, kernel, cgroups, CNI,
// containerd), node (registration, Lease, BGP), datapath (pod addresses, NetworkPolicy, the
// service proxy, DNS) and workloads (pods, volumes, logs, eviction, image GC, static pods).
// host.go prepares the host (CNI files, cgroups, CPUs); health.go serves /healthz and
// /metrics from the supervisor's and the parts' state.
package agent
