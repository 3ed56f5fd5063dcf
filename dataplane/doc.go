// Package dataplane is skiff's kube-proxy replacement: Services and EndpointSlices compiled
// into eBPF maps that the programs in bpf/ read. This first part balances at the socket: a
// program on the node's pod cgroup rewrites connect() and sendmsg() to a ClusterIP into a
// connection to one backend (random, or sticky per client with sessionAffinity ClientIP), so
// no packet carries the ClusterIP, and none needs NAT or conntrack; getpeername() and
// recvmsg() show the application the address it asked for.
//
// The pieces: compile.go turns API objects into frontends and backends without I/O;
// maps.go encodes them for the kernel and applies the difference to the pinned maps;
// loader.go loads, pins and attaches the programs (links are pinned too, and a restarted
// agent swaps its programs in with the links' Update, so nothing is ever detached);
// proxy.go watches the API. Pins live under /sys/fs/bpf/skiff/<node>.
package dataplane
