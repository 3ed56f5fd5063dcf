// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Socket-level service load balancing, attached to the cgroup under which the node's pods
 * run: connect() and unconnected sendmsg() to a Service frontend are sent straight to one of
 * its backends, so no packet ever carries the ClusterIP and no per-packet NAT or conntrack is
 * needed; getpeername() and recvmsg() show the application the address it asked for. Pods'
 * hostPorts are frontends too, those on 127.0.0.1 only in the node's own network namespace. */
#include "skiff.h"

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

static __always_inline __u32 pick_slot(struct bpf_sock_addr *ctx, struct svc_value *svc)
{
	__u32 slot = (bpf_get_prandom_u32() % svc->count) + 1;
	if (svc->flags & SVC_FLAG_MAGLEV) {
		/* A socket has no source port yet: hash the client (its netns) and the socket. */
		__u64 c = bpf_get_netns_cookie(ctx) ^ bpf_get_socket_cookie(ctx);
		__u32 m = pick_maglev(svc->id, flow_hash((__u32)c, (__u32)(c >> 32), 0, (__u16)ctx->user_port, (__u8)ctx->protocol));
		if (m >= 1 && m <= svc->count)
			slot = m;
	}
	return sticky_slot(bpf_get_netns_cookie(ctx), svc, slot);
}

/* translate rewrites ctx's destination when it is a service frontend. It returns 0 to refuse
 * (a service without endpoints: the application gets EPERM at once instead of a timeout), 1
 * to let the call go on. */
static __always_inline int translate(struct bpf_sock_addr *ctx)
{
	__u8 proto = ctx->protocol;
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return 1;
	struct svc_key key = { .addr = ctx->user_ip4, .port = (__u16)ctx->user_port, .proto = proto };
	struct svc_value *svc = bpf_map_lookup_elem(&skiff_services, &key);
	if (!svc)
		return 1;
	if ((svc->flags & SVC_FLAG_HOST_NETNS) && !in_host_netns(ctx))
		return 1;
	if (svc->count == 0)
		return 0;
	struct backend_key bk = { .id = svc->id, .slot = pick_slot(ctx, svc) };
	struct backend_value *be = bpf_map_lookup_elem(&skiff_backends, &bk);
	if (!be)
		return 1;
	struct sock_nat nat = { .svc_addr = key.addr, .svc_port = key.port, .be_addr = be->addr, .be_port = be->port };
	__u64 cookie = bpf_get_socket_cookie(ctx);
	bpf_map_update_elem(&skiff_sock_nat, &cookie, &nat, BPF_ANY);
	ctx->user_ip4 = be->addr;
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

/* A socket's translation goes with it, so skiff_sock_nat holds exactly the live sockets that
 * were balanced (its occupancy is exported as a metric) instead of waiting for LRU eviction. */
SEC("cgroup/sock_release")
int skiff_sock_release(struct bpf_sock *sk)
{
	__u64 cookie = bpf_get_socket_cookie(sk);
	bpf_map_delete_elem(&skiff_sock_nat, &cookie);
	return 1;
}

/* The map layout version, readable from the object and from `bpftool prog`. */
const volatile __u32 skiff_map_version = SKIFF_MAP_VERSION;

char LICENSE[] SEC("license") = "Dual BSD/GPL";
