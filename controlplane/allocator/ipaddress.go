package allocator

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ManagedBy is the value of networkingv1.LabelManagedBy on the IPAddresses the ClusterIP
// allocator makes, as upstream's.
const ManagedBy = "ipallocator.k8s.io"

// NewIPAddress is the IPAddress that reserves ip for the Service namespace/name.
func NewIPAddress(ip netip.Addr, namespace, name string) *networkingv1.IPAddress {
	family := string(corev1.IPv4Protocol)
	if ip.Is6() {
		family = string(corev1.IPv6Protocol)
	}
	return &networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: ip.String(), Labels: map[string]string{
			networkingv1.LabelIPAddressFamily: family,
			networkingv1.LabelManagedBy:       ManagedBy,
		}},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: namespace, Name: name}},
	}
}

// RepairPlan is what one pass of the ClusterIP repair loop does.
type RepairPlan struct {
	// Create are the IPAddresses missing for Services' ClusterIPs (a Service stored before
	// IPAddresses were kept, or whose reservation was lost).
	Create []*networkingv1.IPAddress
	// Delete are the allocator's IPAddresses that no Service has held for two passes in a row
	// (one pass could race a Service being created: its address is reserved first).
	Delete []*networkingv1.IPAddress
	// DeleteLegacy are addresses whose legacy reservation can go: the Service that holds them
	// has its IPAddress (once Create has made it), or none has held them for two passes.
	DeleteLegacy []string
	// Conflicts name ClusterIPs whose IPAddress has another parent.
	Conflicts []string
	// Suspects are the orphans seen in this pass, for the next (addresses).
	Suspects map[string]bool
}

// PlanRepair compares the Services' ClusterIPs in ranges (the service CIDRs) with the
// IPAddresses and the legacy reservations (addresses) and returns what to mend; suspects is
// the previous pass's Suspects. It does no I/O.
func PlanRepair(services []*corev1.Service, addrs []*networkingv1.IPAddress, legacy []string, ranges []Range, suspects map[string]bool) RepairPlan {
	type parent struct{ namespace, name string }
	held := map[string]parent{}
	for _, svc := range services {
		ips := svc.Spec.ClusterIPs
		if len(ips) == 0 && svc.Spec.ClusterIP != "" {
			ips = []string{svc.Spec.ClusterIP}
		}
		for _, text := range ips {
			ip, err := netip.ParseAddr(text)
			if err != nil {
				continue // "None", or not an address
			}
			if slices.ContainsFunc(ranges, func(r Range) bool { _, ok := r.Offset(ip.String()); return ok }) {
				held[ip.String()] = parent{svc.Namespace, svc.Name}
			}
		}
	}
	byName := map[string]*networkingv1.IPAddress{}
	for _, a := range addrs {
		byName[a.Name] = a
	}
	plan := RepairPlan{Suspects: map[string]bool{}}
	for _, ip := range sortedKeys(held) {
		p := held[ip]
		a, ok := byName[ip]
		switch {
		case !ok:
			plan.Create = append(plan.Create, NewIPAddress(netip.MustParseAddr(ip), p.namespace, p.name))
		case !isParent(a, p.namespace, p.name):
			plan.Conflicts = append(plan.Conflicts, fmt.Sprintf("ClusterIP %s of Service %s/%s is held by IPAddress %s of %s", ip, p.namespace, p.name, ip, parentString(a)))
		}
	}
	for _, a := range addrs {
		if a.Labels[networkingv1.LabelManagedBy] != ManagedBy {
			continue // made by hand: it reserves its address, and stays
		}
		if p, ok := held[a.Name]; ok && isParent(a, p.namespace, p.name) {
			continue
		}
		if suspects[a.Name] {
			plan.Delete = append(plan.Delete, a)
		} else {
			plan.Suspects[a.Name] = true
		}
	}
	for _, ip := range legacy {
		if _, ok := held[ip]; ok {
			if _, exists := byName[ip]; exists || slices.ContainsFunc(plan.Create, func(a *networkingv1.IPAddress) bool { return a.Name == ip }) {
				plan.DeleteLegacy = append(plan.DeleteLegacy, ip)
			}
			continue
		}
		if suspects["legacy:"+ip] {
			plan.DeleteLegacy = append(plan.DeleteLegacy, ip)
		} else {
			plan.Suspects["legacy:"+ip] = true
		}
	}
	return plan
}

func isParent(a *networkingv1.IPAddress, namespace, name string) bool {
	r := a.Spec.ParentRef
	return r != nil && r.Group == "" && r.Resource == "services" && r.Namespace == namespace && r.Name == name
}

func parentString(a *networkingv1.IPAddress) string {
	if r := a.Spec.ParentRef; r != nil {
		return fmt.Sprintf("%s.%s %s/%s", r.Resource, r.Group, r.Namespace, r.Name)
	}
	return "no parent"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
