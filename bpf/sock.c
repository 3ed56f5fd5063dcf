// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Socket-level service load balancing, attached to the cgroup under which the node's pods
 * run: connect() and unconnected sendmsg() to a Service frontend are sent straight to one of
 * its backends, so no packet ever carries the ClusterIP and no per-packet NAT or conntrack is
 * needed; getpeername() and recvmsg() show the application the address it asked for. Pods'
 * hostPorts are frontends too, those on 127.0.0.1 (::1) only in the node's own network
 * namespace. Both families: IPv6 frontends from skiff_services6, and an IPv6 socket's
 * IPv4-mapped address (::ffff:a.b.c.d, a dual-stack socket reaching an IPv4 Service) from the
 * IPv4 maps, as the kernel would have sent it over IPv4. */
#include "skiff.h"
#include "flow.h"
#include <bpf/bpf_endian.h>

#ifndef IPPROTO_TCP
#define IPPROTO_TCP 6
#endif
#ifndef IPPROTO_UDP
#define IPPROTO_UDP 17
#endif

/* The node's own network namespace (entry 0: its cookie), written by the agent; the lab's
 * nodes share a kernel, each its own namespace. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} skiff_host_netns SEC(".maps");

static __always_inline int in_host_netns(struct bpf_sock_addr *ctx)
{
	__u32 k = 0;
	__u64 *cookie = bpf_map_lookup_elem(&skiff_host_netns, &k);
	return cookie && *cookie && *cookie == bpf_get_netns_cookie(ctx);
}

static __always_inline __u32 pick_slot(struct bpf_sock_addr *ctx, struct svc_value *svc, int v6)
{
	__u32 slot = (bpf_get_prandom_u32() % svc->count) + 1;
	if (svc->flags & SVC_FLAG_MAGLEV) {
		/* A socket has no source port yet: hash the client (its netns) and the socket. */
		__u64 c = bpf_get_netns_cookie(ctx) ^ bpf_get_socket_cookie(ctx);
		__u32 m = pick_maglev(svc->id, flow_hash((__u32)c, (__u32)(c >> 32), 0, (__u16)ctx->user_port, (__u8)ctx->protocol));
		if (m >= 1 && m <= svc->count)
			slot = m;
	}
	return sticky_slot(bpf_get_netns_cookie(ctx), svc, slot, v6);
}

/* frontend finds the frontend of an IPv4 address and the backend to send to; 0 when addr is no
 * frontend (the call goes on untouched), -1 to refuse (a Service without endpoints: the
 * application gets EPERM at once instead of a timeout), 1 with *be set. */
static __always_inline int frontend4(struct bpf_sock_addr *ctx, __u32 addr, struct backend_value **be)
{
	__u8 proto = ctx->protocol;
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return 0;
	struct svc_key key = { .addr = addr, .port = (__u16)ctx->user_port, .proto = proto };
	struct svc_value *svc = bpf_map_lookup_elem(&skiff_services, &key);
	if (!svc)
		return 0;
	if ((svc->flags & SVC_FLAG_HOST_NETNS) && !in_host_netns(ctx))
		return 0;
	if (svc->count == 0)
		return -1;
	struct backend_key bk = { .id = svc->id, .slot = pick_slot(ctx, svc, 0) };
	*be = bpf_map_lookup_elem(&skiff_backends, &bk);
	return *be ? 1 : 0;
}

/* remember4 records where an IPv4 (or IPv4-mapped) socket really went, for reverse. */
static __always_inline void remember4(struct bpf_sock_addr *ctx, __u32 svc_addr, struct backend_value *be)
{
	struct sock_nat nat = { .svc_addr = svc_addr, .svc_port = (__u16)ctx->user_port, .be_addr = be->addr, .be_port = be->port };
	__u64 cookie = bpf_get_socket_cookie(ctx);
	bpf_map_update_elem(&skiff_sock_nat, &cookie, &nat, BPF_ANY);
}

/* flow_sock reports a socket's service frontend: translated to backend be (verdict
 * FLOW_FORWARDED), or refused for want of one (FLOW_DROPPED). The socket has no source address
 * yet; its cgroup says whose it is. Addresses: IPv4 in the first word (family 4), or IPv6. */
static __always_inline void flow_sock(struct bpf_sock_addr *ctx, __u8 family, const __u32 *front, const __u32 *be,
				      __u16 be_port)
{
	struct flow_event *e = be ? flow_begin(FLOW_KIND_TRANSLATE, FLOW_FORWARDED, FLOW_REASON_SERVICE)
				  : flow_begin(FLOW_KIND_DROP, FLOW_DROPPED, FLOW_REASON_NO_BACKEND);
	if (!e)
		return;
	e->family = family;
	e->proto = (__u8)ctx->protocol;
	e->cgroup = bpf_get_current_cgroup_id();
	e->dport = be ? be_port : (__u16)ctx->user_port;
	e->orig_port = (__u16)ctx->user_port;
	if (family == 4) {
		e->orig[0] = front[0];
		e->dst[0] = be ? be[0] : front[0];
	} else {
		__builtin_memcpy(e->orig, front, 16);
		__builtin_memcpy(e->dst, be ? be : front, 16);
	}
	flow_end(e);
}

/* translate rewrites ctx's destination when it is an IPv4 service frontend. It returns 0 to
 * refuse, 1 to let the call go on. */
static __always_inline int translate(struct bpf_sock_addr *ctx)
{
	struct backend_value *be = 0;
	__u32 addr = ctx->user_ip4;
	int r = frontend4(ctx, addr, &be);
	if (r < 0)
		flow_sock(ctx, 4, &addr, 0, 0);
	if (r <= 0 || !be)
		return r < 0 ? 0 : 1;
	remember4(ctx, addr, be);
	flow_sock(ctx, 4, &addr, &be->addr, be->port);
	ctx->user_ip4 = be->addr;
	ctx->user_port = be->port;
	return 1;
}

/* v4mapped says whether an IPv6 address is ::ffff:a.b.c.d. */
static __always_inline int v4mapped(__u32 a0, __u32 a1, __u32 a2)
{
	return a0 == 0 && a1 == 0 && a2 == bpf_htonl(0xffff);
}

/* translate6 is translate for an IPv6 socket. */
static __always_inline int translate6(struct bpf_sock_addr *ctx)
{
	__u8 proto = ctx->protocol;
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return 1;
	__u32 a0 = ctx->user_ip6[0], a1 = ctx->user_ip6[1], a2 = ctx->user_ip6[2], a3 = ctx->user_ip6[3];
	if (v4mapped(a0, a1, a2)) {
		struct backend_value *be4 = 0;
		int r = frontend4(ctx, a3, &be4);
		if (r < 0)
			flow_sock(ctx, 4, &a3, 0, 0);
		if (r <= 0 || !be4)
			return r < 0 ? 0 : 1;
		remember4(ctx, a3, be4);
		flow_sock(ctx, 4, &a3, &be4->addr, be4->port);
		ctx->user_ip6[3] = be4->addr;
		ctx->user_port = be4->port;
		return 1;
	}
	struct svc6_key key = { .addr = { a0, a1, a2, a3 }, .port = (__u16)ctx->user_port, .proto = proto };
	struct svc_value *svc = bpf_map_lookup_elem(&skiff_services6, &key);
	if (!svc)
		return 1;
	if ((svc->flags & SVC_FLAG_HOST_NETNS) && !in_host_netns(ctx))
		return 1;
	if (svc->count == 0) {
		flow_sock(ctx, 6, key.addr, 0, 0);
		return 0;
	}
	struct backend_key bk = { .id = svc->id, .slot = pick_slot(ctx, svc, 1) };
	struct backend6_value *be = bpf_map_lookup_elem(&skiff_backends6, &bk);
	if (!be)
		return 1;
	struct sock_nat6 nat = { .svc_addr = { a0, a1, a2, a3 }, .svc_port = key.port, .be_port = be->port };
	nat.be_addr[0] = be->addr[0];
	nat.be_addr[1] = be->addr[1];
	nat.be_addr[2] = be->addr[2];
	nat.be_addr[3] = be->addr[3];
	__u64 cookie = bpf_get_socket_cookie(ctx);
	bpf_map_update_elem(&skiff_sock_nat6, &cookie, &nat, BPF_ANY);
	flow_sock(ctx, 6, nat.svc_addr, nat.be_addr, be->port);
	ctx->user_ip6[0] = be->addr[0];
	ctx->user_ip6[1] = be->addr[1];
	ctx->user_ip6[2] = be->addr[2];
	ctx->user_ip6[3] = be->addr[3];
	ctx->user_port = be->port;
	return 1;
}

/* reverse shows the service address instead of the backend's. */
static __always_inline int reverse(struct bpf_sock_addr *ctx)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	struct sock_nat *nat = bpf_map_lookup_elem(&skiff_sock_nat, &cookie);
	if (nat && nat->be_addr == ctx->user_ip4 && nat->be_port == (__u16)ctx->user_port) {
		ctx->user_ip4 = nat->svc_addr;
		ctx->user_port = nat->svc_port;
	}
	return 1;
}

/* reverse6 is reverse for an IPv6 socket (its IPv4-mapped peers included). */
static __always_inline int reverse6(struct bpf_sock_addr *ctx)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	__u32 a0 = ctx->user_ip6[0], a1 = ctx->user_ip6[1], a2 = ctx->user_ip6[2], a3 = ctx->user_ip6[3];
	__u16 port = (__u16)ctx->user_port;
	if (v4mapped(a0, a1, a2)) {
		struct sock_nat *nat = bpf_map_lookup_elem(&skiff_sock_nat, &cookie);
		if (nat && nat->be_addr == a3 && nat->be_port == port) {
			ctx->user_ip6[3] = nat->svc_addr;
			ctx->user_port = nat->svc_port;
		}
		return 1;
	}
	struct sock_nat6 *nat = bpf_map_lookup_elem(&skiff_sock_nat6, &cookie);
	if (nat && nat->be_addr[0] == a0 && nat->be_addr[1] == a1 && nat->be_addr[2] == a2 && nat->be_addr[3] == a3 &&
	    nat->be_port == port) {
		ctx->user_ip6[0] = nat->svc_addr[0];
		ctx->user_ip6[1] = nat->svc_addr[1];
		ctx->user_ip6[2] = nat->svc_addr[2];
		ctx->user_ip6[3] = nat->svc_addr[3];
		ctx->user_port = nat->svc_port;
	}
	return 1;
}

SEC("cgroup/connect4")
int skiff_connect4(struct bpf_sock_addr *ctx)
{
	return translate(ctx);
}

SEC("cgroup/sendmsg4")
int skiff_sendmsg4(struct bpf_sock_addr *ctx)
{
	return translate(ctx);
}

SEC("cgroup/recvmsg4")
int skiff_recvmsg4(struct bpf_sock_addr *ctx)
{
	return reverse(ctx);
}

SEC("cgroup/getpeername4")
int skiff_getpeername4(struct bpf_sock_addr *ctx)
{
	return reverse(ctx);
}

SEC("cgroup/connect6")
int skiff_connect6(struct bpf_sock_addr *ctx)
{
	return translate6(ctx);
}

SEC("cgroup/sendmsg6")
int skiff_sendmsg6(struct bpf_sock_addr *ctx)
{
	return translate6(ctx);
}

SEC("cgroup/recvmsg6")
int skiff_recvmsg6(struct bpf_sock_addr *ctx)
{
	return reverse6(ctx);
}

SEC("cgroup/getpeername6")
int skiff_getpeername6(struct bpf_sock_addr *ctx)
{
	return reverse6(ctx);
}

/* A socket's translation goes with it, so skiff_sock_nat holds exactly the live sockets that
 * were balanced (its occupancy is exported as a metric) instead of waiting for LRU eviction. */
SEC("cgroup/sock_release")
int skiff_sock_release(struct bpf_sock *sk)
{
	__u64 cookie = bpf_get_socket_cookie(sk);
	if (sk->family == 10 /* AF_INET6 */)
		bpf_map_delete_elem(&skiff_sock_nat6, &cookie);
	bpf_map_delete_elem(&skiff_sock_nat, &cookie); /* IPv4, or an IPv6 socket's IPv4-mapped peer */
	return 1;
}

/* The map layout version, readable from the object and from `bpftool prog`. */
const volatile __u32 skiff_map_version = SKIFF_MAP_VERSION;

char LICENSE[] SEC("license") = "Dual BSD/GPL";
