package policy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

func nsSel(name string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": name}}
}

func cnpPod(namespace, name string) *cnp.NamespacedPod {
	return &cnp.NamespacedPod{NamespaceSelector: *nsSel(namespace), PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": name}}}
}

func tcpPorts(from, to int32) []cnp.ClusterNetworkPolicyProtocol {
	p := &cnp.Port{Number: from}
	if to != from {
		p = &cnp.Port{Range: &cnp.PortRange{Start: from, End: to}}
	}
	return []cnp.ClusterNetworkPolicyProtocol{{TCP: &cnp.ClusterNetworkPolicyProtocolTCP{DestinationPort: p}}}
}

func ingressCNP(name string, tier cnp.Tier, prio int32, subject cnp.ClusterNetworkPolicySubject, rules ...cnp.ClusterNetworkPolicyIngressRule) *ClusterNetworkPolicy {
	return &ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: cnp.ClusterNetworkPolicySpec{Tier: tier, Priority: prio, Subject: subject, Ingress: rules}}
}

func from(action cnp.ClusterNetworkPolicyRuleAction, peer cnp.ClusterNetworkPolicyIngressPeer, protocols []cnp.ClusterNetworkPolicyProtocol) cnp.ClusterNetworkPolicyIngressRule {
	return cnp.ClusterNetworkPolicyIngressRule{Action: action, From: []cnp.ClusterNetworkPolicyIngressPeer{peer}, Protocols: protocols}
}

const (
	accept = cnp.ClusterNetworkPolicyRuleActionAccept
	deny   = cnp.ClusterNetworkPolicyRuleActionDeny
	pass   = cnp.ClusterNetworkPolicyRuleActionPass
)

// Upstream's tiers, each case a connection to a pod with what decides it.
func TestClusterNetworkPolicyTiers(t *testing.T) {
	everyone := cnp.ClusterNetworkPolicyIngressPeer{Namespaces: &metav1.LabelSelector{}}
	fromY := cnp.ClusterNetworkPolicyIngressPeer{Namespaces: nsSel("y")}
	// x/a: a NetworkPolicy admits y's pods on TCP 80.
	allowY := np("x", "allow-y", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "a"),
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: nsSel("y")}},
			Ports: []networkingv1.NetworkPolicyPort{port(intstr.FromInt32(80), corev1.ProtocolTCP)}}}})
	cnps := []*ClusterNetworkPolicy{
		// Admin, priority 10 on x/a: Pass y's TCP 80-81 to the NetworkPolicy, then Deny
		// everyone (the second rule of the same policy).
		ingressCNP("admin-a", cnp.AdminTier, 10, cnp.ClusterNetworkPolicySubject{Pods: cnpPod("x", "a")},
			from(pass, fromY, tcpPorts(80, 81)), from(deny, everyone, nil)),
		// Admin, priority 5 (before admin-a) on all of x: Deny z/b on TCP 1-1023, then Accept
		// z/b on TCP 80 — a longer port prefix than the Deny's, ranked after it: the Deny
		// must win (the compiler gives the /16 entry the covering /6's better rank).
		ingressCNP("admin-x", cnp.AdminTier, 5, cnp.ClusterNetworkPolicySubject{Namespaces: nsSel("x")},
			from(deny, cnp.ClusterNetworkPolicyIngressPeer{Pods: cnpPod("z", "b")}, tcpPorts(1, 1023)),
			from(accept, cnp.ClusterNetworkPolicyIngressPeer{Pods: cnpPod("z", "b")}, tcpPorts(80, 80))),
		// Baseline on x: Accept y on TCP 80, Deny everyone else.
		ingressCNP("baseline-x", cnp.BaselineTier, 1, cnp.ClusterNetworkPolicySubject{Namespaces: nsSel("x")},
			from(accept, fromY, tcpPorts(80, 80)), from(deny, everyone, nil)),
	}
	res, errs := CompileWithCluster(NewAllocator(), []*networkingv1.NetworkPolicy{allowY}, cnps, pods, namespaces, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	rule := func(v TierValue) string {
		if v == 0 {
			return ""
		}
		r := res.TierRules[v.Rank()]
		return r.Policy + "/" + r.Rule + " " + r.Action.String()
	}
	for _, c := range []struct {
		from, to string
		port     uint16
		allowed  bool
		reason   Reason
		rule     string // the tier rule that decided, or passed it on
	}{
		// Pass defers to the NetworkPolicy, which admits y on 80 …
		{"y/b", "x/a", 80, true, Admitted, "admin-a/ingress[0] Pass"},
		// … and on 81 the NetworkPolicy isolates and admits nothing: denied by it.
		{"y/b", "x/a", 81, false, NoRule, "admin-a/ingress[0] Pass"},
		// Not passed on: the Admin tier's Deny decides, before any NetworkPolicy.
		{"y/b", "x/a", 82, false, AdminDeny, "admin-a/ingress[1] Deny"},
		{"x/b", "x/a", 80, false, AdminDeny, "admin-a/ingress[1] Deny"},
		// Priority: admin-x (5) before admin-a (10); within admin-x the first rule (Deny
		// 1-1023) before the second (Accept 80), though the second's prefix is longer.
		{"z/b", "x/a", 80, false, AdminDeny, "admin-x/ingress[0] Deny"},
		{"z/b", "x/c", 80, false, AdminDeny, "admin-x/ingress[0] Deny"},
		{"z/b", "x/c", 2000, false, BaselineDeny, "baseline-x/ingress[1] Deny"},
		// Baseline applies where no NetworkPolicy selects the pod (x/c): y on 80 accepted,
		// the rest denied …
		{"y/c", "x/c", 80, true, BaselineAccept, "baseline-x/ingress[0] Accept"},
		{"y/c", "x/c", 81, false, BaselineDeny, "baseline-x/ingress[1] Deny"},
		// (Not where one does: x/a's passed traffic above was decided by allow-y.) Pods no
		// policy selects at all: allowed.
		{"x/a", "y/c", 80, true, NotIsolated, ""},
	} {
		v := res.Decide(podIP[c.to], Ingress, podIP[c.from], TCP, c.port)
		got := rule(v.Tier)
		if v.PassedBy != 0 {
			got = rule(v.PassedBy)
		}
		if v.Allowed != c.allowed || v.Reason != c.reason || got != c.rule {
			t.Errorf("%s -> %s:%d: allowed %v reason %d rule %q; want allowed %v reason %d rule %q", c.from, c.to, c.port, v.Allowed, v.Reason, got, c.allowed, c.reason, c.rule)
		}
	}
}

func TestClusterNetworkPolicyErrors(t *testing.T) {
	bad := []*ClusterNetworkPolicy{
		ingressCNP("odd-tier", "Middle", 1, cnp.ClusterNetworkPolicySubject{Namespaces: nsSel("x")}),
		ingressCNP("baseline-pass", cnp.BaselineTier, 1, cnp.ClusterNetworkPolicySubject{Namespaces: nsSel("x")},
			from(pass, cnp.ClusterNetworkPolicyIngressPeer{Namespaces: nsSel("y")}, nil)),
		{ObjectMeta: metav1.ObjectMeta{Name: "nodes"}, Spec: cnp.ClusterNetworkPolicySpec{Tier: cnp.AdminTier, Subject: cnp.ClusterNetworkPolicySubject{Namespaces: nsSel("x")},
			Egress: []cnp.ClusterNetworkPolicyEgressRule{{Action: deny, To: []cnp.ClusterNetworkPolicyEgressPeer{{Nodes: &metav1.LabelSelector{}}}}}}},
	}
	_, errs := CompileWithCluster(NewAllocator(), nil, bad, pods, namespaces, nil)
	var all []string
	for _, e := range errs {
		all = append(all, e.Error())
	}
	joined := strings.Join(all, "\n")
	for _, want := range []string{
		`clusternetworkpolicy odd-tier: tier "Middle" is neither Admin nor Baseline; ignored`,
		`clusternetworkpolicy baseline-pass: rule ingress[0]: action "Pass" is not one of the tier's; ignored`,
		`clusternetworkpolicy nodes: egress rule egress[0]: nodes and domainNames peers are not supported; those peers match nothing`,
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("no error %q in\n%s", want, joined)
		}
	}
}
