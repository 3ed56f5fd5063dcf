// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* NodePort for traffic from outside the node, per packet, on the node's uplink (tcx ingress
 * and egress). A packet to <node address>:<nodePort> is sent to a backend: to one on this node
 * with only its destination rewritten (the client address is kept; the reply is restored at
 * egress), to one on another node with its source rewritten to this node as well (so the reply
 * comes back here, is restored at ingress and sent to the client). externalTrafficPolicy Local
 * frontends only have local backends, so clients keep their address. IPv6 the same way, with its
 * own frontends (skiff_services6) and connection table (skiff_ct6), and ICMPv6 errors. */
#include "skiff.h"
#include "flow.h"
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif
#define IPPROTO_ICMPV6 58

/* ICMP as RFC 792 has it (linux/icmp.h pulls in libc headers a BPF target lacks). */
#define ICMP_DEST_UNREACH 3
#define ICMP_PORT_UNREACH 3
struct icmphdr {
	__u8 type, code;
	__sum16 checksum;
	__u32 unused;
};

#define SNAT_PORT_MIN 61000
#define SNAT_PORT_RANGE 4000

struct tuple {
	__u32 saddr, daddr;
	__u16 sport, dport;
	__u8 proto;
	__u32 l4_off;
	__u32 csum_off; /* offset of the L4 checksum */
};

#define IP_OFF ETH_HLEN
#define IP_CSUM_OFF (ETH_HLEN + offsetof(struct iphdr, check))
#define IP_SRC_OFF (ETH_HLEN + offsetof(struct iphdr, saddr))
#define IP_DST_OFF (ETH_HLEN + offsetof(struct iphdr, daddr))

/* parse reads an IPv4 TCP or UDP packet without options; 0 when it is one. */
static __always_inline int parse(struct __sk_buff *skb, struct tuple *t)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return -1;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || ip->ihl != 5 || (ip->frag_off & bpf_htons(0x3fff)))
		return -1;
	t->saddr = ip->saddr;
	t->daddr = ip->daddr;
	t->proto = ip->protocol;
	t->l4_off = ETH_HLEN + sizeof(struct iphdr);
	if (ip->protocol == IPPROTO_TCP) {
		struct tcphdr *tcp = (void *)(ip + 1);
		if ((void *)(tcp + 1) > end)
			return -1;
		t->sport = tcp->source;
		t->dport = tcp->dest;
		t->csum_off = t->l4_off + offsetof(struct tcphdr, check);
		return 0;
	}
	if (ip->protocol == IPPROTO_UDP) {
		struct udphdr *udp = (void *)(ip + 1);
		if ((void *)(udp + 1) > end)
			return -1;
		t->sport = udp->source;
		t->dport = udp->dest;
		t->csum_off = t->l4_off + offsetof(struct udphdr, check);
		return 0;
	}
	return -1;
}

static __always_inline __u64 l4_flags(struct tuple *t)
{
	/* A UDP checksum of 0 means none: keep it that way. */
	return t->proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
}

/* set_addr rewrites the source (src=1) or destination address and fixes both checksums. */
static __always_inline int set_addr(struct __sk_buff *skb, struct tuple *t, int src, __u32 old, __u32 new)
{
	if (old == new)
		return 0;
	if (bpf_l4_csum_replace(skb, t->csum_off, old, new, BPF_F_PSEUDO_HDR | sizeof(new) | l4_flags(t)) < 0)
		return -1;
	if (bpf_l3_csum_replace(skb, IP_CSUM_OFF, old, new, sizeof(new)) < 0)
		return -1;
	return bpf_skb_store_bytes(skb, src ? IP_SRC_OFF : IP_DST_OFF, &new, sizeof(new), 0);
}

/* set_port rewrites the source (src=1) or destination port and fixes the L4 checksum. */
static __always_inline int set_port(struct __sk_buff *skb, struct tuple *t, int src, __u16 old, __u16 new)
{
	if (old == new)
		return 0;
	if (bpf_l4_csum_replace(skb, t->csum_off, old, new, sizeof(new) | l4_flags(t)) < 0)
		return -1;
	/* source and dest are the first two 16-bit fields of both TCP and UDP headers */
	return bpf_skb_store_bytes(skb, t->l4_off + (src ? 0 : 2), &new, sizeof(new), 0);
}

/* forward sends a rewritten packet that is not for this node out towards its destination:
 * the stack would drop it, its source being this node's own address. */
static __always_inline int forward(struct __sk_buff *skb, __u32 daddr)
{
	struct bpf_fib_lookup fib = {};
	fib.family = AF_INET;
	fib.ipv4_dst = daddr;
	fib.ifindex = skb->ingress_ifindex ? skb->ingress_ifindex : skb->ifindex;
	int rc = bpf_fib_lookup(skb, &fib, sizeof(fib), BPF_FIB_LOOKUP_SKIP_NEIGH);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return TC_ACT_SHOT;
	return bpf_redirect_neigh(fib.ifindex, 0, 0, 0);
}

static __always_inline __u16 fold(__s64 sum)
{
	__u32 s = (__u32)sum;
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)~s;
}

/* reset answers a TCP segment for a frontend without endpoints with a RST from that
 * frontend, sent straight back out of the interface it came in on: the client learns at once
 * that nothing listens, as it would from a closed port, instead of retrying into a black hole. */
static __always_inline int reset(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct tcphdr *tcp = (void *)(ip + 1);
	if ((void *)(tcp + 1) > end || tcp->rst)
		return TC_ACT_SHOT;
	__u32 saddr = ip->saddr, daddr = ip->daddr;
	__u16 sport = tcp->source, dport = tcp->dest;
	__u32 seq = bpf_ntohl(tcp->seq), ackseq = tcp->ack_seq;
	__u32 payload = bpf_ntohs(ip->tot_len) - sizeof(struct iphdr) - tcp->doff * 4;
	int had_ack = tcp->ack;
	__u32 consumed = payload + tcp->syn + tcp->fin;
	unsigned char mac[ETH_ALEN];
	__builtin_memcpy(mac, eth->h_source, ETH_ALEN);

	if (bpf_skb_change_tail(skb, ETH_HLEN + sizeof(struct iphdr) + sizeof(struct tcphdr), 0))
		return TC_ACT_SHOT;
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	eth = data;
	ip = (void *)(eth + 1);
	tcp = (void *)(ip + 1);
	if ((void *)(tcp + 1) > end)
		return TC_ACT_SHOT;
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, mac, ETH_ALEN);
	ip->saddr = daddr;
	ip->daddr = saddr;
	ip->tot_len = bpf_htons(sizeof(struct iphdr) + sizeof(struct tcphdr));
	ip->ttl = 64;
	ip->id = 0;
	ip->frag_off = bpf_htons(0x4000);
	ip->check = 0;
	ip->check = fold(bpf_csum_diff(0, 0, (__be32 *)ip, sizeof(struct iphdr), 0));
	__builtin_memset(tcp, 0, sizeof(*tcp));
	tcp->source = dport;
	tcp->dest = sport;
	tcp->doff = 5;
	tcp->rst = 1;
	if (had_ack) {
		tcp->seq = ackseq;
	} else {
		tcp->ack = 1;
		tcp->ack_seq = bpf_htonl(seq + consumed);
	}
	struct {
		__u32 saddr, daddr;
		__u8 zero, proto;
		__u16 len;
	} pseudo = { .saddr = daddr, .daddr = saddr, .proto = IPPROTO_TCP, .len = bpf_htons(sizeof(struct tcphdr)) };
	__s64 sum = bpf_csum_diff(0, 0, (__be32 *)&pseudo, sizeof(pseudo), 0);
	sum = bpf_csum_diff(0, 0, (__be32 *)tcp, sizeof(struct tcphdr), (__u32)sum);
	tcp->check = fold(sum);
	return bpf_redirect(skb->ifindex, 0);
}

/* ICMP errors this program builds are rate-limited as the kernel limits its own port
 * unreachables: per destination 1 a second with bursts of 6 (net.ipv4.icmp_ratelimit), and in
 * all 1000 a second with bursts of 50 (icmp_msgs_per_sec, _burst) — so neither a flood nor a
 * spoofed victim address gets a flood back. Each is a virtual-time token bucket: the time the
 * next message is due, moved on by one message's cost. The global one is shared by all CPUs
 * without locking; an approximate limit is enough. */
#define ICMP_COST_NS (1000000000ULL / 1000)
#define ICMP_BURST 50
#define ICMP_PEER_COST_NS 1000000000ULL
#define ICMP_PEER_BURST 6
__u64 icmp_next_ns;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);   /* the destination of the ICMP message (the datagram's source) */
	__type(value, __u64); /* when its next message is due */
} skiff_icmp_peers SEC(".maps");

/* bucket takes one message from a bucket whose next message is due at *next; 0 when empty. */
static __always_inline int bucket(__u64 *next, __u64 now, __u64 cost, __u64 burst)
{
	__u64 due = *next;
	/* A full bucket: the burst's first message is due now, its last burst-1 costs ahead. */
	if (due + (burst - 1) * cost < now)
		due = now - (burst - 1) * cost;
	if (due > now)
		return 0;
	*next = due + cost;
	return 1;
}

static __always_inline int icmp_allowed(__u32 peer)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 *due = bpf_map_lookup_elem(&skiff_icmp_peers, &peer);
	__u64 fresh = 0;
	if (!due) {
		bpf_map_update_elem(&skiff_icmp_peers, &peer, &fresh, BPF_NOEXIST);
		due = bpf_map_lookup_elem(&skiff_icmp_peers, &peer);
		if (!due)
			return 0;
	}
	if (!bucket(due, now, ICMP_PEER_COST_NS, ICMP_PEER_BURST))
		return 0;
	return bucket(&icmp_next_ns, now, ICMP_COST_NS, ICMP_BURST);
}

/* unreachable answers a UDP datagram for a frontend without endpoints with an ICMP port
 * unreachable from that frontend, quoting the datagram's IP header and first 8 bytes as
 * RFC 792 asks: the client's socket gets ECONNREFUSED, as from a closed port. */
static __always_inline int unreachable(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct {
		struct iphdr ip;
		__u8 l4[8];
	} quote;
	if ((void *)eth + ETH_HLEN + sizeof(quote) > end)
		return TC_ACT_SHOT;
	__builtin_memcpy(&quote, (void *)(eth + 1), sizeof(quote));
	if (!icmp_allowed(quote.ip.saddr))
		return TC_ACT_SHOT;
	unsigned char mac[ETH_ALEN];
	__builtin_memcpy(mac, eth->h_source, ETH_ALEN);

	const __u32 len = ETH_HLEN + sizeof(struct iphdr) + sizeof(struct icmphdr) + sizeof(quote);
	if (bpf_skb_change_tail(skb, len, 0))
		return TC_ACT_SHOT;
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	eth = data;
	if ((void *)eth + len > end)
		return TC_ACT_SHOT;
	struct iphdr *ip = (void *)(eth + 1);
	struct icmphdr *icmp = (void *)(ip + 1);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, mac, ETH_ALEN);
	ip->version = 4;
	ip->ihl = 5;
	ip->tos = 0;
	ip->tot_len = bpf_htons(len - ETH_HLEN);
	ip->id = 0;
	ip->frag_off = 0;
	ip->ttl = 64;
	ip->protocol = IPPROTO_ICMP;
	ip->saddr = quote.ip.daddr;
	ip->daddr = quote.ip.saddr;
	ip->check = 0;
	ip->check = fold(bpf_csum_diff(0, 0, (__be32 *)ip, sizeof(struct iphdr), 0));
	__builtin_memset(icmp, 0, sizeof(*icmp));
	icmp->type = ICMP_DEST_UNREACH;
	icmp->code = ICMP_PORT_UNREACH;
	__builtin_memcpy((void *)(icmp + 1), &quote, sizeof(quote));
	__s64 sum = bpf_csum_diff(0, 0, (__be32 *)icmp, sizeof(struct icmphdr), 0);
	sum = bpf_csum_diff(0, 0, (__be32 *)&quote, sizeof(quote), (__u32)sum);
	icmp->checksum = fold(sum);
	return bpf_redirect(skb->ifindex, 0);
}

/* The node's own address, which forwarded flows are SNATed to (written by the agent; 0: the
 * frontend's address, right for a NodePort, whose frontend is the node's address — not for
 * a LoadBalancer or external address, which other nodes serve too). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_np_snat SEC(".maps");

static __always_inline __u32 snat_addr(__u32 frontend)
{
	__u32 k = 0;
	__u32 *a = bpf_map_lookup_elem(&skiff_np_snat, &k);
	return a && *a ? *a : frontend;
}

/* flow_translate reports a new connection to a frontend sent to a backend (addresses are
 * IPv4 in their first word, family 4, or IPv6). */
static __always_inline void flow_translate(__u8 family, const __u32 *src, const __u32 *front, const __u32 *be, __u16 sport,
					   __u16 fport, __u16 bport, __u8 proto)
{
	struct flow_event *e = flow_begin(FLOW_KIND_TRANSLATE, FLOW_FORWARDED, FLOW_REASON_SERVICE);
	if (!e)
		return;
	if (family == 4) {
		flow_addrs4(e, src[0], be[0], sport, bport, proto);
		e->orig[0] = front[0];
	} else {
		flow_addrs6(e, src, be, sport, bport, proto);
		__builtin_memcpy(e->orig, front, 16);
	}
	e->orig_port = fport;
	flow_end(e);
}

/* flow_drop reports a packet to a frontend dropped (or refused) for reason. */
static __always_inline void flow_drop(__u8 family, const __u32 *src, const __u32 *dst, __u16 sport, __u16 dport, __u8 proto,
				      __u8 reason)
{
	struct flow_event *e = flow_begin(FLOW_KIND_DROP, FLOW_DROPPED, reason);
	if (!e)
		return;
	if (family == 4)
		flow_addrs4(e, src[0], dst[0], sport, dport, proto);
	else
		flow_addrs6(e, src, dst, sport, dport, proto);
	flow_end(e);
}

static __always_inline int ingress4(struct __sk_buff *skb)
{
	struct tuple t = {};
	if (parse(skb, &t) < 0)
		return TC_ACT_OK;
	struct ct_key key = { .saddr = t.saddr, .daddr = t.daddr, .sport = t.sport, .dport = t.dport, .proto = t.proto };
	struct ct_value *ct = bpf_map_lookup_elem(&skiff_ct, &key);
	__u64 now = bpf_ktime_get_ns();

	/* A reply to a SNATed flow: restore the frontend as source and the client as destination. */
	if (ct && ct->kind == CT_REVERSE) {
		__u32 naddr1 = ct->addr1, naddr2 = ct->addr2;
		__u16 nport1 = ct->port1, nport2 = ct->port2;
		ct->last_ns = now;
		ct_account(ct, skb->len);
		if (set_addr(skb, &t, 1, t.saddr, naddr1) || set_port(skb, &t, 1, t.sport, nport1))
			return TC_ACT_SHOT;
		if (naddr2 && (set_addr(skb, &t, 0, t.daddr, naddr2) || set_port(skb, &t, 0, t.dport, nport2)))
			return TC_ACT_SHOT;
		return naddr2 ? forward(skb, naddr2) : TC_ACT_OK;
	}

	struct svc_key sk = { .addr = t.daddr, .port = t.dport, .proto = t.proto };
	struct svc_value *svc = bpf_map_lookup_elem(&skiff_services, &sk);
	if (!svc)
		return TC_ACT_OK;
	if (svc->count == 0) {
		/* No endpoints: refused, as from a closed port. With externalTrafficPolicy Local
		 * that means none on this node, and upstream drops instead — a load balancer whose
		 * health checks have not caught up yet gets a retransmission to another node. */
		flow_drop(4, &t.saddr, &t.daddr, t.sport, t.dport, t.proto, FLOW_REASON_NO_BACKEND);
		if (svc->flags & SVC_FLAG_LOCAL)
			return TC_ACT_SHOT;
		return t.proto == IPPROTO_TCP ? reset(skb) : unreachable(skb);
	}

	__u32 be_addr;
	__u16 be_port, snat_port = 0;
	int local;
	if (ct && ct->kind == CT_FORWARD) {
		be_addr = ct->addr1;
		be_port = ct->port1;
		snat_port = ct->port2;
		local = snat_port == 0;
		ct->last_ns = now;
		ct_account(ct, skb->len);
	} else {
		__u32 slot = 0;
		if (svc->flags & SVC_FLAG_MAGLEV)
			slot = pick_maglev(svc->id, flow_hash(t.saddr, t.daddr, t.sport, t.dport, t.proto));
		if (slot == 0 || slot > svc->count)
			slot = (bpf_get_prandom_u32() % svc->count) + 1;
		slot = sticky_slot(AFFINITY_BY_ADDR | t.saddr, svc, slot, 0);
		struct backend_key bk = { .id = svc->id, .slot = slot };
		struct backend_value *be = bpf_map_lookup_elem(&skiff_backends, &bk);
		if (!be) {
			flow_drop(4, &t.saddr, &t.daddr, t.sport, t.dport, t.proto, FLOW_REASON_NO_BACKEND);
			return TC_ACT_SHOT;
		}
		be_addr = be->addr;
		be_port = be->port;
		local = (be->flags & BE_FLAG_LOCAL) || (svc->flags & SVC_FLAG_LOCAL);
		if (!local) {
			/* A free SNAT port: one whose reply tuple no flow uses yet (a few tries; the
			 * table is an LRU, so a port stays taken only while its flow is recent). */
			struct ct_key probe = { .saddr = be_addr, .daddr = snat_addr(t.daddr), .sport = be_port, .proto = t.proto };
#pragma unroll
			for (int i = 0; i < 4; i++) {
				snat_port = bpf_htons(SNAT_PORT_MIN + (bpf_get_prandom_u32() % SNAT_PORT_RANGE));
				probe.dport = snat_port;
				if (!bpf_map_lookup_elem(&skiff_ct, &probe))
					break;
			}
		}
		struct ct_value fwd = { .kind = CT_FORWARD, .addr1 = be_addr, .port1 = be_port, .port2 = snat_port, .last_ns = now,
					 .packets = 1, .bytes = skb->len };
		if (bpf_map_update_elem(&skiff_ct, &key, &fwd, BPF_ANY) < 0) {
			/* Untracked, its replies could not be translated back. */
			flow_drop(4, &t.saddr, &t.daddr, t.sport, t.dport, t.proto, FLOW_REASON_CT_FULL);
			return TC_ACT_SHOT;
		}
		struct ct_value rev = { .kind = CT_REVERSE, .addr1 = t.daddr, .port1 = t.dport, .last_ns = now };
		struct ct_key rk = { .saddr = be_addr, .sport = be_port, .proto = t.proto };
		if (local) {
			/* the reply leaves through egress as backend -> client */
			rk.daddr = t.saddr;
			rk.dport = t.sport;
		} else {
			/* the reply comes back to ingress as backend -> this node's SNAT port */
			rk.daddr = snat_addr(t.daddr);
			rk.dport = snat_port;
			rev.addr2 = t.saddr;
			rev.port2 = t.sport;
		}
		bpf_map_update_elem(&skiff_ct, &rk, &rev, BPF_ANY);
		flow_translate(4, &t.saddr, &t.daddr, &be_addr, t.sport, t.dport, be_port, t.proto);
	}
	if (set_addr(skb, &t, 0, t.daddr, be_addr) || set_port(skb, &t, 0, t.dport, be_port))
		return TC_ACT_SHOT;
	if (local)
		return TC_ACT_OK; /* the stack delivers it to the pod */
	if (set_addr(skb, &t, 1, t.saddr, snat_addr(sk.addr)) || set_port(skb, &t, 1, t.sport, snat_port))
		return TC_ACT_SHOT;
	return forward(skb, be_addr);
}

static __always_inline int egress4(struct __sk_buff *skb)
{
	struct tuple t = {};
	if (parse(skb, &t) < 0)
		return TC_ACT_OK;
	struct ct_key key = { .saddr = t.saddr, .daddr = t.daddr, .sport = t.sport, .dport = t.dport, .proto = t.proto };
	struct ct_value *ct = bpf_map_lookup_elem(&skiff_ct, &key);
	if (!ct || ct->kind != CT_REVERSE || ct->addr2)
		return TC_ACT_OK;
	__u32 naddr = ct->addr1;
	__u16 nport = ct->port1;
	ct->last_ns = bpf_ktime_get_ns();
	ct_account(ct, skb->len);
	if (set_addr(skb, &t, 1, t.saddr, naddr) || set_port(skb, &t, 1, t.sport, nport))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

/* ---- IPv6 ---- */

struct tuple6 {
	__u32 saddr[4], daddr[4];
	__u16 sport, dport;
	__u8 proto;
	__u32 l4_off;
	__u32 csum_off;
};

#define IP6_SRC_OFF (ETH_HLEN + offsetof(struct ipv6hdr, saddr))
#define IP6_DST_OFF (ETH_HLEN + offsetof(struct ipv6hdr, daddr))

static __always_inline void copy6(__u32 *dst, const __u32 *src)
{
	dst[0] = src[0];
	dst[1] = src[1];
	dst[2] = src[2];
	dst[3] = src[3];
}

static __always_inline int zero6(const __u32 *a)
{
	return (a[0] | a[1] | a[2] | a[3]) == 0;
}

/* fold6 folds an address into 32 bits, for hashing a client (Maglev, affinity, ICMP limits). */
static __always_inline __u32 fold6(const __u32 *a)
{
	return mix(mix(mix(mix(0x5f1ff, a[0]), a[1]), a[2]), a[3]);
}

/* client6 names an IPv6 client for ClientIP affinity: a 63-bit hash of its address beside
 * AFFINITY_BY_ADDR (two clients sharing one is as rare as a 63-bit collision). */
static __always_inline __u64 client6(const __u32 *a)
{
	__u32 h = fold6(a);
	__u64 v = ((__u64)h << 32) | mix(h, a[3] ^ a[1]);
	return AFFINITY_BY_ADDR | (v & ~AFFINITY_BY_ADDR);
}

/* parse6 reads an IPv6 TCP or UDP packet without extension headers; 0 when it is one.
 * Everything else (neighbour discovery above all) passes untouched. */
static __always_inline int parse6(struct __sk_buff *skb, struct tuple6 *t)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return -1;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	if ((void *)(ip6 + 1) > end)
		return -1;
	__builtin_memcpy(t->saddr, &ip6->saddr, 16);
	__builtin_memcpy(t->daddr, &ip6->daddr, 16);
	t->proto = ip6->nexthdr;
	t->l4_off = ETH_HLEN + sizeof(struct ipv6hdr);
	if (ip6->nexthdr == IPPROTO_TCP) {
		struct tcphdr *tcp = (void *)(ip6 + 1);
		if ((void *)(tcp + 1) > end)
			return -1;
		t->sport = tcp->source;
		t->dport = tcp->dest;
		t->csum_off = t->l4_off + offsetof(struct tcphdr, check);
		return 0;
	}
	if (ip6->nexthdr == IPPROTO_UDP) {
		struct udphdr *udp = (void *)(ip6 + 1);
		if ((void *)(udp + 1) > end)
			return -1;
		t->sport = udp->source;
		t->dport = udp->dest;
		t->csum_off = t->l4_off + offsetof(struct udphdr, check);
		return 0;
	}
	return -1;
}

/* set_addr6 rewrites the source (src=1) or destination address and fixes the L4 checksum
 * (IPv6 has no header checksum; the address is in the pseudo-header). */
static __always_inline int set_addr6(struct __sk_buff *skb, struct tuple6 *t, int src, __u32 *old, __u32 *new)
{
	if (old[0] == new[0] && old[1] == new[1] && old[2] == new[2] && old[3] == new[3])
		return 0;
	__s64 diff = bpf_csum_diff((__be32 *)old, 16, (__be32 *)new, 16, 0);
	__u64 flags = BPF_F_PSEUDO_HDR | (t->proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0);
	if (bpf_l4_csum_replace(skb, t->csum_off, 0, diff, flags) < 0)
		return -1;
	return bpf_skb_store_bytes(skb, src ? IP6_SRC_OFF : IP6_DST_OFF, new, 16, 0);
}

static __always_inline int set_port6(struct __sk_buff *skb, struct tuple6 *t, int src, __u16 old, __u16 new)
{
	if (old == new)
		return 0;
	if (bpf_l4_csum_replace(skb, t->csum_off, old, new, sizeof(new) | (t->proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0)) < 0)
		return -1;
	return bpf_skb_store_bytes(skb, t->l4_off + (src ? 0 : 2), &new, sizeof(new), 0);
}

static __always_inline int forward6(struct __sk_buff *skb, __u32 *daddr)
{
	struct bpf_fib_lookup fib = {};
	fib.family = AF_INET6;
	copy6(fib.ipv6_dst, daddr);
	fib.ifindex = skb->ingress_ifindex ? skb->ingress_ifindex : skb->ifindex;
	int rc = bpf_fib_lookup(skb, &fib, sizeof(fib), BPF_FIB_LOOKUP_SKIP_NEIGH);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return TC_ACT_SHOT;
	return bpf_redirect_neigh(fib.ifindex, 0, 0, 0);
}

/* pseudo6 is the IPv6 pseudo-header of an upper-layer checksum (RFC 8200, 8.1). */
struct pseudo6 {
	__u32 saddr[4], daddr[4];
	__u32 len;
	__u8 zero[3];
	__u8 nexthdr;
};

/* reset6 is reset for IPv6. */
static __always_inline int reset6(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	struct tcphdr *tcp = (void *)(ip6 + 1);
	if ((void *)(tcp + 1) > end || tcp->rst)
		return TC_ACT_SHOT;
	struct pseudo6 ph = { .len = bpf_htonl(sizeof(struct tcphdr)), .nexthdr = IPPROTO_TCP };
	__builtin_memcpy(ph.saddr, &ip6->daddr, 16);
	__builtin_memcpy(ph.daddr, &ip6->saddr, 16);
	__u16 sport = tcp->source, dport = tcp->dest;
	__u32 seq = bpf_ntohl(tcp->seq), ackseq = tcp->ack_seq;
	__u32 payload = bpf_ntohs(ip6->payload_len) - tcp->doff * 4;
	int had_ack = tcp->ack;
	__u32 consumed = payload + tcp->syn + tcp->fin;
	unsigned char mac[ETH_ALEN];
	__builtin_memcpy(mac, eth->h_source, ETH_ALEN);

	if (bpf_skb_change_tail(skb, ETH_HLEN + sizeof(struct ipv6hdr) + sizeof(struct tcphdr), 0))
		return TC_ACT_SHOT;
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	eth = data;
	ip6 = (void *)(eth + 1);
	tcp = (void *)(ip6 + 1);
	if ((void *)(tcp + 1) > end)
		return TC_ACT_SHOT;
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, mac, ETH_ALEN);
	__builtin_memcpy(&ip6->saddr, ph.saddr, 16);
	__builtin_memcpy(&ip6->daddr, ph.daddr, 16);
	ip6->payload_len = bpf_htons(sizeof(struct tcphdr));
	ip6->nexthdr = IPPROTO_TCP;
	ip6->hop_limit = 64;
	__builtin_memset(tcp, 0, sizeof(*tcp));
	tcp->source = dport;
	tcp->dest = sport;
	tcp->doff = 5;
	tcp->rst = 1;
	if (had_ack) {
		tcp->seq = ackseq;
	} else {
		tcp->ack = 1;
		tcp->ack_seq = bpf_htonl(seq + consumed);
	}
	__s64 sum = bpf_csum_diff(0, 0, (__be32 *)&ph, sizeof(ph), 0);
	sum = bpf_csum_diff(0, 0, (__be32 *)tcp, sizeof(struct tcphdr), (__u32)sum);
	tcp->check = fold(sum);
	return bpf_redirect(skb->ifindex, 0);
}

/* ICMPv6 as RFC 4443 has it. */
#define ICMPV6_DEST_UNREACH_TYPE 1
#define ICMPV6_PORT_UNREACH_CODE 4
struct icmp6hdr_min {
	__u8 type, code;
	__sum16 checksum;
	__u32 unused;
};

/* unreachable6 answers a UDP datagram for a frontend without endpoints with an ICMPv6 port
 * unreachable from that frontend, quoting the datagram's IPv6 header and first 8 bytes (RFC
 * 4443 allows as much as fits; the header and ports are what the client's stack matches). */
static __always_inline int unreachable6(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct {
		struct ipv6hdr ip6;
		__u8 l4[8];
	} quote;
	if ((void *)eth + ETH_HLEN + sizeof(quote) > end)
		return TC_ACT_SHOT;
	__builtin_memcpy(&quote, (void *)(eth + 1), sizeof(quote));
	__u32 peer[4];
	__builtin_memcpy(peer, &quote.ip6.saddr, 16);
	if (!icmp_allowed(fold6(peer)))
		return TC_ACT_SHOT;
	unsigned char mac[ETH_ALEN];
	__builtin_memcpy(mac, eth->h_source, ETH_ALEN);

	const __u32 icmp_len = sizeof(struct icmp6hdr_min) + sizeof(quote);
	const __u32 len = ETH_HLEN + sizeof(struct ipv6hdr) + icmp_len;
	if (bpf_skb_change_tail(skb, len, 0))
		return TC_ACT_SHOT;
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	eth = data;
	if ((void *)eth + len > end)
		return TC_ACT_SHOT;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	struct icmp6hdr_min *icmp = (void *)(ip6 + 1);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, mac, ETH_ALEN);
	struct pseudo6 ph = { .len = bpf_htonl(icmp_len), .nexthdr = IPPROTO_ICMPV6 };
	__builtin_memcpy(ph.saddr, &quote.ip6.daddr, 16);
	__builtin_memcpy(ph.daddr, &quote.ip6.saddr, 16);
	__builtin_memset(ip6, 0, sizeof(*ip6));
	ip6->version = 6;
	ip6->payload_len = bpf_htons(icmp_len);
	ip6->nexthdr = IPPROTO_ICMPV6;
	ip6->hop_limit = 64;
	__builtin_memcpy(&ip6->saddr, ph.saddr, 16);
	__builtin_memcpy(&ip6->daddr, ph.daddr, 16);
	__builtin_memset(icmp, 0, sizeof(*icmp));
	icmp->type = ICMPV6_DEST_UNREACH_TYPE;
	icmp->code = ICMPV6_PORT_UNREACH_CODE;
	__builtin_memcpy((void *)(icmp + 1), &quote, sizeof(quote));
	__s64 sum = bpf_csum_diff(0, 0, (__be32 *)&ph, sizeof(ph), 0);
	sum = bpf_csum_diff(0, 0, (__be32 *)icmp, sizeof(*icmp), (__u32)sum);
	sum = bpf_csum_diff(0, 0, (__be32 *)&quote, sizeof(quote), (__u32)sum);
	icmp->checksum = fold(sum);
	return bpf_redirect(skb->ifindex, 0);
}

/* The node's IPv6 address, which forwarded IPv6 flows are SNATed to (zero: the frontend's). */
struct snat6 {
	__u32 addr[4];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct snat6);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_np_snat6 SEC(".maps");

static __always_inline void snat_addr6(__u32 *out, const __u32 *frontend)
{
	__u32 k = 0;
	struct snat6 *a = bpf_map_lookup_elem(&skiff_np_snat6, &k);
	if (a && !zero6(a->addr))
		copy6(out, a->addr);
	else
		copy6(out, frontend);
}

static __always_inline int ingress6(struct __sk_buff *skb)
{
	struct tuple6 t = {};
	if (parse6(skb, &t) < 0)
		return TC_ACT_OK;
	struct ct6_key key = { .sport = t.sport, .dport = t.dport, .proto = t.proto };
	copy6(key.saddr, t.saddr);
	copy6(key.daddr, t.daddr);
	struct ct6_value *ct = bpf_map_lookup_elem(&skiff_ct6, &key);
	__u64 now = bpf_ktime_get_ns();

	if (ct && ct->kind == CT_REVERSE) {
		__u32 naddr1[4], naddr2[4];
		copy6(naddr1, ct->addr1);
		copy6(naddr2, ct->addr2);
		__u16 nport1 = ct->port1, nport2 = ct->port2;
		ct->last_ns = now;
		ct_account(ct, skb->len);
		if (set_addr6(skb, &t, 1, t.saddr, naddr1) || set_port6(skb, &t, 1, t.sport, nport1))
			return TC_ACT_SHOT;
		if (zero6(naddr2))
			return TC_ACT_OK;
		if (set_addr6(skb, &t, 0, t.daddr, naddr2) || set_port6(skb, &t, 0, t.dport, nport2))
			return TC_ACT_SHOT;
		return forward6(skb, naddr2);
	}

	struct svc6_key sk = { .port = t.dport, .proto = t.proto };
	copy6(sk.addr, t.daddr);
	struct svc_value *svc = bpf_map_lookup_elem(&skiff_services6, &sk);
	if (!svc)
		return TC_ACT_OK;
	if (svc->count == 0) {
		flow_drop(6, t.saddr, t.daddr, t.sport, t.dport, t.proto, FLOW_REASON_NO_BACKEND);
		if (svc->flags & SVC_FLAG_LOCAL)
			return TC_ACT_SHOT;
		return t.proto == IPPROTO_TCP ? reset6(skb) : unreachable6(skb);
	}

	__u32 be_addr[4], snat[4];
	__u16 be_port, snat_port = 0;
	int local;
	snat_addr6(snat, t.daddr);
	if (ct && ct->kind == CT_FORWARD) {
		copy6(be_addr, ct->addr1);
		be_port = ct->port1;
		snat_port = ct->port2;
		local = snat_port == 0;
		ct->last_ns = now;
		ct_account(ct, skb->len);
	} else {
		__u32 client = fold6(t.saddr);
		__u32 slot = 0;
		if (svc->flags & SVC_FLAG_MAGLEV)
			slot = pick_maglev(svc->id, flow_hash(client, fold6(t.daddr), t.sport, t.dport, t.proto));
		if (slot == 0 || slot > svc->count)
			slot = (bpf_get_prandom_u32() % svc->count) + 1;
		slot = sticky_slot(client6(t.saddr), svc, slot, 1);
		struct backend_key bk = { .id = svc->id, .slot = slot };
		struct backend6_value *be = bpf_map_lookup_elem(&skiff_backends6, &bk);
		if (!be) {
			flow_drop(6, t.saddr, t.daddr, t.sport, t.dport, t.proto, FLOW_REASON_NO_BACKEND);
			return TC_ACT_SHOT;
		}
		copy6(be_addr, be->addr);
		be_port = be->port;
		local = (be->flags & BE_FLAG_LOCAL) || (svc->flags & SVC_FLAG_LOCAL);
		if (!local) {
			struct ct6_key probe = { .sport = be_port, .proto = t.proto };
			copy6(probe.saddr, be_addr);
			copy6(probe.daddr, snat);
#pragma unroll
			for (int i = 0; i < 4; i++) {
				snat_port = bpf_htons(SNAT_PORT_MIN + (bpf_get_prandom_u32() % SNAT_PORT_RANGE));
				probe.dport = snat_port;
				if (!bpf_map_lookup_elem(&skiff_ct6, &probe))
					break;
			}
		}
		/* One value for both entries, the forward then the reverse: this function's stack
		 * is near the verifier's 512 bytes. */
		struct ct6_value v = { .kind = CT_FORWARD, .port1 = be_port, .port2 = snat_port, .last_ns = now, .packets = 1, .bytes = skb->len };
		copy6(v.addr1, be_addr);
		if (bpf_map_update_elem(&skiff_ct6, &key, &v, BPF_ANY) < 0) {
			flow_drop(6, t.saddr, t.daddr, t.sport, t.dport, t.proto, FLOW_REASON_CT_FULL);
			return TC_ACT_SHOT;
		}
		__builtin_memset(&v, 0, sizeof(v));
		v.kind = CT_REVERSE;
		v.port1 = t.dport;
		v.last_ns = now;
		copy6(v.addr1, t.daddr);
		struct ct6_key rk = { .sport = be_port, .proto = t.proto };
		copy6(rk.saddr, be_addr);
		if (local) {
			copy6(rk.daddr, t.saddr);
			rk.dport = t.sport;
		} else {
			copy6(rk.daddr, snat);
			rk.dport = snat_port;
			copy6(v.addr2, t.saddr);
			v.port2 = t.sport;
		}
		bpf_map_update_elem(&skiff_ct6, &rk, &v, BPF_ANY);
		flow_translate(6, t.saddr, t.daddr, be_addr, t.sport, t.dport, be_port, t.proto);
	}
	if (set_addr6(skb, &t, 0, t.daddr, be_addr) || set_port6(skb, &t, 0, t.dport, be_port))
		return TC_ACT_SHOT;
	if (local)
		return TC_ACT_OK;
	if (set_addr6(skb, &t, 1, t.saddr, snat) || set_port6(skb, &t, 1, t.sport, snat_port))
		return TC_ACT_SHOT;
	return forward6(skb, be_addr);
}

static __always_inline int egress6(struct __sk_buff *skb)
{
	struct tuple6 t = {};
	if (parse6(skb, &t) < 0)
		return TC_ACT_OK;
	struct ct6_key key = { .sport = t.sport, .dport = t.dport, .proto = t.proto };
	copy6(key.saddr, t.saddr);
	copy6(key.daddr, t.daddr);
	struct ct6_value *ct = bpf_map_lookup_elem(&skiff_ct6, &key);
	if (!ct || ct->kind != CT_REVERSE || !zero6(ct->addr2))
		return TC_ACT_OK;
	__u32 naddr[4];
	copy6(naddr, ct->addr1);
	__u16 nport = ct->port1;
	ct->last_ns = bpf_ktime_get_ns();
	ct_account(ct, skb->len);
	if (set_addr6(skb, &t, 1, t.saddr, naddr) || set_port6(skb, &t, 1, t.sport, nport))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

/* is_ipv6 says whether the frame carries IPv6. */
static __always_inline int is_ipv6(struct __sk_buff *skb)
{
	return skb->protocol == bpf_htons(ETH_P_IPV6);
}

SEC("tc")
int skiff_nodeport_ingress(struct __sk_buff *skb)
{
	return is_ipv6(skb) ? ingress6(skb) : ingress4(skb);
}

SEC("tc")
int skiff_nodeport_egress(struct __sk_buff *skb)
{
	return is_ipv6(skb) ? egress6(skb) : egress4(skb);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
