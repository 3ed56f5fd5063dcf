// Package dataplane is the Go side of skiff's eBPF dataplane (the C is in bpf/). It holds no
// code of its own; each job is a package below it, and the arrows between them point one way:
//
//   - programs: the compiled programs and the Go types of their maps (bpf2go, generated),
//     with the encodings the kernel expects (addresses, ports, names).
//   - services: Services and EndpointSlices compiled into frontends and backends (no I/O),
//     and the Programmer that writes them into the service maps through a table interface
//     (the kernel's maps, or in-memory fakes in unit tests); capacity and Maglev.
//   - loader: loads, pins and attaches the socket and NodePort programs, reuses pinned maps
//     across restarts, swaps programs in place, and checks and repairs what it left.
//   - proxy: the agent's kube-proxy replacement, which watches the API and drives the two
//     above (plus conntrack GC and health-check node ports).
//   - policy: NetworkPolicy compiled into identities and rules (no I/O).
//   - netpol: the enforcer, which attaches the tc policy programs to pod interfaces, writes
//     policy's result into their maps and reads them back for `skiff policy` and `skiff bpf`.
//
// Pins live under /sys/fs/bpf/skiff/<node> (layout.PinDir).
package dataplane
