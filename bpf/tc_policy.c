// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* NetworkPolicy, per packet, on the host side of each pod's veth: tcx ingress sees what the
 * pod sends (its egress), tcx egress what it receives (its ingress). The maps are what
 * dataplane/policy compiles; see that package for the model.
 *
 * A packet passes when it belongs to a connection already admitted (either direction: replies
 * always pass, and a connection admitted once stays admitted, as Calico keeps them), when it
 * comes from the node itself to its pod, when its pod is not isolated in that direction, or
 * when a rule admits it. Fail closed: a pod whose endpoint entry is missing gets nothing —
 * the agent writes the entry before it attaches the program, before the pod's first packet.
 *
 * IPv6 is decided the same way with maps of its own (endpoints, identities, ipBlock prefixes,
 * rules and flows keyed by 16-byte addresses; identities are shared, so a dual-stack pod is
 * one peer in both families). Neighbour discovery and link-scope multicast always pass, and a
 * link-local peer is the node (only the host side of the veth shares the link with the pod). Extension headers are
 * not walked: a packet with one matches rules for every protocol only.
 *
 * Policies in audit mode (policy.skiff.sh/mode: audit) isolate nothing: their rules sit beside
 * the others under dir | POL_AUDIT, and a new flow of a pod that only they select is checked
 * against them and reported as FLOW_AUDIT when they would have dropped it. Every new flow
 * admitted and every packet dropped is a flow event (flow.h). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/icmpv6.h>
#include <linux/in.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <linux/pkt_cls.h>
#include "flow.h"

/* tcx verdicts (linux/bpf.h of 6.6; Debian 12's headers predate them): next runs the
 * programs after this one (the NodePort ones on an uplink; none here today). */
#ifndef TCX_NEXT
#define TCX_NEXT -1
#define TCX_DROP 2
#endif

#define POL_INGRESS 1
#define POL_EGRESS 2

#define POL_ISOLATED_INGRESS 1
#define POL_ISOLATED_EGRESS 2
/* Selected in that direction by policies in audit mode (policy.skiff.sh/mode: audit) alone:
 * they are evaluated, and what they would drop is reported as FLOW_AUDIT, not dropped. */
#define POL_AUDIT_INGRESS 4
#define POL_AUDIT_EGRESS 8
/* Added to a rule's dir: the rule is an audit-mode policy's (evaluated only for reporting). */
#define POL_AUDIT 4
/* Added to a rule's dir: a ClusterNetworkPolicy rule of the Admin or the Baseline tier, whose
 * value is rank << 2 | action (CNP_*): the lowest value is the first rule in evaluation
 * order, and dataplane/policy gives each entry the best of those its port prefix is covered
 * by. The endpoint's POL_ADMIN_* and POL_BASELINE_* bits say a tier has rules for it. */
#define POL_ADMIN 8
#define POL_BASELINE 16
#define POL_ADMIN_INGRESS 16
#define POL_ADMIN_EGRESS 32
#define POL_BASELINE_INGRESS 64
#define POL_BASELINE_EGRESS 128
#define CNP_ACCEPT 1
#define CNP_DENY 2
#define CNP_PASS 3

#define POL_ID_ANY 0
#define POL_ID_HOST 1
#define POL_ID_WORLD 2

#define POL_MAX_ENDPOINTS 65536
#define POL_MAX_RULES 1048576
#define POL_MAX_CIDRS 65536
#define POL_MAX_FLOWS 262144
/* A remembered flow idle this long is decided again (the kernel's UDP stream timeout). */
#define POL_FLOW_IDLE_NS (120ULL * 1000000000ULL)
#define TCP_FLAG_SYN 0x02
#define TCP_FLAG_ACK 0x10

/* A pod this node polices, by its address. */
struct pol_endpoint {
	__u32 flags; /* POL_ISOLATED_* */
};

/* A rule: endpoint admits, in dir, peer on proto at the ports of the prefix. Everything but
 * the port is always matched in full: prefixlen = 80 + the port prefix's bits. */
struct pol_rule_key {
	__u32 prefixlen;
	__u32 endpoint; /* the pod's address */
	__u32 peer;     /* identity, POL_ID_ANY for everyone */
	__u8 dir;       /* POL_INGRESS, POL_EGRESS */
	__u8 proto;     /* 0: every protocol */
	__be16 port;    /* network order, so its high bits come first */
};

/* The policy that admits (an index the agent names). */
struct pol_rule_value {
	__u32 policy;
};

struct pol_cidr_key {
	__u32 prefixlen;
	__u32 addr;
};

/* An admitted connection, keyed as the pod's side sees it. */
struct pol_flow {
	__u32 pod, peer;
	__u16 pod_port, peer_port;
	__u8 proto;
	__u8 pad[3];
};

/* Drops by endpoint and direction (what skiff exports as metrics). */
struct pol_drop_key {
	__u32 endpoint;
	__u32 dir;
};

/* Names for inspection (`skiff bpf policy`, `skiff policy trace`), never read by the
 * programs: a policy's by its index, an identity's labels, an endpoint's pod. */
#define POL_NAME_POLICY 1
#define POL_NAME_IDENTITY 2
#define POL_NAME_ENDPOINT 3
struct pol_name_key {
	__u32 kind;
	__u32 id;
};
struct pol_name {
	char name[256];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, POL_MAX_ENDPOINTS * 4);
	__type(key, struct pol_name_key);
	__type(value, struct pol_name);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_pol_names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, POL_MAX_ENDPOINTS);
	__type(key, __u32);
	__type(value, struct pol_endpoint);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_pol_endpoints SEC(".maps");

/* A pod's IPv6 address, the key of skiff_pol_endpoints6. */
struct pol_addr6 {
	__u32 addr[4];
};

/* The pods this node polices, by their IPv6 addresses (a dual-stack pod's second). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, POL_MAX_ENDPOINTS);
	__type(key, struct pol_addr6);
	__type(value, struct pol_endpoint);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_pol_endpoints6 SEC(".maps");

/* Pod addresses (and this node's own, as POL_ID_HOST) to identities. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, POL_MAX_ENDPOINTS * 4);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_pol_identities SEC(".maps");

/* ipBlock prefixes to their CIDR identities. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, POL_MAX_CIDRS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct pol_cidr_key);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_pol_cidrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, POL_MAX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct pol_rule_key);
	__type(value, struct pol_rule_value);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_pol_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, POL_MAX_FLOWS);
	__type(key, struct pol_flow);
	__type(value, __u64); /* last seen, ns */
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_pol_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, POL_MAX_ENDPOINTS * 2);
	__type(key, struct pol_drop_key);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_pol_drops SEC(".maps");

struct pol_cidr6_key {
	__u32 prefixlen;
	__u32 addr[4];
};

/* pol_rule_key with the pod's IPv6 address: prefixlen = 176 + the port prefix's bits. */
struct pol_rule6_key {
	__u32 prefixlen;
	__u32 endpoint[4];
	__u32 peer;
	__u8 dir;
	__u8 proto;
	__be16 port;
};

struct pol_flow6 {
	__u32 pod[4], peer[4];
	__u16 pod_port, peer_port;
	__u8 proto;
	__u8 pad[3];
};

struct pol_drop6_key {
	__u32 endpoint[4];
	__u32 dir;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, POL_MAX_ENDPOINTS * 4);
	__type(key, struct pol_addr6);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_pol_identities6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, POL_MAX_CIDRS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct pol_cidr6_key);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_pol_cidrs6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, POL_MAX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct pol_rule6_key);
	__type(value, struct pol_rule_value);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_pol_rules6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, POL_MAX_FLOWS);
	__type(key, struct pol_flow6);
	__type(value, __u64); /* last seen, ns */
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_pol_flows6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, POL_MAX_ENDPOINTS * 2);
	__type(key, struct pol_drop6_key);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_pol_drops6 SEC(".maps");

/* admitted is the index + 1 of the policy of a rule admitting peer (0: none). */
static __always_inline __u32 admitted(__u32 ep, __u32 peer, __u8 dir, __u8 proto, __be16 port)
{
	struct pol_rule_key k = {.prefixlen = 96, .endpoint = ep, .peer = peer, .dir = dir, .proto = proto, .port = port};
	struct pol_rule_value *v = bpf_map_lookup_elem(&skiff_pol_rules, &k);
	if (v)
		return v->policy + 1;
	k.proto = 0;
	k.port = 0;
	k.prefixlen = 80;
	v = bpf_map_lookup_elem(&skiff_pol_rules, &k);
	return v ? v->policy + 1 : 0;
}

/* rule is the index + 1 of the policy of a rule admitting a peer with identity peer_id at
 * address peer (its CIDR identity too), 0 when none does. */
static __always_inline __u32 rule(__u32 ep, __u32 peer, __u32 peer_id, __u8 dir, __u8 proto, __be16 port)
{
	__u32 pol = admitted(ep, POL_ID_ANY, dir, proto, port);
	if (!pol)
		pol = admitted(ep, peer_id, dir, proto, port);
	if (!pol) {
		struct pol_cidr_key ck = {.prefixlen = 32, .addr = peer};
		__u32 *cid = bpf_map_lookup_elem(&skiff_pol_cidrs, &ck);
		if (cid)
			pol = admitted(ep, *cid, dir, proto, port);
	}
	return pol;
}

/* tier_value is the rules map's value for a tier entry (0: none), the lower of the
 * protocol's and any protocol's. */
static __always_inline __u32 tier_value(__u32 ep, __u32 peer, __u8 dir, __u8 proto, __be16 port)
{
	struct pol_rule_key k = {.prefixlen = 96, .endpoint = ep, .peer = peer, .dir = dir, .proto = proto, .port = port};
	struct pol_rule_value *v = bpf_map_lookup_elem(&skiff_pol_rules, &k);
	__u32 best = v ? v->policy : 0;
	k.proto = 0;
	k.port = 0;
	k.prefixlen = 80;
	v = bpf_map_lookup_elem(&skiff_pol_rules, &k);
	if (v && (!best || v->policy < best))
		best = v->policy;
	return best;
}

static __always_inline __u32 lower(__u32 a, __u32 b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	return a < b ? a : b;
}

/* tier is the first rule of a tier (dir carries it) matching the peer as anyone, by its
 * identity and by its CIDR identity: rank << 2 | action, or 0. */
static __always_inline __u32 tier(__u32 ep, __u32 peer, __u32 peer_id, __u8 dir, __u8 proto, __be16 port)
{
	__u32 best = lower(tier_value(ep, POL_ID_ANY, dir, proto, port), tier_value(ep, peer_id, dir, proto, port));
	struct pol_cidr_key ck = {.prefixlen = 32, .addr = peer};
	__u32 *cid = bpf_map_lookup_elem(&skiff_pol_cidrs, &ck);
	if (cid)
		best = lower(best, tier_value(ep, *cid, dir, proto, port));
	return best;
}

static __always_inline void count_drop(__u32 ep, __u32 dir)
{
	struct pol_drop_key k = {.endpoint = ep, .dir = dir};
	__u64 *n = bpf_map_lookup_elem(&skiff_pol_drops, &k);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return;
	}
	__u64 one = 1;
	bpf_map_update_elem(&skiff_pol_drops, &k, &one, BPF_NOEXIST);
}

static __always_inline __u32 admitted6(const __u32 *ep, __u32 peer, __u8 dir, __u8 proto, __be16 port)
{
	struct pol_rule6_key k = {.prefixlen = 192, .peer = peer, .dir = dir, .proto = proto, .port = port};
	__builtin_memcpy(k.endpoint, ep, 16);
	struct pol_rule_value *v = bpf_map_lookup_elem(&skiff_pol_rules6, &k);
	if (v)
		return v->policy + 1;
	k.proto = 0;
	k.port = 0;
	k.prefixlen = 176;
	v = bpf_map_lookup_elem(&skiff_pol_rules6, &k);
	return v ? v->policy + 1 : 0;
}

static __always_inline __u32 rule6(const __u32 *ep, const __u32 *peer, __u32 peer_id, __u8 dir, __u8 proto, __be16 port)
{
	__u32 pol = admitted6(ep, POL_ID_ANY, dir, proto, port);
	if (!pol)
		pol = admitted6(ep, peer_id, dir, proto, port);
	if (!pol) {
		struct pol_cidr6_key ck = {.prefixlen = 128};
		__builtin_memcpy(ck.addr, peer, 16);
		__u32 *cid = bpf_map_lookup_elem(&skiff_pol_cidrs6, &ck);
		if (cid)
			pol = admitted6(ep, *cid, dir, proto, port);
	}
	return pol;
}

static __always_inline __u32 tier_value6(const __u32 *ep, __u32 peer, __u8 dir, __u8 proto, __be16 port)
{
	struct pol_rule6_key k = {.prefixlen = 192, .peer = peer, .dir = dir, .proto = proto, .port = port};
	__builtin_memcpy(k.endpoint, ep, 16);
	struct pol_rule_value *v = bpf_map_lookup_elem(&skiff_pol_rules6, &k);
	__u32 best = v ? v->policy : 0;
	k.proto = 0;
	k.port = 0;
	k.prefixlen = 176;
	v = bpf_map_lookup_elem(&skiff_pol_rules6, &k);
	if (v && (!best || v->policy < best))
		best = v->policy;
	return best;
}

static __always_inline __u32 tier6(const __u32 *ep, const __u32 *peer, __u32 peer_id, __u8 dir, __u8 proto, __be16 port)
{
	__u32 best = lower(tier_value6(ep, POL_ID_ANY, dir, proto, port), tier_value6(ep, peer_id, dir, proto, port));
	struct pol_cidr6_key ck = {.prefixlen = 128};
	__builtin_memcpy(ck.addr, peer, 16);
	__u32 *cid = bpf_map_lookup_elem(&skiff_pol_cidrs6, &ck);
	if (cid)
		best = lower(best, tier_value6(ep, *cid, dir, proto, port));
	return best;
}

static __always_inline void count_drop6(const __u32 *ep, __u32 dir)
{
	struct pol_drop6_key k = {.dir = dir};
	__builtin_memcpy(k.endpoint, ep, 16);
	__u64 *n = bpf_map_lookup_elem(&skiff_pol_drops6, &k);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return;
	}
	__u64 one = 1;
	bpf_map_update_elem(&skiff_pol_drops6, &k, &one, BPF_NOEXIST);
}

/* exempt is the reason a pod's traffic passes whatever its policies say (0: none). The node
 * reaches its pods (probes, the agent); its pods reach the node's own cluster DNS resolver
 * (port 53, UDP and TCP), which kube-dns's ClusterIP leads to: resolving names is part of the
 * node, as a kube-dns pod is admitted by policies users write. */
static __always_inline __u8 exempt(__u8 dir, __u32 peer_id, __u8 proto, __be16 port)
{
	if (dir == POL_INGRESS && peer_id == POL_ID_HOST)
		return FLOW_REASON_FROM_NODE;
	if (dir == POL_EGRESS && peer_id == POL_ID_HOST && port == bpf_htons(53) && (proto == IPPROTO_UDP || proto == IPPROTO_TCP))
		return FLOW_REASON_NODE_DNS;
	return 0;
}

/* admin_flag and baseline_flag are an endpoint's bits for dir's tiers. */
static __always_inline __u32 admin_flag(__u8 dir)
{
	return dir == POL_EGRESS ? POL_ADMIN_EGRESS : POL_ADMIN_INGRESS;
}

static __always_inline __u32 baseline_flag(__u8 dir)
{
	return dir == POL_EGRESS ? POL_BASELINE_EGRESS : POL_BASELINE_INGRESS;
}

/* tier_reason is a tier rule's verdict: accepted or denied (a Pass is no verdict). */
static __always_inline __u8 tier_reason(__u32 t, __u8 accept, __u8 deny)
{
	if (!t || (t & 3) == CNP_PASS)
		return 0;
	return (t & 3) == CNP_ACCEPT ? accept : deny;
}

/* dropping says whether a reason drops the packet. */
static __always_inline int dropping(__u8 reason)
{
	return reason == FLOW_REASON_POLICY || reason == FLOW_REASON_ADMIN_DENY || reason == FLOW_REASON_BASELINE_DENY;
}

/* audit_flags are an endpoint's POL_AUDIT_* bit for dir. */
static __always_inline __u32 audit_flag(__u8 dir)
{
	return dir == POL_EGRESS ? POL_AUDIT_EGRESS : POL_AUDIT_INGRESS;
}

/* flow_policy reports a policy verdict; ep and peer are IPv4 addresses (family 4) or point to
 * IPv6 ones (family 6). Addresses and ports are as on the wire. */
static __always_inline void flow_policy(__u8 family, const __u32 *ep, const __u32 *peer, __u8 dir, __u16 sport, __u16 dport,
					__u8 proto, __u8 tcp_flags, __u8 verdict, __u8 reason, __u32 pol, __u32 peer_id)
{
	struct flow_event *e = flow_begin(FLOW_KIND_POLICY, verdict, reason);
	if (!e)
		return;
	const __u32 *src = dir == POL_EGRESS ? ep : peer;
	const __u32 *dst = dir == POL_EGRESS ? peer : ep;
	if (family == 4)
		flow_addrs4(e, src[0], dst[0], sport, dport, proto);
	else
		flow_addrs6(e, src, dst, sport, dport, proto);
	e->dir = dir;
	e->policy = pol;
	e->peer_id = peer_id;
	e->tcp_flags = tcp_flags;
	flow_end(e);
}

/* verdict6 is verdict for an IPv6 packet: neighbour discovery passes (router and neighbour
 * solicitations and advertisements, redirects: ICMPv6 133-137), the rest as IPv4's. */
static __always_inline int verdict6(struct ipv6hdr *ip6, void *end, __u8 dir)
{
	if ((void *)(ip6 + 1) > end)
		return TC_ACT_SHOT;
	__u8 proto = ip6->nexthdr;
	void *l4 = (void *)(ip6 + 1);
	if (proto == IPPROTO_ICMPV6) {
		struct icmp6hdr *icmp = l4;
		if ((void *)(icmp + 1) > end)
			return TC_ACT_SHOT;
		if (icmp->icmp6_type >= 133 && icmp->icmp6_type <= 137)
			return TC_ACT_OK;
	}
	/* Link-scope multicast (ff02::/16: MLD reports, duplicate address detection, router
	 * solicitations) never leaves the veth: it is between the pod and its node. */
	if ((ip6->daddr.in6_u.u6_addr32[0] & bpf_htonl(0xffff0000)) == bpf_htonl(0xff020000))
		return TC_ACT_OK;
	struct pol_addr6 ep, peer;
	__builtin_memcpy(&ep, dir == POL_EGRESS ? &ip6->saddr : &ip6->daddr, sizeof(ep));
	__builtin_memcpy(&peer, dir == POL_EGRESS ? &ip6->daddr : &ip6->saddr, sizeof(peer));
	struct pol_endpoint *e = bpf_map_lookup_elem(&skiff_pol_endpoints6, &ep);
	if (!e) {
		count_drop6(ep.addr, dir);
		flow_policy(6, ep.addr, peer.addr, dir, 0, 0, proto, 0, FLOW_DROPPED, FLOW_REASON_NO_ENDPOINT, 0, 0);
		return TC_ACT_SHOT; /* an unknown endpoint: fail closed */
	}
	__u16 sport = 0, dport = 0;
	if (proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_SCTP) {
		__be16 *ports = l4;
		if ((void *)(ports + 2) > end)
			return TC_ACT_SHOT;
		sport = ports[0];
		dport = ports[1];
	}
	int opens = 0;
	__u8 tcp_flags = 0;
	if (proto == IPPROTO_TCP) {
		__u8 *flags = (__u8 *)l4 + 13;
		if ((void *)(flags + 1) > end)
			return TC_ACT_SHOT;
		tcp_flags = *flags;
		opens = (tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN;
	}
	struct pol_flow6 f = {.proto = proto};
	__builtin_memcpy(f.pod, ep.addr, 16);
	__builtin_memcpy(f.peer, peer.addr, 16);
	f.pod_port = dir == POL_EGRESS ? sport : dport;
	f.peer_port = dir == POL_EGRESS ? dport : sport;
	__u64 now = bpf_ktime_get_ns();
	__u64 *seen = bpf_map_lookup_elem(&skiff_pol_flows6, &f);
	if (seen && !opens && now - *seen < POL_FLOW_IDLE_NS) {
		*seen = now;
		return TC_ACT_OK;
	}
	int isolated = e->flags & (dir == POL_EGRESS ? POL_ISOLATED_EGRESS : POL_ISOLATED_INGRESS);
	__u32 peer_id = POL_ID_WORLD;
	if ((peer.addr[0] & bpf_htonl(0xffc00000)) == bpf_htonl(0xfe800000)) {
		peer_id = POL_ID_HOST; /* fe80::/10: the host side of the veth */
	} else {
		__u32 *pid = bpf_map_lookup_elem(&skiff_pol_identities6, &peer);
		if (pid)
			peer_id = *pid;
	}
	__be16 port = dport;
	/* Decided in policy.Decide's order: the node's exemptions, the Admin tier, the
	 * NetworkPolicies isolating the pod, the Baseline tier, audit-mode policies. */
	__u8 reason = 0, verdict = FLOW_FORWARDED, ex = exempt(dir, peer_id, proto, port);
	__u32 pol = 0;
	if ((isolated || (e->flags & (admin_flag(dir) | baseline_flag(dir)))) && ex) {
		reason = ex;
	} else {
		if (e->flags & admin_flag(dir)) {
			pol = tier6(ep.addr, peer.addr, peer_id, dir | POL_ADMIN, proto, port);
			reason = tier_reason(pol, FLOW_REASON_ADMIN_ACCEPT, FLOW_REASON_ADMIN_DENY);
		}
		if (!reason && isolated) {
			pol = rule6(ep.addr, peer.addr, peer_id, dir, proto, port);
			reason = pol ? FLOW_REASON_RULE : FLOW_REASON_POLICY;
		}
		if (!reason && (e->flags & baseline_flag(dir))) {
			pol = tier6(ep.addr, peer.addr, peer_id, dir | POL_BASELINE, proto, port);
			reason = tier_reason(pol, FLOW_REASON_BASELINE_ACCEPT, FLOW_REASON_BASELINE_DENY);
		}
		if (!reason) {
			reason = FLOW_REASON_NOT_ISOLATED;
			/* Only audit-mode policies select the pod this way: report what they would do. */
			if (!ex && (e->flags & audit_flag(dir)) && !rule6(ep.addr, peer.addr, peer_id, dir | POL_AUDIT, proto, port))
				verdict = FLOW_AUDIT;
		}
	}
	if (dropping(reason)) {
		if (seen)
			bpf_map_delete_elem(&skiff_pol_flows6, &f);
		count_drop6(ep.addr, dir);
		flow_policy(6, ep.addr, peer.addr, dir, sport, dport, proto, tcp_flags, FLOW_DROPPED, reason, pol, peer_id);
		return TC_ACT_SHOT;
	}
	bpf_map_update_elem(&skiff_pol_flows6, &f, &now, BPF_ANY);
	flow_policy(6, ep.addr, peer.addr, dir, sport, dport, proto, tcp_flags, verdict, reason, pol, peer_id);
	return TC_ACT_OK;
}

/* verdict decides a packet at the endpoint ep (the pod's address) with the peer's address
 * and ports as seen from the pod. */
static __always_inline int verdict(struct __sk_buff *skb, __u8 dir)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return TC_ACT_SHOT;
	if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		return verdict6((void *)(eth + 1), end, dir);
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return eth->h_proto == bpf_htons(ETH_P_ARP) ? TC_ACT_OK : TC_ACT_SHOT;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end)
		return TC_ACT_SHOT;
	__u32 ep = dir == POL_EGRESS ? ip->saddr : ip->daddr;
	__u32 peer = dir == POL_EGRESS ? ip->daddr : ip->saddr;
	struct pol_endpoint *e = bpf_map_lookup_elem(&skiff_pol_endpoints, &ep);
	if (!e) {
		count_drop(ep, dir);
		flow_policy(4, &ep, &peer, dir, 0, 0, ip->protocol, 0, FLOW_DROPPED, FLOW_REASON_NO_ENDPOINT, 0, 0);
		return TC_ACT_SHOT; /* an unknown endpoint: fail closed */
	}
	__u16 sport = 0, dport = 0; /* ports as on the wire */
	__u8 proto = ip->protocol;
	int first_fragment = !(ip->frag_off & bpf_htons(0x1fff));
	void *l4 = (void *)ip + ip->ihl * 4;
	if (first_fragment && (proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_SCTP)) {
		/* TCP, UDP and SCTP all begin with source and destination ports. */
		__be16 *ports = l4;
		if ((void *)(ports + 2) > end)
			return TC_ACT_SHOT;
		sport = ports[0];
		dport = ports[1];
	}
	/* A TCP SYN without ACK opens a new connection: it meets the policy of now even when
	 * a remembered flow has its addresses and ports (a client reuses source ports, and a
	 * policy revoked since must refuse the new connection; the established one is kept). */
	int opens = 0;
	__u8 tcp_flags = 0;
	if (first_fragment && proto == IPPROTO_TCP) {
		__u8 *flags = (__u8 *)l4 + 13;
		if ((void *)(flags + 1) > end)
			return TC_ACT_SHOT;
		tcp_flags = *flags;
		opens = (tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN;
	}
	struct pol_flow f = {.pod = ep, .peer = peer, .proto = proto};
	f.pod_port = dir == POL_EGRESS ? sport : dport;
	f.peer_port = dir == POL_EGRESS ? dport : sport;
	__u64 now = bpf_ktime_get_ns();
	__u64 *seen = bpf_map_lookup_elem(&skiff_pol_flows, &f);
	/* Without a SYN to say so, a flow idle longer than POL_FLOW_IDLE_NS (UDP, ICMP; a TCP
	 * connection silent that long) is decided again, as a new one. */
	if (seen && !opens && now - *seen < POL_FLOW_IDLE_NS) {
		*seen = now;
		return TC_ACT_OK;
	}
	int isolated = e->flags & (dir == POL_EGRESS ? POL_ISOLATED_EGRESS : POL_ISOLATED_INGRESS);
	__u32 *pid = bpf_map_lookup_elem(&skiff_pol_identities, &peer);
	__u32 peer_id = pid ? *pid : POL_ID_WORLD;
	/* The rule's port is the destination's: the peer's for egress, the pod's for ingress —
	 * the packet's destination port either way (a reply never gets here: its flow passed). */
	__be16 port = dport;
	/* Decided in policy.Decide's order: the node's exemptions, the Admin tier, the
	 * NetworkPolicies isolating the pod, the Baseline tier, audit-mode policies. */
	__u8 reason = 0, verdict = FLOW_FORWARDED, ex = exempt(dir, peer_id, proto, port);
	__u32 pol = 0;
	if ((isolated || (e->flags & (admin_flag(dir) | baseline_flag(dir)))) && ex) {
		reason = ex;
	} else {
		if (e->flags & admin_flag(dir)) {
			pol = tier(ep, peer, peer_id, dir | POL_ADMIN, proto, port);
			reason = tier_reason(pol, FLOW_REASON_ADMIN_ACCEPT, FLOW_REASON_ADMIN_DENY);
		}
		if (!reason && isolated) {
			pol = rule(ep, peer, peer_id, dir, proto, port);
			reason = pol ? FLOW_REASON_RULE : FLOW_REASON_POLICY;
		}
		if (!reason && (e->flags & baseline_flag(dir))) {
			pol = tier(ep, peer, peer_id, dir | POL_BASELINE, proto, port);
			reason = tier_reason(pol, FLOW_REASON_BASELINE_ACCEPT, FLOW_REASON_BASELINE_DENY);
		}
		if (!reason) {
			reason = FLOW_REASON_NOT_ISOLATED;
			/* Only audit-mode policies select the pod this way: report what they would do. */
			if (!ex && (e->flags & audit_flag(dir)) && !rule(ep, peer, peer_id, dir | POL_AUDIT, proto, port))
				verdict = FLOW_AUDIT;
		}
	}
	if (dropping(reason)) {
		if (seen)
			bpf_map_delete_elem(&skiff_pol_flows, &f); /* what it remembered is revoked */
		count_drop(ep, dir);
		flow_policy(4, &ep, &peer, dir, sport, dport, proto, tcp_flags, FLOW_DROPPED, reason, pol, peer_id);
		return TC_ACT_SHOT;
	}
	/* Remember the connection for its replies and its later packets. ICMP has no ports:
	 * its flow is the address pair. */
	bpf_map_update_elem(&skiff_pol_flows, &f, &now, BPF_ANY);
	flow_policy(4, &ep, &peer, dir, sport, dport, proto, tcp_flags, verdict, reason, pol, peer_id);
	return TC_ACT_OK;
}

/* What the pod sends arrives at the host side of its veth: the pod's egress. */
SEC("tcx/ingress")
int skiff_policy_from_pod(struct __sk_buff *skb)
{
	return verdict(skb, POL_EGRESS) == TC_ACT_OK ? TCX_NEXT : TCX_DROP;
}

/* What the pod receives leaves through the host side of its veth: the pod's ingress. */
SEC("tcx/egress")
int skiff_policy_to_pod(struct __sk_buff *skb)
{
	return verdict(skb, POL_INGRESS) == TC_ACT_OK ? TCX_NEXT : TCX_DROP;
}

char __license[] SEC("license") = "Dual BSD/GPL";
