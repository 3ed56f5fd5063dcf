package policy

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func auditNP(ns, name string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
	p := np(ns, name, spec)
	p.Annotations = map[string]string{ModeAnnotation: "audit"}
	return p
}

// An audit-mode policy isolates nothing and admits nothing: every verdict is the one without
// it, and what it alone would have dropped is marked Audited.
func TestAuditModeDropsNothing(t *testing.T) {
	staged := auditNP("x", "staged", networkingv1.NetworkPolicySpec{
		PodSelector: *sel("pod", "b"),
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "a")}},
			Ports: []networkingv1.NetworkPolicyPort{port(intstr.FromInt32(80), corev1.ProtocolTCP)}}},
	})
	// An enforced deny-all on x/c beside an audit policy that would admit everyone: the
	// audit policy admits nothing.
	deny := np("x", "deny-c", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "c")})
	openAudit := auditNP("x", "would-open-c", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "c"),
		Ingress: []networkingv1.NetworkPolicyIngressRule{{}}})
	res, errs := Compile(NewAllocator(), []*networkingv1.NetworkPolicy{staged, deny, openAudit}, pods, namespaces, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	xb := res.Endpoints[podIP["x/b"]]
	if xb.Ingress || !xb.AuditIngress || !slices.Equal(xb.AuditIngressPolicies, []string{"x/staged"}) || xb.AuditEgress {
		t.Fatalf("x/b: %+v, want open ingress audited by x/staged", xb)
	}
	for _, c := range []struct {
		from     string
		port     uint16
		audited  bool
		admitted bool
	}{
		{"x/a", 80, false, true}, // the staged policy would admit it
		{"x/a", 81, true, true},  // … not on another port
		{"y/a", 80, true, true},  // a podSelector alone means the policy's namespace
		{"x/c", 80, true, true},
		{"z/b", 443, true, true},
	} {
		v := res.Decide(podIP["x/b"], Ingress, podIP[c.from], TCP, c.port)
		if v.Allowed != c.admitted || v.Audited != c.audited || v.Reason != NotIsolated {
			t.Errorf("%s -> x/b:%d: %+v, want allowed %v audited %v", c.from, c.port, v, c.admitted, c.audited)
		}
	}
	// Egress is not audited: the staged policy has ingress only.
	if v := res.Decide(podIP["x/b"], Egress, podIP["z/c"], TCP, 80); !v.Allowed || v.Audited {
		t.Errorf("x/b egress: %+v", v)
	}
	// The enforced deny-all decides; the audit policy's allow-all does not open x/c.
	if v := res.Decide(podIP["x/c"], Ingress, podIP["x/a"], TCP, 80); v.Allowed || v.Reason != NoRule {
		t.Errorf("x/a -> x/c under an enforced deny-all and an audit allow-all: %+v", v)
	}
	// Audit rules are keyed apart from enforced ones.
	for k, pol := range res.Entries {
		if (pol == "x/staged" || pol == "x/would-open-c") != (k.Direction&Audit != 0) {
			t.Errorf("entry %+v of %s: audit bit %v", k, pol, k.Direction&Audit != 0)
		}
	}
	if got := (Ingress | Audit).String(); got != "ingress (audit)" {
		t.Errorf("direction string %q", got)
	}
}

// A mode that is neither audit nor enforce is an error naming the policy, and the policy is
// enforced: a typo never turns enforcement off.
func TestUnknownModeIsEnforced(t *testing.T) {
	p := np("x", "typo", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "a")})
	p.Annotations = map[string]string{ModeAnnotation: "audti"}
	res, errs := Compile(NewAllocator(), []*networkingv1.NetworkPolicy{p}, pods, namespaces, nil)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `networkpolicy x/typo: annotation policy.skiff.sh/mode: "audti" is neither audit nor enforce; enforced`) {
		t.Fatalf("errors %v", errs)
	}
	if ep := res.Endpoints[podIP["x/a"]]; !ep.Ingress || ep.AuditIngress {
		t.Fatalf("x/a: %+v, want enforced isolation", ep)
	}
	p.Annotations[ModeAnnotation] = "enforce"
	if _, errs := Compile(NewAllocator(), []*networkingv1.NetworkPolicy{p}, pods, namespaces, nil); len(errs) > 0 {
		t.Fatalf("enforce: %v", errs)
	}
}
