// Package flows turns the flow events the eBPF programs write (bpf/lib/flow.h) into flows a
// person reads, as Hubble does for Cilium: each event decoded, named (pods, Services,
// policies), kept in a bounded ring of the node's recent flows, followed live, filtered and
// counted as metrics. The agent runs an Observer under its supervisor and serves it at
// /flows on its API, which `skiff observe` reads through the API server's node proxy.
//
// Decoding, naming and filtering take inputs and return values, with no I/O, so they are
// tested without a kernel; the Observer is the part that reads the ring buffer.
package flows
