// Package lbipam gives LoadBalancer Services their addresses, as MetalLB's controller and
// Cilium's LB IPAM do: from pools (skiff server --loadbalancer-cidr and the loadBalancerPools
// of kube-system/skiff-bgp), honouring spec.loadBalancerIP and loadBalancerClass, refusing an
// address two Services ask for, releasing it when the Service goes or stops being a
// LoadBalancer, and writing it to status.loadBalancer.ingress. The nodes advertise the
// addresses over BGP and their eBPF programs answer them (bgp, dataplane).
package lbipam

import (
	"fmt"
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"

	bgpconfig "github.com/skiff-sh/skiff/bgp/config"
)

// Class is the loadBalancerClass skiff serves; Services without a class are skiff's too.
const Class = bgpconfig.LoadBalancerClass

// Want is one Service as the allocator sees it.
type Want struct {
	Key string // namespace/name
	// Order decides who keeps a contested address: the lower (older) first.
	Order string
	// Requested is spec.loadBalancerIP (invalid: none).
	Requested netip.Addr
	// Current is the address in its status now (invalid: none).
	Current netip.Addr
}

// Result is the allocator's decision for one Service: its address, or why it has none.
type Result struct {
	Addr netip.Addr
	Err  error
}

// Allocate decides every Service's address at once: a Service keeps its current address
// while that is valid (in a pool, not another's, what it asked for if it asked); then, in
// order, requests are granted when free and in a pool, and the others get the lowest free
// address of the first pool with one. Pure: the same inputs give the same answer.
func Allocate(pools []netip.Prefix, wants []Want) map[string]Result {
	sort.Slice(wants, func(i, j int) bool {
		if wants[i].Order != wants[j].Order {
			return wants[i].Order < wants[j].Order
		}
		return wants[i].Key < wants[j].Key
	})
	inPool := func(a netip.Addr) bool {
		for _, p := range pools {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	taken := map[netip.Addr]string{}
	out := map[string]Result{}
	// First, keep what is held and still right: a running Service never loses its address
	// to a newer one's request.
	for _, w := range wants {
		if w.Current.IsValid() && inPool(w.Current) && (!w.Requested.IsValid() || w.Requested == w.Current) {
			if _, dup := taken[w.Current]; !dup {
				taken[w.Current] = w.Key
				out[w.Key] = Result{Addr: w.Current}
			}
		}
	}
	for _, w := range wants {
		if _, done := out[w.Key]; done {
			continue
		}
		if w.Requested.IsValid() {
			switch owner, busy := taken[w.Requested]; {
			case !inPool(w.Requested):
				out[w.Key] = Result{Err: fmt.Errorf("loadBalancerIP %s is in no LoadBalancer pool (%s)", w.Requested, poolList(pools))}
			case busy:
				out[w.Key] = Result{Err: fmt.Errorf("loadBalancerIP %s is already allocated to %s", w.Requested, owner)}
			default:
				taken[w.Requested] = w.Key
				out[w.Key] = Result{Addr: w.Requested}
			}
			continue
		}
		a, ok := lowestFree(pools, taken)
		if !ok {
			out[w.Key] = Result{Err: fmt.Errorf("no free address in the LoadBalancer pools (%s)", poolList(pools))}
			continue
		}
		taken[a] = w.Key
		out[w.Key] = Result{Addr: a}
	}
	return out
}

// lowestFree is the lowest address of the first pool with one free. An IPv4 pool of more
// than two addresses leaves out its network and broadcast addresses, which some clients
// refuse; an IPv6 one its subnet-router anycast address (the all-zero host, RFC 4291).
func lowestFree(pools []netip.Prefix, taken map[netip.Addr]string) (netip.Addr, bool) {
	for _, p := range pools {
		first, last := p.Addr(), lastAddr(p)
		switch {
		case p.Addr().Is4() && p.Bits() < 31:
			first, last = first.Next(), last.Prev()
		case p.Addr().Is6() && p.Bits() < 127:
			first = first.Next()
		}
		for a := first; a.IsValid() && !last.Less(a); a = a.Next() {
			if _, busy := taken[a]; !busy {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}

// lastAddr is the highest address of p (either family).
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for bit := p.Bits(); bit < len(b)*8; bit++ {
		b[bit/8] |= 0x80 >> (bit % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func poolList(pools []netip.Prefix) string {
	if len(pools) == 0 {
		return "none configured: skiff server --loadbalancer-cidr, or loadBalancerPools in kube-system/skiff-bgp"
	}
	s := ""
	for i, p := range pools {
		if i > 0 {
			s += ", "
		}
		s += p.String()
	}
	return s
}

// Ours says whether skiff allocates for svc: a LoadBalancer without a class or of skiff's.
func Ours(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && (svc.Spec.LoadBalancerClass == nil || *svc.Spec.LoadBalancerClass == Class)
}
