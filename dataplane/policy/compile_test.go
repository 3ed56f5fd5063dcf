package policy

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The cluster of upstream's netpol suite: namespaces x, y, z, pods a, b, c in each; x/a and
// y/a number their "serve" port differently (80 and 81) under the same labels.
var (
	namespaces = []Namespace{{Name: "x", Labels: map[string]string{"team": "red"}}, {Name: "y", Labels: map[string]string{"team": "blue"}}, {Name: "z"}}
	podIP      = map[string]netip.Addr{}
	pods       []Pod
)

func init() {
	i := 1
	for _, ns := range []string{"x", "y", "z"} {
		for _, name := range []string{"a", "b", "c"} {
			ip := netip.AddrFrom4([4]byte{10, 244, 0, byte(i)})
			i++
			podIP[ns+"/"+name] = ip
			serve := uint16(80)
			if ns == "y" && name == "a" {
				serve = 81
			}
			pods = append(pods, Pod{Namespace: ns, Name: name, Labels: map[string]string{"pod": name, "pod-template-hash": ns + "-h"}, IPs: []netip.Addr{ip},
				Ports: []NamedPort{{Name: "serve", Protocol: TCP, Port: serve}, {Name: "dns", Protocol: UDP, Port: 53}}})
		}
	}
	// A host-network pod shares the node's address: never policed, never a pod peer.
	pods = append(pods, Pod{Namespace: "x", Name: "hostnet", Labels: map[string]string{"pod": "a"}, IPs: []netip.Addr{netip.MustParseAddr("192.0.2.10")}, HostNetwork: true})
}

func np(ns, name string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

func sel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func port(p intstr.IntOrString, proto corev1.Protocol) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Port: &p, Protocol: &proto}
}

type probe struct {
	from, to string // pod or address
	proto    uint8
	port     uint16
	want     bool
}

func addr(s string) netip.Addr {
	if ip, ok := podIP[s]; ok {
		return ip
	}
	return netip.MustParseAddr(s)
}

// check decides each probe in both directions of the connection: egress at from, ingress at
// to, as the datapath does (both must admit).
func check(t *testing.T, policies []*networkingv1.NetworkPolicy, probes []probe) {
	t.Helper()
	res, errs := Compile(NewAllocator(), policies, pods, namespaces, nil)
	if len(errs) > 0 {
		t.Fatalf("compile: %v", errs)
	}
	nodeViewsAgree(t, res, policies)
	// Identities of only the labels some policy names decide every probe the same.
	keys := SelectorKeys(policies)
	narrowed := append([]Pod(nil), pods...)
	for i := range narrowed {
		narrowed[i].Key = IdentityKeyFor(narrowed[i], keys)
	}
	narrow, _ := Compile(NewAllocator(), policies, narrowed, namespaces, nil)
	for _, p := range probes {
		src, dst := addr(p.from), addr(p.to)
		whole := res.Decide(src, Egress, dst, p.proto, p.port).Allowed && res.Decide(dst, Ingress, src, p.proto, p.port).Allowed
		if got := narrow.Decide(src, Egress, dst, p.proto, p.port).Allowed && narrow.Decide(dst, Ingress, src, p.proto, p.port).Allowed; got != whole {
			t.Errorf("%s -> %s %d/%d: identities of the selectors' labels (%v) decide %v, whole labels %v", p.from, p.to, p.proto, p.port, keys, got, whole)
		}
	}
	for _, p := range probes {
		src, dst := addr(p.from), addr(p.to)
		out := res.Decide(src, Egress, dst, p.proto, p.port)
		in := res.Decide(dst, Ingress, src, p.proto, p.port)
		if got := out.Allowed && in.Allowed; got != p.want {
			t.Errorf("%s -> %s %d/%d: allowed %v (egress %+v, ingress %+v), want %v", p.from, p.to, p.proto, p.port, got, out, in, p.want)
		}
	}
}

func TestNoPolicyAllowsAll(t *testing.T) {
	check(t, nil, []probe{{"x/a", "y/b", TCP, 80, true}, {"z/c", "x/a", UDP, 53, true}, {"203.0.113.1", "x/a", SCTP, 9, true}})
}

func TestDefaultDenyIngress(t *testing.T) {
	check(t, []*networkingv1.NetworkPolicy{np("x", "deny", networkingv1.NetworkPolicySpec{})}, []probe{
		{"y/a", "x/a", TCP, 80, false},
		{"x/b", "x/a", UDP, 53, false},
		{"203.0.113.1", "x/c", TCP, 80, false},
		{"x/a", "y/a", TCP, 81, true}, // egress is not isolated, y is not policed
	})
}

func TestDefaultDenyEgress(t *testing.T) {
	check(t, []*networkingv1.NetworkPolicy{np("x", "deny", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}})}, []probe{
		{"x/a", "y/a", TCP, 81, false},
		{"x/a", "203.0.113.1", UDP, 53, false},
		{"y/a", "x/a", TCP, 80, true}, // ingress to x is not isolated
	})
}

func TestPeers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		peer   networkingv1.NetworkPolicyPeer
		probes []probe
	}{
		{"podSelector means the policy's namespace", networkingv1.NetworkPolicyPeer{PodSelector: sel("pod", "b")}, []probe{
			{"x/b", "x/a", TCP, 80, true}, {"y/b", "x/a", TCP, 80, false}, {"x/c", "x/a", TCP, 80, false}}},
		{"namespaceSelector alone: every pod there", networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team", "blue")}, []probe{
			{"y/b", "x/a", TCP, 80, true}, {"y/c", "x/a", TCP, 80, true}, {"x/b", "x/a", TCP, 80, false}, {"z/b", "x/a", TCP, 80, false}}},
		{"both in one peer: AND", networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team", "blue"), PodSelector: sel("pod", "b")}, []probe{
			{"y/b", "x/a", TCP, 80, true}, {"y/c", "x/a", TCP, 80, false}, {"x/b", "x/a", TCP, 80, false}}},
		{"kubernetes.io/metadata.name", networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("kubernetes.io/metadata.name", "z")}, []probe{
			{"z/c", "x/a", TCP, 80, true}, {"y/c", "x/a", TCP, 80, false}}},
		{"matchExpressions", networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{},
			PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pod", Operator: metav1.LabelSelectorOpIn, Values: []string{"b", "c"}}}}}, []probe{
			{"z/b", "x/a", TCP, 80, true}, {"y/c", "x/a", TCP, 80, true}, {"y/a", "x/a", TCP, 80, false}}},
		{"empty namespaceSelector: all namespaces", networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}}, []probe{
			{"z/a", "x/a", TCP, 80, true}, {"203.0.113.9", "x/a", TCP, 80, false}}},
		{"ipBlock with except, covering pods", networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.244.0.0/24", Except: []string{"10.244.0.4/30"}}}, []probe{
			// x/a .1, x/b .2, x/c .3, y/a .4, y/b .5, y/c .6, z/a .7
			{"x/b", "x/a", TCP, 80, true}, {"y/a", "x/a", TCP, 80, false}, {"y/c", "x/a", TCP, 80, false},
			{"z/a", "x/a", TCP, 80, false}, {"z/b", "x/a", TCP, 80, true}, {"10.244.0.200", "x/a", TCP, 80, true},
			{"10.245.0.1", "x/a", TCP, 80, false}}},
		{"ipBlock of one host", networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "198.51.100.7/32"}}, []probe{
			{"198.51.100.7", "x/a", UDP, 53, true}, {"198.51.100.8", "x/a", UDP, 53, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check(t, []*networkingv1.NetworkPolicy{np("x", "p", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "a"),
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{tc.peer}}}})}, tc.probes)
		})
	}
}

func TestSeparatePeersAreOR(t *testing.T) {
	check(t, []*networkingv1.NetworkPolicy{np("x", "p", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "a"),
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
			{NamespaceSelector: sel("team", "blue")}, {PodSelector: sel("pod", "b")}}}}})}, []probe{
		{"y/c", "x/a", TCP, 80, true}, {"x/b", "x/a", TCP, 80, true}, {"x/c", "x/a", TCP, 80, false}, {"z/b", "x/a", TCP, 80, false}})
}

func TestPorts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ports  []networkingv1.NetworkPolicyPort
		probes []probe
	}{
		{"numbered TCP", []networkingv1.NetworkPolicyPort{port(intstr.FromInt32(80), corev1.ProtocolTCP)}, []probe{
			{"x/b", "x/a", TCP, 80, true}, {"x/b", "x/a", TCP, 81, false}, {"x/b", "x/a", UDP, 80, false}, {"x/b", "x/a", SCTP, 80, false}}},
		{"protocol defaults to TCP", []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(80))}}, []probe{
			{"x/b", "x/a", TCP, 80, true}, {"x/b", "x/a", UDP, 80, false}}},
		{"UDP and SCTP", []networkingv1.NetworkPolicyPort{port(intstr.FromInt32(53), corev1.ProtocolUDP), port(intstr.FromInt32(9), corev1.ProtocolSCTP)}, []probe{
			{"x/b", "x/a", UDP, 53, true}, {"x/b", "x/a", TCP, 53, false}, {"x/b", "x/a", SCTP, 9, true}, {"x/b", "x/a", UDP, 9, false}}},
		{"a protocol without a port: all its ports", []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP)}}, []probe{
			{"x/b", "x/a", UDP, 1, true}, {"x/b", "x/a", UDP, 65535, true}, {"x/b", "x/a", TCP, 80, false}}},
		{"endPort range", []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(8000)), EndPort: ptr.To[int32](8100)}}, []probe{
			{"x/b", "x/a", TCP, 7999, false}, {"x/b", "x/a", TCP, 8000, true}, {"x/b", "x/a", TCP, 8050, true},
			{"x/b", "x/a", TCP, 8100, true}, {"x/b", "x/a", TCP, 8101, false}, {"x/b", "x/a", UDP, 8050, false}}},
		{"named port, ingress: the endpoint's own", []networkingv1.NetworkPolicyPort{port(intstr.FromString("serve"), corev1.ProtocolTCP)}, []probe{
			{"x/b", "x/a", TCP, 80, true}, {"x/b", "x/a", TCP, 81, false}}},
		{"named port with the wrong protocol", []networkingv1.NetworkPolicyPort{port(intstr.FromString("dns"), corev1.ProtocolTCP)}, []probe{
			{"x/b", "x/a", TCP, 53, false}, {"x/b", "x/a", UDP, 53, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check(t, []*networkingv1.NetworkPolicy{np("x", "p", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "a"),
				Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: tc.ports}}})}, tc.probes)
		})
	}
}

// The same port name is 80 on x/a and 81 on y/a, pods with the same labels: an egress rule
// to "serve" admits each at its own number (cilium#24779).
func TestNamedPortPerDestination(t *testing.T) {
	check(t, []*networkingv1.NetworkPolicy{np("z", "p", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "c"),
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		Egress: []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: sel("pod", "a")}},
			Ports: []networkingv1.NetworkPolicyPort{port(intstr.FromString("serve"), corev1.ProtocolTCP)}}}})}, []probe{
		{"z/c", "x/a", TCP, 80, true}, {"z/c", "x/a", TCP, 81, false},
		{"z/c", "y/a", TCP, 81, true}, {"z/c", "y/a", TCP, 80, false},
		{"z/c", "x/b", TCP, 80, false},
	})
	// "to" omitted: every pod destination, each at its own number; never a non-pod.
	check(t, []*networkingv1.NetworkPolicy{np("z", "p", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "c"),
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		Egress:      []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{port(intstr.FromString("serve"), corev1.ProtocolTCP)}}}})}, []probe{
		{"z/c", "x/b", TCP, 80, true}, {"z/c", "y/a", TCP, 81, true}, {"z/c", "y/a", TCP, 80, false}, {"z/c", "203.0.113.1", TCP, 80, false},
	})
}

func TestPoliciesAreAUnion(t *testing.T) {
	check(t, []*networkingv1.NetworkPolicy{
		np("x", "from-b", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "a"),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "b")}}}}}),
		np("x", "udp-from-all", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "a"),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP)}}}}}),
		np("x", "deny-all", networkingv1.NetworkPolicySpec{}),
	}, []probe{
		{"x/b", "x/a", TCP, 80, true}, {"y/c", "x/a", UDP, 53, true}, {"y/c", "x/a", TCP, 80, false}, {"y/c", "x/b", UDP, 53, false},
	})
}

func TestEgressAndIngressBothApply(t *testing.T) {
	check(t, []*networkingv1.NetworkPolicy{
		np("x", "a-out-to-y", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "a"), PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("team", "blue")}}}}}),
		np("y", "b-in-from-nobody", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "b")}),
	}, []probe{
		{"x/a", "y/a", TCP, 81, true}, {"x/a", "y/b", TCP, 80, false}, {"x/a", "z/a", TCP, 80, false},
	})
}

func TestHostNetworkPodsAreNotPoliced(t *testing.T) {
	res, _ := Compile(NewAllocator(), []*networkingv1.NetworkPolicy{np("x", "deny", networkingv1.NetworkPolicySpec{})}, pods, namespaces, nil)
	hostnet := netip.MustParseAddr("192.0.2.10")
	if _, ok := res.Endpoints[hostnet]; ok {
		t.Error("a host-network pod is an endpoint")
	}
	if id := res.PeerIdentity(hostnet); id != World {
		t.Errorf("a host-network pod has identity %d", id)
	}
}

func TestIdentitiesAreStable(t *testing.T) {
	alloc := NewAllocator()
	first, _ := Compile(alloc, nil, pods, namespaces, nil)
	// y/c gets a new label: its identity changes, no one else's does.
	changed := append([]Pod(nil), pods...)
	for i := range changed {
		if changed[i].Namespace == "y" && changed[i].Name == "c" {
			changed[i].Labels = map[string]string{"pod": "c", "new": "yes"}
		}
	}
	second, _ := Compile(alloc, nil, changed, namespaces, nil)
	for name, ip := range podIP {
		same := first.PodIdentities[ip] == second.PodIdentities[ip]
		if (name == "y/c") == same {
			t.Errorf("%s: identity %d then %d", name, first.PodIdentities[ip], second.PodIdentities[ip])
		}
	}
	// Same labels and ports in one namespace: one identity; another namespace: another.
	if first.PodIdentities[podIP["x/b"]] == first.PodIdentities[podIP["y/b"]] {
		t.Error("pods of two namespaces share an identity")
	}
}

func TestInvalidPolicyIsReported(t *testing.T) {
	bad := np("x", "bad", networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Sometimes"}}}})
	good := np("x", "deny", networkingv1.NetworkPolicySpec{})
	res, errs := Compile(NewAllocator(), []*networkingv1.NetworkPolicy{bad, good}, pods, namespaces, nil)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "networkpolicy x/bad: podSelector") {
		t.Fatalf("errors %v", errs)
	}
	if !res.Endpoints[podIP["x/a"]].Ingress {
		t.Error("the valid policy was not compiled")
	}
}

func TestPortPrefixes(t *testing.T) {
	for _, tc := range []struct{ from, to uint16 }{{1, 1}, {80, 80}, {8000, 8100}, {1, 65535}, {1024, 2047}, {65535, 65535}, {3, 17}} {
		pps := PortPrefixes(tc.from, tc.to)
		if len(pps) > 30 {
			t.Errorf("%d-%d: %d prefixes", tc.from, tc.to, len(pps))
		}
		// Every port inside is covered exactly once, none outside.
		for p := uint32(0); p <= 65535; p++ {
			n := 0
			for _, pp := range pps {
				if pp.Covers(uint16(p)) {
					n++
				}
			}
			inside := p >= uint32(tc.from) && p <= uint32(tc.to)
			if (inside && n != 1) || (!inside && n != 0) {
				t.Fatalf("%d-%d: port %d covered %d times (%v)", tc.from, tc.to, p, n, pps)
			}
		}
	}
	if got := PortPrefixes(1024, 2047); len(got) != 1 || got[0] != (PortPrefix{Port: 1024, Bits: 6}) {
		t.Errorf("1024-2047 = %v, want 1024/6", got)
	}
}

// nodeViewsAgree compiles the same cluster as each of two nodes sees it (the pods split
// between them): each node's rules are exactly the whole view's for its own pods, and its
// identities those of the whole cluster, so a node that compiles only its own endpoints
// enforces what the cluster-wide compilation would.
func nodeViewsAgree(t *testing.T, whole *Result, policies []*networkingv1.NetworkPolicy) {
	t.Helper()
	onNode := map[netip.Addr]int{}
	for i, p := range pods {
		for _, ip := range p.IPs {
			onNode[ip] = i % 2
		}
	}
	for node := 0; node < 2; node++ {
		local := func(a netip.Addr) bool { n, ok := onNode[a]; return ok && n == node }
		res, _ := Compile(NewAllocator(), policies, pods, namespaces, local)
		if !reflect.DeepEqual(res.PodIdentities, whole.PodIdentities) {
			t.Errorf("node %d: identities %v, the whole cluster's %v", node, res.PodIdentities, whole.PodIdentities)
		}
		wantEntries := map[Key]string{}
		for k, v := range whole.Entries {
			if local(k.Endpoint) {
				wantEntries[k] = v
			}
		}
		if !reflect.DeepEqual(res.Entries, wantEntries) {
			t.Errorf("node %d: entries %v, want the whole view's for its pods %v", node, res.Entries, wantEntries)
		}
		wantEndpoints := map[netip.Addr]Endpoint{}
		for a, ep := range whole.Endpoints {
			if local(a) {
				wantEndpoints[a] = ep
			}
		}
		if !reflect.DeepEqual(res.Endpoints, wantEndpoints) {
			t.Errorf("node %d: endpoints %v, want %v", node, res.Endpoints, wantEndpoints)
		}
	}
}
