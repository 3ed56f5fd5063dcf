package policy

import (
	"fmt"
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// ClusterNetworkPolicies (policy.networking.k8s.io, sigs.k8s.io/network-policy-api) are
// compiled into the same maps as NetworkPolicies, in key spaces of their own: a rule's
// direction carries its tier (AdminTier, BaselineTier), and its value is the rule's rank and
// action, not a policy index.
//
// The semantics are upstream's: for a connection at a pod, the Admin tier decides first —
// the first rule that matches, in the order of policy priority (lower first) and of rules
// within a policy, Accepts or Denies it, or Passes it on; then the pod's NetworkPolicies, if
// any select it in that direction; then, only if none do, the Baseline tier the same way;
// then it is allowed. Policies of equal priority are ordered by name (upstream leaves the
// order to the implementation).
//
// The datapath finds the first matching rule with the rules map's longest-prefix lookups:
// the compiler gives each entry the best (lowest) rank of itself and of every entry of the
// same endpoint, peer and protocol whose port prefix covers it, so the longest prefix
// matching a port holds the best rank among all that match; the program takes the lowest of
// its lookups (the peer as anyone, by pod identity and by CIDR identity; the protocol and
// any protocol).

// ClusterNetworkPolicy is what the compiler takes: the v1beta1 API type (v1alpha2 is the
// same schema, served beside it).
type ClusterNetworkPolicy = cnpv1beta1.ClusterNetworkPolicy

// Tiers of ClusterNetworkPolicy rules, added to a Key's Direction (as the programs'
// POL_ADMIN and POL_BASELINE).
const (
	AdminTier    Direction = 8
	BaselineTier Direction = 16
)

// Action is what a ClusterNetworkPolicy rule does with the connections it matches.
type Action uint8

// Actions, as the programs' CNP_ACCEPT, CNP_DENY, CNP_PASS.
const (
	Accept Action = 1
	Deny   Action = 2
	Pass   Action = 3
)

func (a Action) String() string {
	return [...]string{"", "Accept", "Deny", "Pass"}[a&3]
}

// TierValue is a tier entry's map value: rank<<2 | action, so the lowest value is the first
// rule in evaluation order.
type TierValue uint32

// Rank is the rule's place in its tier's evaluation order (1 first).
func (v TierValue) Rank() uint32 { return uint32(v) >> 2 }

// Action is the rule's action.
func (v TierValue) Action() Action { return Action(v & 3) }

// TierRule names a rank: the policy and the rule.
type TierRule struct {
	Policy string // the ClusterNetworkPolicy's name
	Rule   string // the rule's name, or "ingress[i]" / "egress[i]"
	Action Action
}

// clusterBlocks are the CIDRs ClusterNetworkPolicies name, as ipBlocks without excepts.
func clusterBlocks(cnps []*ClusterNetworkPolicy) []*networkingv1.IPBlock {
	var out []*networkingv1.IPBlock
	for _, c := range cnps {
		for _, r := range c.Spec.Egress {
			for _, p := range r.To {
				for _, n := range p.Networks {
					out = append(out, &networkingv1.IPBlock{CIDR: string(n)})
				}
			}
		}
	}
	return out
}

// compileCluster adds the ClusterNetworkPolicies' entries and endpoints' tiers to res.
func compileCluster(res *Result, x *podIndex, infos, locals []*podInfo, cnps []*ClusterNetworkPolicy) []error {
	if len(cnps) == 0 {
		return nil
	}
	var errs []error
	sorted := append([]*ClusterNetworkPolicy(nil), cnps...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Spec.Tier != b.Spec.Tier {
			return a.Spec.Tier < b.Spec.Tier
		}
		if a.Spec.Priority != b.Spec.Priority {
			return a.Spec.Priority < b.Spec.Priority
		}
		return a.Name < b.Name
	})
	if res.TierEntries == nil {
		res.TierEntries = map[Key]TierValue{}
	}
	res.TierRules = []TierRule{{}} // rank 0 is none
	for _, c := range sorted {
		what := "clusternetworkpolicy " + c.Name
		var tier Direction
		switch c.Spec.Tier {
		case cnpv1beta1.AdminTier:
			tier = AdminTier
		case cnpv1beta1.BaselineTier:
			tier = BaselineTier
		default:
			errs = append(errs, fmt.Errorf("%s: tier %q is neither Admin nor Baseline; ignored", what, c.Spec.Tier))
			continue
		}
		subjects, err := clusterSubjects(x, locals, c.Spec.Subject)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: subject: %w", what, err))
			continue
		}
		add := func(dir Direction, i int, name string, action cnpv1beta1.ClusterNetworkPolicyRuleAction, pr peers, protocols []cnpv1beta1.ClusterNetworkPolicyProtocol) {
			act := map[cnpv1beta1.ClusterNetworkPolicyRuleAction]Action{cnpv1beta1.ClusterNetworkPolicyRuleActionAccept: Accept,
				cnpv1beta1.ClusterNetworkPolicyRuleActionDeny: Deny, cnpv1beta1.ClusterNetworkPolicyRuleActionPass: Pass}[action]
			if act == 0 || (act == Pass && tier == BaselineTier) {
				errs = append(errs, fmt.Errorf("%s: rule %s: action %q is not one of the tier's; ignored", what, ruleName(dir, i, name), action))
				return
			}
			if name == "" {
				name = ruleName(dir, i, "")
			}
			res.TierRules = append(res.TierRules, TierRule{Policy: c.Name, Rule: name, Action: act})
			value := TierValue(uint32(len(res.TierRules)-1)<<2 | uint32(act))
			ports := clusterPorts(protocols)
			for _, pi := range subjects {
				for _, ip := range pi.IPs {
					ep := res.Endpoints[ip]
					ep.Pod = pi.Namespace + "/" + pi.Name
					ep.setTier(dir|tier, c.Name)
					res.Endpoints[ip] = ep
				}
				errs = append(errs, ruleKeys(infos, what, pi, dir|tier, pr, ports, func(k Key) {
					if old, ok := res.TierEntries[k]; !ok || value < old {
						res.TierEntries[k] = value
					}
				})...)
			}
		}
		// A direction without rules matches nothing there: the next tier decides.
		for i, r := range c.Spec.Ingress {
			pr, perr := clusterPeers(res, x, r.From, nil)
			if perr != nil {
				errs = append(errs, fmt.Errorf("%s: ingress rule %s: %w", what, ruleName(Ingress, i, r.Name), perr))
				continue
			}
			add(Ingress, i, r.Name, r.Action, pr, r.Protocols)
		}
		for i, r := range c.Spec.Egress {
			var nets []cnpv1beta1.CIDR
			var peersIn []cnpv1beta1.ClusterNetworkPolicyIngressPeer
			for _, p := range r.To {
				nets = append(nets, p.Networks...)
				if p.Nodes != nil || len(p.DomainNames) > 0 {
					errs = append(errs, fmt.Errorf("%s: egress rule %s: nodes and domainNames peers are not supported; those peers match nothing", what, ruleName(Egress, i, r.Name)))
				}
				if p.Namespaces != nil || p.Pods != nil {
					peersIn = append(peersIn, cnpv1beta1.ClusterNetworkPolicyIngressPeer{Namespaces: p.Namespaces, Pods: p.Pods})
				}
			}
			pr, perr := clusterPeers(res, x, peersIn, nets)
			if perr != nil {
				errs = append(errs, fmt.Errorf("%s: egress rule %s: %w", what, ruleName(Egress, i, r.Name), perr))
				continue
			}
			add(Egress, i, r.Name, r.Action, pr, r.Protocols)
		}
	}
	inheritCoveringRanks(res.TierEntries)
	return errs
}

func ruleName(dir Direction, i int, name string) string {
	if name != "" {
		return name
	}
	if dir == Ingress {
		return fmt.Sprintf("ingress[%d]", i)
	}
	return fmt.Sprintf("egress[%d]", i)
}

// setTier marks the endpoint as selected by a ClusterNetworkPolicy of tier in dir.
func (ep *Endpoint) setTier(d Direction, name string) {
	switch d {
	case Ingress | AdminTier:
		ep.AdminIngress = true
	case Egress | AdminTier:
		ep.AdminEgress = true
	case Ingress | BaselineTier:
		ep.BaselineIngress = true
	case Egress | BaselineTier:
		ep.BaselineEgress = true
	}
	for _, n := range ep.ClusterPolicies {
		if n == name {
			return
		}
	}
	ep.ClusterPolicies = append(ep.ClusterPolicies, name)
}

// clusterSubjects are the node's pods a subject selects.
func clusterSubjects(x *podIndex, locals []*podInfo, s cnpv1beta1.ClusterNetworkPolicySubject) ([]*podInfo, error) {
	nsSel, podSel := labels.Selector(nil), labels.Everything()
	var err error
	switch {
	case s.Namespaces != nil:
		if nsSel, err = metav1.LabelSelectorAsSelector(s.Namespaces); err != nil {
			return nil, err
		}
	case s.Pods != nil:
		if nsSel, err = metav1.LabelSelectorAsSelector(&s.Pods.NamespaceSelector); err != nil {
			return nil, err
		}
		if podSel, err = metav1.LabelSelectorAsSelector(&s.Pods.PodSelector); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("neither namespaces nor pods")
	}
	var out []*podInfo
	for _, pi := range locals {
		if nsSel.Matches(pi.nsLabels) && podSel.Matches(labels.Set(pi.Labels)) {
			out = append(out, pi)
		}
	}
	return out, nil
}

// clusterPeers resolves a rule's peers: pods by namespace or by namespace and pod selectors,
// and networks (their CIDR identities).
func clusterPeers(res *Result, x *podIndex, from []cnpv1beta1.ClusterNetworkPolicyIngressPeer, networks []cnpv1beta1.CIDR) (peers, error) {
	pr := peers{pods: map[Identity]*podInfo{}, cidr: map[Identity]bool{}}
	for _, p := range from {
		var np networkingv1.NetworkPolicyPeer
		switch {
		case p.Namespaces != nil:
			np = networkingv1.NetworkPolicyPeer{NamespaceSelector: p.Namespaces}
		case p.Pods != nil:
			np = networkingv1.NetworkPolicyPeer{NamespaceSelector: &p.Pods.NamespaceSelector, PodSelector: &p.Pods.PodSelector}
		default:
			continue
		}
		matched, err := selectPods(x, "", np)
		if err != nil {
			return pr, err
		}
		for _, pi := range matched {
			pr.pods[pi.id] = pi
		}
	}
	for _, n := range networks {
		pfx, err := netip.ParsePrefix(string(n))
		if err != nil {
			return pr, fmt.Errorf("network %q: %w", n, err)
		}
		for _, id := range cidrIdentities(res, &networkingv1.IPBlock{CIDR: pfx.String()}) {
			pr.cidr[id] = true
		}
	}
	return pr, nil
}

// clusterPorts turns a rule's protocols into NetworkPolicy ports (none: every protocol and
// port). A named port is looked up in each protocol: it matches where the destination pod
// names a port so, whatever its protocol.
func clusterPorts(protocols []cnpv1beta1.ClusterNetworkPolicyProtocol) []networkingv1.NetworkPolicyPort {
	var out []networkingv1.NetworkPolicyPort
	for _, p := range protocols {
		if p.DestinationNamedPort != "" {
			for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP} {
				out = append(out, networkingv1.NetworkPolicyPort{Protocol: ptr.To(proto), Port: ptr.To(intstr.FromString(p.DestinationNamedPort))})
			}
		}
		for _, pp := range []struct {
			proto corev1.Protocol
			port  *cnpv1beta1.Port
			set   bool
		}{
			{corev1.ProtocolTCP, portOf(p.TCP), p.TCP != nil},
			{corev1.ProtocolUDP, portOfUDP(p.UDP), p.UDP != nil},
			{corev1.ProtocolSCTP, portOfSCTP(p.SCTP), p.SCTP != nil},
		} {
			if !pp.set {
				continue
			}
			np := networkingv1.NetworkPolicyPort{Protocol: ptr.To(pp.proto)}
			switch {
			case pp.port == nil:
			case pp.port.Range != nil:
				np.Port, np.EndPort = ptr.To(intstr.FromInt32(pp.port.Range.Start)), ptr.To(pp.port.Range.End)
			default:
				np.Port = ptr.To(intstr.FromInt32(pp.port.Number))
			}
			out = append(out, np)
		}
	}
	return out
}

func portOf(p *cnpv1beta1.ClusterNetworkPolicyProtocolTCP) *cnpv1beta1.Port {
	if p == nil {
		return nil
	}
	return p.DestinationPort
}

func portOfUDP(p *cnpv1beta1.ClusterNetworkPolicyProtocolUDP) *cnpv1beta1.Port {
	if p == nil {
		return nil
	}
	return p.DestinationPort
}

func portOfSCTP(p *cnpv1beta1.ClusterNetworkPolicyProtocolSCTP) *cnpv1beta1.Port {
	if p == nil {
		return nil
	}
	return p.DestinationPort
}

// inheritCoveringRanks gives each entry the best value of itself and of the entries of the
// same endpoint, direction, protocol and peer whose port prefix covers its own, so that the
// longest-prefix lookup of a port finds the first matching rule.
func inheritCoveringRanks(entries map[Key]TierValue) {
	for k, v := range entries {
		best := v
		for bits := uint8(0); bits < k.PortBits; bits++ {
			c := k
			c.PortBits = bits
			c.Port = k.Port &^ (uint16(1)<<(16-bits) - 1)
			if bits == 0 {
				c.Port = 0
			}
			if cv, ok := entries[c]; ok && cv < best {
				best = cv
			}
		}
		entries[k] = best
	}
}

// ClusterSelectorKeys are the pod label keys ClusterNetworkPolicies' pod selectors name (for
// identities, as SelectorKeys for NetworkPolicies).
func ClusterSelectorKeys(cnps []*ClusterNetworkPolicy, keys map[string]bool) map[string]bool {
	add := func(sel *metav1.LabelSelector) {
		for k := range sel.MatchLabels {
			keys[k] = true
		}
		for _, r := range sel.MatchExpressions {
			keys[r.Key] = true
		}
	}
	for _, c := range cnps {
		if c.Spec.Subject.Pods != nil {
			add(&c.Spec.Subject.Pods.PodSelector)
		}
		for _, r := range c.Spec.Ingress {
			for _, p := range r.From {
				if p.Pods != nil {
					add(&p.Pods.PodSelector)
				}
			}
		}
		for _, r := range c.Spec.Egress {
			for _, p := range r.To {
				if p.Pods != nil {
					add(&p.Pods.PodSelector)
				}
			}
		}
	}
	return keys
}
