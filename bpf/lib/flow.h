/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Flow events: what the programs decided about a flow, for `skiff observe` (Hubble's role).
 * Every program of a node writes into one ring buffer pinned by name (the first object
 * loaded makes it, the others reuse it), which the agent reads (dataplane/flows).
 *
 * Bounded by design: an event is written only when a flow is decided — a connection a policy
 * admits (once, when its flow is remembered), a Service frontend translated (once per
 * connection or datagram), a packet dropped — never per forwarded packet. When the ring is full
 * the event is not written and skiff_flow_lost counts it (per CPU, no contention), so a flood
 * costs the datapath one failed reservation, and the loss is visible.
 *
 * The reader is woken per batch, not per event (flow_end).
 *
 * Events are written only while skiff_flow_config[0] is non-zero: the agent turns them on
 * when it starts reading (and `make bench` turns them off to measure their cost). */
#ifndef SKIFF_FLOW_H
#define SKIFF_FLOW_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* What a flow event reports (flow_event.kind). */
#define FLOW_KIND_POLICY 1    /* a policy verdict at a pod's veth */
#define FLOW_KIND_TRANSLATE 2 /* a Service frontend translated to a backend */
#define FLOW_KIND_DROP 3      /* dropped for a reason other than policy */

/* flow_event.verdict */
#define FLOW_FORWARDED 1
#define FLOW_DROPPED 2
#define FLOW_AUDIT 3 /* forwarded, and an audit-mode policy would have dropped it */

/* flow_event.reason: why it was forwarded or dropped. */
#define FLOW_REASON_NOT_ISOLATED 1  /* no policy selects the pod in that direction */
#define FLOW_REASON_FROM_NODE 2     /* ingress from the node itself */
#define FLOW_REASON_NODE_DNS 3      /* egress to the node's cluster DNS resolver */
#define FLOW_REASON_RULE 4          /* a rule admits it (flow_event.policy names it) */
#define FLOW_REASON_POLICY 5        /* isolated, and no rule admits it */
#define FLOW_REASON_NO_ENDPOINT 6   /* a pod address this node does not police yet */
#define FLOW_REASON_NO_BACKEND 7    /* a Service frontend without endpoints */
#define FLOW_REASON_CT_FULL 8       /* the connection could not be tracked */
#define FLOW_REASON_SERVICE 9       /* a translation: frontend to backend */
/* A ClusterNetworkPolicy rule decided (flow_event.policy is its rank << 2 | action). */
#define FLOW_REASON_ADMIN_ACCEPT 10
#define FLOW_REASON_ADMIN_DENY 11
#define FLOW_REASON_BASELINE_ACCEPT 12
#define FLOW_REASON_BASELINE_DENY 13

/* One event, 88 bytes. IPv4 addresses are the first word of each address (family 4). */
struct flow_event {
	__u64 time_ns; /* bpf_ktime_get_ns (CLOCK_MONOTONIC) */
	__u32 src[4];
	__u32 dst[4];
	__u32 orig[4];   /* a translation's frontend (dst is the backend) */
	__u64 cgroup;    /* the sending socket's cgroup (socket programs), else 0 */
	__u32 policy;    /* the admitting rule's policy index + 1 (0: none), or a tier rule's value */
	__u32 peer_id;   /* the peer's identity (policy events) */
	__u16 sport;     /* ports in network order */
	__u16 dport;
	__u16 orig_port;
	__u8 family;     /* 4 or 6 */
	__u8 proto;
	__u8 kind;       /* FLOW_KIND_* */
	__u8 verdict;    /* FLOW_* */
	__u8 reason;     /* FLOW_REASON_* */
	__u8 dir;        /* policy events: 1 ingress, 2 egress; else 0 */
	__u8 tcp_flags;
	__u8 pad[3];
};

/* The layout in BTF for the Go side (bpf2go finds only types an object mentions). */
const struct flow_event *skiff_flow_event_layout __attribute__((unused));

#define FLOW_RING_BYTES (1 << 20)
/* A sixteenth of the ring: about 680 events. */
#define FLOW_WAKEUP_BYTES (FLOW_RING_BYTES / 16)

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, FLOW_RING_BYTES);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_flows SEC(".maps");

/* [0]: events on (non-zero) or off. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_flow_config SEC(".maps");

/* Events not written because the ring was full, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_flow_lost SEC(".maps");

/* flow_begin reserves an event, zeroed but for its time and kind, or returns 0 when events
 * are off or the ring is full (counted). Every event begun must be ended by flow_end. */
static __always_inline struct flow_event *flow_begin(__u8 kind, __u8 verdict, __u8 reason)
{
	__u32 k = 0;
	__u64 *on = bpf_map_lookup_elem(&skiff_flow_config, &k);
	if (!on || !*on)
		return 0;
	struct flow_event *e = bpf_ringbuf_reserve(&skiff_flows, sizeof(*e), 0);
	if (!e) {
		__u64 *lost = bpf_map_lookup_elem(&skiff_flow_lost, &k);
		if (lost)
			*lost += 1;
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->time_ns = bpf_ktime_get_ns();
	e->kind = kind;
	e->verdict = verdict;
	e->reason = reason;
	return e;
}

/* flow_end hands the event to the reader, waking it only once a batch waits: a wakeup per
 * event would cost every new flow an interrupt and a context switch (the agent reads at
 * least every 100 ms anyway, so an event is seen within that). */
static __always_inline void flow_end(struct flow_event *e)
{
	__u64 waiting = bpf_ringbuf_query(&skiff_flows, BPF_RB_AVAIL_DATA);
	bpf_ringbuf_submit(e, waiting >= FLOW_WAKEUP_BYTES ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

/* flow_addrs4 sets an IPv4 event's addresses, ports and protocol. */
static __always_inline void flow_addrs4(struct flow_event *e, __u32 src, __u32 dst, __u16 sport, __u16 dport, __u8 proto)
{
	e->family = 4;
	e->src[0] = src;
	e->dst[0] = dst;
	e->sport = sport;
	e->dport = dport;
	e->proto = proto;
}

/* flow_addrs6 sets an IPv6 event's addresses, ports and protocol. */
static __always_inline void flow_addrs6(struct flow_event *e, const __u32 *src, const __u32 *dst, __u16 sport, __u16 dport,
					__u8 proto)
{
	e->family = 6;
	__builtin_memcpy(e->src, src, 16);
	__builtin_memcpy(e->dst, dst, 16);
	e->sport = sport;
	e->dport = dport;
	e->proto = proto;
}

#endif
