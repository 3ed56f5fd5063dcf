/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* skiff's service load-balancing maps, shared by every program and by the Go side
 * (dataplane/, which gets these layouts from BTF through bpf2go). Addresses and ports are in
 * network byte order, as the kernel hands them to the hooks. Maps are pinned by name under
 * the node's bpffs directory, so they outlive the agent and `bpftool map dump pinned` shows
 * them with field names. */
#ifndef SKIFF_H
#define SKIFF_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* The layout version of every map below; a change bumps it so that a newer agent can migrate
 * entries instead of dropping flows (dataplane.MapVersion mirrors it). */
#define SKIFF_MAP_VERSION 2

#define SKIFF_MAX_SERVICES 65536
#define SKIFF_MAX_BACKENDS 1048576
#define SKIFF_MAX_SOCKETS 262144

#define SVC_FLAG_AFFINITY 1 /* sessionAffinity: ClientIP */
#define SVC_FLAG_LOCAL 2    /* externalTrafficPolicy: Local: no SNAT, local backends only */
#define SVC_FLAG_MAGLEV 4   /* backends picked by Maglev consistent hashing of the flow */
/* Only the node's own network namespace has this frontend: a hostPort on 127.0.0.1, which in
 * a pod's namespace is the pod's own loopback (skiff_host_netns says which namespace). */
#define SVC_FLAG_HOST_NETNS 8

/* Entries of every Maglev lookup table (a prime). */
#define SKIFF_MAGLEV_SIZE 1021

#define BE_FLAG_LOCAL 1 /* the backend runs on this node */

/* A service frontend: ClusterIP (or another VIP) : port / protocol. */
struct svc_key {
	__u32 addr;
	__u16 port;
	__u8 proto; /* IPPROTO_TCP, IPPROTO_UDP */
	__u8 pad;
};

struct svc_value {
	__u32 id;      /* this frontend's backends are backend_key{id, 1..count} */
	__u16 count;   /* 0: no endpoints, connections are refused */
	__u8 flags;    /* SVC_FLAG_* */
	__u8 pad;
	__u32 affinity_timeout; /* seconds, with SVC_FLAG_AFFINITY */
};

struct backend_key {
	__u32 id;
	__u32 slot;
};

struct backend_value {
	__u32 addr;
	__u16 port;
	__u16 flags; /* BE_FLAG_* */
};

/* What a socket was really connected to, for getpeername and recvmsg. */
struct sock_nat {
	__u32 svc_addr;
	__u16 svc_port;
	__u16 pad;
	__u32 be_addr;
	__u16 be_port;
	__u16 pad2;
};

/* IPv6 frontends and backends are the same Services in maps of their own, as Cilium keeps
 * lb6_* beside lb4_*: IPv4's layout, and the entries an older agent pinned, stay as they are.
 * A frontend's id comes from the one id space of both families, so the backend slots' keys,
 * names, Maglev tables and affinity are shared by id. An address is its 16 network-order bytes
 * as four words, as the hooks hand them over (bpf_sock_addr.user_ip6). */
struct svc6_key {
	__u32 addr[4];
	__u16 port;
	__u8 proto;
	__u8 pad;
};

struct backend6_value {
	__u32 addr[4];
	__u16 port;
	__u16 flags; /* BE_FLAG_* */
};

struct sock_nat6 {
	__u32 svc_addr[4];
	__u32 be_addr[4];
	__u16 svc_port;
	__u16 be_port;
	__u32 pad;
};

/* ClientIP affinity: a client sticks to a slot. A pod is known by its network namespace
 * cookie (socket hooks), a client outside by its address with AFFINITY_BY_ADDR set (NodePort;
 * cookies count up from 1 and never reach that bit). */
#define AFFINITY_BY_ADDR (1ULL << 63)
struct affinity_key {
	__u64 client;
	__u32 id;
	__u32 pad;
};

struct affinity_value {
	__u64 last_ns;
	__u32 slot;
	__u32 backend; /* backend_tag of the backend the slot held: affinity is to the endpoint */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SKIFF_MAX_SERVICES);
	__type(key, struct svc_key);
	__type(value, struct svc_value);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_services SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SKIFF_MAX_BACKENDS);
	__type(key, struct backend_key);
	__type(value, struct backend_value);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SKIFF_MAX_SOCKETS);
	__type(key, __u64); /* socket cookie */
	__type(value, struct sock_nat);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_sock_nat SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SKIFF_MAX_SERVICES);
	__type(key, struct svc6_key);
	__type(value, struct svc_value);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_services6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SKIFF_MAX_BACKENDS);
	__type(key, struct backend_key);
	__type(value, struct backend6_value);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_backends6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SKIFF_MAX_SOCKETS);
	__type(key, __u64); /* socket cookie */
	__type(value, struct sock_nat6);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_sock_nat6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SKIFF_MAX_SOCKETS);
	__type(key, struct affinity_key);
	__type(value, struct affinity_value);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_affinity SEC(".maps");

/* Per-packet connection tracking for traffic that enters the node from outside (NodePort).
 * Keys are the packet's tuple as the hook sees it. A forward entry (client -> frontend, seen
 * at ingress) remembers the chosen backend and SNAT port; a reverse entry (a reply, seen at
 * ingress for SNATed flows or at egress for local backends) says how to restore it. */
#define CT_FORWARD 1
#define CT_REVERSE 2

struct ct_key {
	__u32 saddr;
	__u32 daddr;
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 pad[3];
};

struct ct_value {
	__u8 kind;  /* CT_FORWARD, CT_REVERSE */
	__u8 pad;
	__u16 port1; /* forward: backend port;  reverse: new source port */
	__u16 port2; /* forward: SNAT port (0: none); reverse: new destination port (0: keep) */
	__u16 pad2;
	__u32 addr1; /* forward: backend address; reverse: new source address */
	__u32 addr2; /* reverse: new destination address (0: keep) */
	__u64 last_ns;
	/* Since layout 2: the packets and bytes of the direction the entry tracks, as
	 * conntrack's accounting counts them (`skiff bpf conntrack`). */
	__u64 packets;
	__u64 bytes;
};

#define SKIFF_MAX_CT 262144

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SKIFF_MAX_CT);
	__type(key, struct ct_key);
	__type(value, struct ct_value);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_ct SEC(".maps");

/* IPv6's NodePort connection tracking: ct_key and ct_value with 16-byte addresses (a zero
 * addr2 is "keep", as in IPv4's). */
struct ct6_key {
	__u32 saddr[4];
	__u32 daddr[4];
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 pad[3];
};

struct ct6_value {
	__u8 kind; /* CT_FORWARD, CT_REVERSE */
	__u8 pad;
	__u16 port1;
	__u16 port2;
	__u16 pad2;
	__u32 addr1[4];
	__u32 addr2[4];
	__u64 last_ns;
	__u64 packets; /* since layout 2, as ct_value's */
	__u64 bytes;
};

/* ct_account counts one packet of len bytes on a connection-tracking entry: the entry is
 * shared by every CPU handling the flow, hence the atomic adds. */
#define ct_account(ct, len)                                 \
	do {                                                \
		__sync_fetch_and_add(&(ct)->packets, 1);    \
		__sync_fetch_and_add(&(ct)->bytes, (len));  \
	} while (0)

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SKIFF_MAX_CT);
	__type(key, struct ct6_key);
	__type(value, struct ct6_value);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_ct6 SEC(".maps");

/* Maglev lookup tables: for a frontend with SVC_FLAG_MAGLEV, entry {id, hash % SIZE} names
 * the backend slot. The same flow hashes to the same backend on every node, and losing a
 * backend moves only the flows that were on it. */
struct maglev_key {
	__u32 id;
	__u32 index;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1048576);
	__type(key, struct maglev_key);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_maglev SEC(".maps");

/* pick_maglev returns the slot for a flow hash, 0 when the table lacks the entry. */
static __always_inline __u32 pick_maglev(__u32 id, __u32 hash)
{
	struct maglev_key mk = { .id = id, .index = hash % SKIFF_MAGLEV_SIZE };
	__u32 *slot = bpf_map_lookup_elem(&skiff_maglev, &mk);
	return slot ? *slot : 0;
}

/* flow_hash mixes a 5-tuple (a murmur3-style finalizer over each word). */
static __always_inline __u32 mix(__u32 h, __u32 v)
{
	v *= 0xcc9e2d51;
	v = (v << 15) | (v >> 17);
	v *= 0x1b873593;
	h ^= v;
	h = (h << 13) | (h >> 19);
	return h * 5 + 0xe6546b64;
}

static __always_inline __u32 flow_hash(__u32 saddr, __u32 daddr, __u16 sport, __u16 dport, __u8 proto)
{
	__u32 h = mix(0x5f1ff, saddr);
	h = mix(h, daddr);
	h = mix(h, ((__u32)sport << 16) | dport);
	h = mix(h, proto);
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

/* backend_tag names the endpoint in a frontend's slot (a hash of its address and port, from
 * skiff_backends6 when v6); 0 for an empty slot. */
static __always_inline __u32 backend_tag(__u32 id, __u32 slot, int v6)
{
	struct backend_key bk = { .id = id, .slot = slot };
	if (v6) {
		struct backend6_value *be = bpf_map_lookup_elem(&skiff_backends6, &bk);
		if (!be)
			return 0;
		__u32 h = mix(mix(mix(mix(0x5f1ff, be->addr[0]), be->addr[1]), be->addr[2]), be->addr[3]);
		return mix(h, be->port) | 1;
	}
	struct backend_value *be = bpf_map_lookup_elem(&skiff_backends, &bk);
	if (!be)
		return 0;
	return mix(mix(0x5f1ff, be->addr), be->port) | 1;
}

#define AFFINITY_SCAN 64

/* sticky_slot applies a frontend's ClientIP affinity to a fresh pick: a client seen within
 * the timeout keeps its endpoint — as upstream, affinity is to the endpoint, not to a
 * position, so it holds when other endpoints come and go and the slots shift (the first
 * AFFINITY_SCAN slots are searched when the remembered one moved); a client whose endpoint
 * is gone gets the fresh pick. Either way the client's entry is refreshed. Without affinity
 * the pick stands. v6 says which family's backends the frontend has. */
static __always_inline __u32 sticky_slot(__u64 client, struct svc_value *svc, __u32 slot, int v6)
{
	if (!(svc->flags & SVC_FLAG_AFFINITY))
		return slot;
	struct affinity_key ak = { .client = client, .id = svc->id };
	__u64 now = bpf_ktime_get_ns();
	struct affinity_value *av = bpf_map_lookup_elem(&skiff_affinity, &ak);
	if (av && av->backend && now - av->last_ns < (__u64)svc->affinity_timeout * 1000000000ULL) {
		__u32 want = av->backend, at = av->slot;
		if (at >= 1 && at <= svc->count && backend_tag(svc->id, at, v6) == want) {
			slot = at;
		} else {
			for (__u32 i = 1; i <= AFFINITY_SCAN; i++) {
				if (i > svc->count)
					break;
				if (backend_tag(svc->id, i, v6) == want) {
					slot = i;
					break;
				}
			}
		}
	}
	struct affinity_value nv = { .last_ns = now, .slot = slot, .backend = backend_tag(svc->id, slot, v6) };
	bpf_map_update_elem(&skiff_affinity, &ak, &nv, BPF_ANY);
	return slot;
}

/* The layout version of the maps pinned beside it (entry 0), written by the agent: a newer
 * agent that finds an older version migrates the maps' entries before attaching programs
 * that read the new layout (dataplane.Load). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_meta SEC(".maps");

/* Which Service each id belongs to ("namespace/name:port/PROTO"), written by the agent
 * for `skiff bpf services` and bpftool; the programs never read it. */
struct svc_name {
	char name[128];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SKIFF_MAX_SERVICES);
	__type(key, __u32);
	__type(value, struct svc_name);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_svc_names SEC(".maps");

#endif
