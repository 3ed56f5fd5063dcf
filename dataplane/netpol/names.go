package netpol

import (
	"net/netip"
	"strings"

	"github.com/skiff-sh/skiff/dataplane/policy"
)

// names is what flow events are named from, as of the last sync: read without the
// enforcer's lock, so naming a flow never waits for a compilation.
type names struct {
	res      *policy.Result
	policies []string // rule values' indices
}

// PodAt is the pod with address addr, any node's, with its labels: as of the last
// compilation, or since then for another node's pod that came or went.
func (e *Enforcer) PodAt(addr netip.Addr) (ref PodRef, labels map[string]string, ok bool) {
	if n := e.names.Load(); n != nil {
		if name, found := n.res.Pods[addr]; found {
			ref, ok = parseRef(name), true
		}
	}
	views := e.views.Load()
	if views == nil {
		return ref, nil, ok
	}
	views.mu.Lock()
	defer views.mu.Unlock()
	if owner, found := views.owner[addr]; found {
		ref, ok = owner, true
	}
	if ok {
		labels = views.m[ref].Labels
	}
	return ref, labels, ok
}

// PolicyName is the policy a rule value's index names ("" if unknown).
func (e *Enforcer) PolicyName(i uint32) string {
	n := e.names.Load()
	if n == nil || int(i) >= len(n.policies) {
		return ""
	}
	return n.policies[i]
}

// Isolating are the policies that select endpoint (a pod of this node) in dir: the
// enforced ones, or with audit the audit-mode ones.
func (e *Enforcer) Isolating(endpoint netip.Addr, dir policy.Direction, audit bool) []string {
	n := e.names.Load()
	if n == nil {
		return nil
	}
	ep := n.res.Endpoints[endpoint]
	switch {
	case dir == policy.Ingress && audit:
		return ep.AuditIngressPolicies
	case dir == policy.Ingress:
		return ep.IngressPolicies
	case audit:
		return ep.AuditEgressPolicies
	default:
		return ep.EgressPolicies
	}
}

// TierRule is the ClusterNetworkPolicy and rule of a tier rule's rank ("" if unknown).
func (e *Enforcer) TierRule(rank uint32) (policyName, rule string) {
	n := e.names.Load()
	if n == nil || int(rank) >= len(n.res.TierRules) {
		return "", ""
	}
	r := n.res.TierRules[rank]
	return r.Policy, r.Rule
}

func parseRef(name string) PodRef {
	ns, n, _ := strings.Cut(name, "/")
	return PodRef{Namespace: ns, Name: n}
}
