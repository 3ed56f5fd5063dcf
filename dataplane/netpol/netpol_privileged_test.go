package netpol

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/skiff-sh/skiff/dataplane/flows"
	"github.com/skiff-sh/skiff/dataplane/loader"
	"github.com/skiff-sh/skiff/dataplane/policy"
	"github.com/skiff-sh/skiff/dataplane/programs"
)

// tcx verdicts as BPF_PROG_RUN returns them.
const (
	tcxNext = 0xffffffff // -1
	tcxDrop = 2
)

// l4packet is Ethernet + IPv4 + the first bytes of a TCP, UDP, SCTP or ICMP header; the
// policy program reads addresses, protocol and ports only.
func l4packet(src, dst netip.Addr, proto uint8, sport, dport uint16) []byte {
	l4len := map[uint8]int{policy.TCP: 20, policy.UDP: 8, policy.SCTP: 12, 1: 8}[proto]
	b := make([]byte, 14+20+l4len)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+l4len))
	ip[8], ip[9] = 64, proto
	s4, d4 := src.As4(), dst.As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	if proto != 1 {
		binary.BigEndian.PutUint16(b[34:], sport)
		binary.BigEndian.PutUint16(b[36:], dport)
	} else {
		b[34] = 8 // echo request
	}
	return b
}

func runProg(t *testing.T, prog *ebpf.Program, pkt []byte) uint32 {
	t.Helper()
	ret, err := prog.Run(&ebpf.RunOptions{Data: pkt})
	if err != nil {
		t.Fatalf("BPF_PROG_RUN: %v", err)
	}
	return ret
}

func loadTestPolicy(t *testing.T) *Policy {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root (BPF)") // the suite runs as root everywhere; never skipped
	}
	dir := filepath.Join(loader.BPFFS, fmt.Sprintf("skiff-test-policy-%d", os.Getpid()))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p, err := LoadPolicy(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// truthTableCNPs are ClusterNetworkPolicies over the truth table's pods: an Admin tier that
// passes y's TCP 79-81 and UDP 50-60 to x/a on to x/a's NetworkPolicy and denies the rest, denies y's
// TCP 80 to x/b but accepts x's TCP 81 (x/b has no NetworkPolicy on ingress), denies y/b's
// egress to a network holding x's first pods except UDP 50-60 to x/c; a Baseline tier that,
// where no NetworkPolicy selects a pod (x/c, x/b), accepts y on TCP 80 and denies the rest.
func truthTableCNPs() []*policy.ClusterNetworkPolicy {
	ns := func(name string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": name}}
	}
	pod := func(namespace, name string) *cnp.NamespacedPod {
		return &cnp.NamespacedPod{NamespaceSelector: *ns(namespace), PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": name}}}
	}
	tcp := func(from, to int32) []cnp.ClusterNetworkPolicyProtocol {
		p := &cnp.Port{Number: from}
		if to != from {
			p = &cnp.Port{Range: &cnp.PortRange{Start: from, End: to}}
		}
		return []cnp.ClusterNetworkPolicyProtocol{{TCP: &cnp.ClusterNetworkPolicyProtocolTCP{DestinationPort: p}}}
	}
	c := func(name string, tier cnp.Tier, prio int32, subject cnp.ClusterNetworkPolicySubject, in []cnp.ClusterNetworkPolicyIngressRule, out []cnp.ClusterNetworkPolicyEgressRule) *policy.ClusterNetworkPolicy {
		return &policy.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: cnp.ClusterNetworkPolicySpec{Tier: tier, Priority: prio, Subject: subject, Ingress: in, Egress: out}}
	}
	return []*policy.ClusterNetworkPolicy{
		c("pass-y-to-a", cnp.AdminTier, 5, cnp.ClusterNetworkPolicySubject{Pods: pod("x", "a")}, []cnp.ClusterNetworkPolicyIngressRule{
			{Action: cnp.ClusterNetworkPolicyRuleActionPass, From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: ns("y")}},
				Protocols: append(tcp(79, 81), cnp.ClusterNetworkPolicyProtocol{UDP: &cnp.ClusterNetworkPolicyProtocolUDP{DestinationPort: &cnp.Port{Range: &cnp.PortRange{Start: 50, End: 60}}}})}}, nil),
		c("deny-to-a", cnp.AdminTier, 20, cnp.ClusterNetworkPolicySubject{Pods: pod("x", "a")}, []cnp.ClusterNetworkPolicyIngressRule{
			{Action: cnp.ClusterNetworkPolicyRuleActionDeny, From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}}}, nil),
		c("guard-b", cnp.AdminTier, 10, cnp.ClusterNetworkPolicySubject{Pods: pod("x", "b")}, []cnp.ClusterNetworkPolicyIngressRule{
			{Name: "deny-y-80", Action: cnp.ClusterNetworkPolicyRuleActionDeny, From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: ns("y")}}, Protocols: tcp(80, 80)},
			{Name: "accept-x-81", Action: cnp.ClusterNetworkPolicyRuleActionAccept, From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: ns("x")}}, Protocols: tcp(81, 81)}}, nil),
		c("fence-yb", cnp.AdminTier, 10, cnp.ClusterNetworkPolicySubject{Pods: pod("y", "b")}, nil, []cnp.ClusterNetworkPolicyEgressRule{
			{Action: cnp.ClusterNetworkPolicyRuleActionAccept, To: []cnp.ClusterNetworkPolicyEgressPeer{{Pods: pod("x", "c")}},
				Protocols: []cnp.ClusterNetworkPolicyProtocol{{UDP: &cnp.ClusterNetworkPolicyProtocolUDP{DestinationPort: &cnp.Port{Range: &cnp.PortRange{Start: 50, End: 60}}}}}},
			{Action: cnp.ClusterNetworkPolicyRuleActionDeny, To: []cnp.ClusterNetworkPolicyEgressPeer{{Networks: []cnp.CIDR{"10.244.0.0/30"}}}}}),
		c("baseline", cnp.BaselineTier, 1, cnp.ClusterNetworkPolicySubject{Namespaces: ns("x")}, []cnp.ClusterNetworkPolicyIngressRule{
			{Action: cnp.ClusterNetworkPolicyRuleActionAccept, From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: ns("y")}}, Protocols: tcp(80, 80)},
			{Action: cnp.ClusterNetworkPolicyRuleActionDeny, From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}}}, nil),
	}
}

// flowEvents turns p's flow events on and reads them.
func flowEvents(t testing.TB, p *Policy) *ringbuf.Reader {
	t.Helper()
	setFlowEvents(t, p, true)
	rd, err := ringbuf.NewReader(p.objs.SkiffFlows)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rd.Close() })
	return rd
}

func setFlowEvents(t testing.TB, p *Policy, on bool) {
	t.Helper()
	v := uint64(0)
	if on {
		v = 1
	}
	if err := p.objs.SkiffFlowConfig.Put(uint32(0), v); err != nil {
		t.Fatal(err)
	}
}

// nextFlowEvent is the one event a program run just wrote.
func nextFlowEvent(t testing.TB, rd *ringbuf.Reader) flows.Event {
	t.Helper()
	rd.SetDeadline(time.Now()) // the run was synchronous: its event waits (unwoken, as a batch's first)
	rec, err := rd.Read()
	if err != nil {
		t.Fatalf("no flow event: %v", err)
	}
	e, err := flows.Decode(rec.RawSample)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func clearFlows(t testing.TB, p *Policy) {
	var k programs.PolicyPolFlow
	var keys []programs.PolicyPolFlow
	var v uint64
	it := p.objs.SkiffPolFlows.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	for _, k := range keys {
		_ = p.objs.SkiffPolFlows.Delete(k)
	}
}

// TestPolicyProgramTruthTable runs the eBPF verdict program over every pair of addresses,
// every protocol and a set of ports, and compares it with policy.Decide on the same
// compiled result: the Go model and the datapath must agree on every packet.
func TestPolicyProgramTruthTable(t *testing.T) {
	p := loadTestPolicy(t)
	pods := []policy.Pod{}
	addrs := map[string]netip.Addr{}
	i := 1
	for _, ns := range []string{"x", "y"} {
		for _, name := range []string{"a", "b", "c"} {
			ip := netip.AddrFrom4([4]byte{10, 244, 0, byte(i)})
			i++
			addrs[ns+"/"+name] = ip
			serve := uint16(80)
			if ns == "y" {
				serve = 81
			}
			pods = append(pods, policy.Pod{Namespace: ns, Name: name, Labels: map[string]string{"pod": name}, IPs: []netip.Addr{ip},
				Ports: []policy.NamedPort{{Name: "serve", Protocol: policy.TCP, Port: serve}}})
		}
	}
	host := netip.MustParseAddr("192.0.2.1")
	outsiders := []netip.Addr{netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("10.244.0.200"), host}
	tcp, udp, sctp := corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP
	policies := []*networkingv1.NetworkPolicy{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "a-in"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "a"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "y"}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(80))}, {Protocol: &udp, Port: ptr.To(intstr.FromInt32(50)), EndPort: ptr.To[int32](60)}}},
				{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.244.0.0/24", Except: []string{"10.244.0.4/30"}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &sctp}}},
			}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "b-out"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "b"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "c"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromString("serve"))}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "y", Name: "deny-in"}, Spec: networkingv1.NetworkPolicySpec{}},
		// Audit mode: x/c's ingress would admit only y's pods on TCP 80, y/b's egress only
		// pods "a"; x/a's audit deny-all changes nothing (its enforced policy decides).
		{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "c-audit-in", Annotations: map[string]string{policy.ModeAnnotation: "audit"}},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "c"}},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "y"}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(80))}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "y", Name: "b-audit-out", Annotations: map[string]string{policy.ModeAnnotation: "audit"}},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "b"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: []networkingv1.NetworkPolicyEgressRule{{
					To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "a"}}}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "a-audit-deny", Annotations: map[string]string{policy.ModeAnnotation: "audit"}},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "a"}}}},
	}
	res, errs := policy.CompileWithCluster(policy.NewAllocator(), policies, truthTableCNPs(), pods, []policy.Namespace{{Name: "x"}, {Name: "y"}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if _, err := p.Sync(res, func(netip.Addr) bool { return true }, []netip.Addr{host}); err != nil {
		t.Fatal(err)
	}
	view, err := OpenPolicyPinned(p.pinDir)
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	var all []netip.Addr
	for _, a := range addrs {
		all = append(all, a)
	}
	type probe struct {
		proto uint8
		port  uint16
	}
	var probes []probe
	for _, proto := range []uint8{policy.TCP, policy.UDP, policy.SCTP} {
		for _, port := range []uint16{49, 50, 55, 60, 61, 80, 81, 443} {
			probes = append(probes, probe{proto, port})
		}
	}
	probes = append(probes, probe{1, 0}) // ICMP
	// Every run of a program on a new flow writes one flow event, whose verdict, reason and
	// policy are the decision's.
	rd := flowEvents(t, p)
	events := map[uint8]int{}
	tiers := map[policy.Reason]int{}
	checkEvent := func(d policy.Verdict, what string) {
		t.Helper()
		e := nextFlowEvent(t, rd)
		events[e.Verdict]++
		want := uint8(flows.VerdictForwarded)
		switch {
		case !d.Allowed:
			want = flows.VerdictDropped
		case d.Audited:
			want = flows.VerdictAudit
		}
		reason := map[policy.Reason]uint8{policy.NotIsolated: flows.ReasonNotIsolated, policy.FromNode: flows.ReasonFromNode,
			policy.ToNodeDNS: flows.ReasonNodeDNS, policy.Admitted: flows.ReasonRule, policy.NoRule: flows.ReasonPolicy,
			policy.AdminAccept: flows.ReasonAdminAccept, policy.AdminDeny: flows.ReasonAdminDeny,
			policy.BaselineAccept: flows.ReasonBaselineAccept, policy.BaselineDeny: flows.ReasonBaselineDeny}[d.Reason]
		pol, wantPol := "", d.Policy
		switch {
		case d.Tier != 0:
			pol, wantPol = fmt.Sprint(e.Policy), fmt.Sprint(uint32(d.Tier))
		case e.Policy > 0:
			pol = p.PolicyName(e.Policy - 1)
		}
		if e.Verdict != want || e.Reason != reason || pol != wantPol || e.Kind != flows.KindPolicy {
			t.Errorf("%s: flow event verdict %d reason %d policy %q, want verdict %d reason %d policy %q", what, e.Verdict, e.Reason, pol, want, reason, wantPol)
		}
		tiers[d.Reason]++
	}
	checked, admitted, passed := 0, 0, 0
	for _, src := range append(all, outsiders...) {
		for _, dst := range all {
			if src == dst {
				continue
			}
			for _, pr := range probes {
				want := true
				if _, ok := res.PodIdentities[src]; ok {
					want = res.Decide(src, policy.Egress, dst, pr.proto, pr.port).Allowed
				}
				if src == host {
					// The node reaches its pods whatever their policies, as upstream expects.
				} else {
					want = want && res.Decide(dst, policy.Ingress, src, pr.proto, pr.port).Allowed
				}
				pkt := l4packet(src, dst, pr.proto, 40000, pr.port)
				got := true
				what := fmt.Sprintf("%s -> %s proto %d port %d", src, dst, pr.proto, pr.port)
				if _, ok := res.PodIdentities[src]; ok {
					got = runProg(t, p.objs.SkiffPolicyFromPod, pkt) == tcxNext
					checkEvent(policy.Decide(view, src, policy.Egress, dst, pr.proto, pr.port), what+" egress")
				}
				if got {
					got = runProg(t, p.objs.SkiffPolicyToPod, pkt) == tcxNext
					d := policy.Decide(view, dst, policy.Ingress, src, pr.proto, pr.port)
					if d.PassedBy != 0 {
						passed++
					}
					checkEvent(d, what+" ingress")
				}
				clearFlows(t, p)
				if got != want {
					t.Errorf("%s -> %s proto %d port %d: datapath %v, model %v", src, dst, pr.proto, pr.port, got, want)
				}
				// The same decision read from the live maps (what skiff policy trace
				// answers), where the node's own address is known as such.
				live := true
				if _, ok := view.Isolation(src); ok {
					live = policy.Decide(view, src, policy.Egress, dst, pr.proto, pr.port).Allowed
				}
				live = live && policy.Decide(view, dst, policy.Ingress, src, pr.proto, pr.port).Allowed
				if live != got {
					t.Errorf("%s -> %s proto %d port %d: datapath %v, decision over the live maps %v", src, dst, pr.proto, pr.port, got, live)
				}
				checked++
				if got {
					admitted++
				}
			}
		}
	}
	if admitted == 0 || admitted == checked {
		t.Fatalf("%d of %d probes admitted: the table tests nothing", admitted, checked)
	}
	t.Logf("%d probes, %d admitted; flow events: %d forwarded, %d dropped, %d audit", checked, admitted,
		events[flows.VerdictForwarded], events[flows.VerdictDropped], events[flows.VerdictAudit])
	if events[flows.VerdictAudit] == 0 {
		t.Fatal("no probe was reported as one an audit-mode policy would drop: the audit policies test nothing")
	}
	t.Logf("decided by ClusterNetworkPolicy: admin accept %d, admin deny %d, baseline accept %d, baseline deny %d; passed by the admin tier: %d",
		tiers[policy.AdminAccept], tiers[policy.AdminDeny], tiers[policy.BaselineAccept], tiers[policy.BaselineDeny], passed)
	for _, r := range []policy.Reason{policy.AdminAccept, policy.AdminDeny, policy.BaselineAccept, policy.BaselineDeny} {
		if tiers[r] == 0 {
			t.Errorf("no probe decided with reason %d: the ClusterNetworkPolicies test too little", r)
		}
	}
	if passed == 0 {
		t.Error("no probe passed on by an Admin-tier Pass rule")
	}
	setFlowEvents(t, p, false)

	// A reply passes where a new connection would not: x/a's ingress admits nothing from x/c
	// on TCP 9000, but x/a's own connection to x/c gets its answer.
	a, c := addrs["x/a"], addrs["x/c"]
	if runProg(t, p.objs.SkiffPolicyToPod, l4packet(c, a, policy.TCP, 9000, 40001)) != tcxDrop {
		t.Fatal("x/c -> x/a:40001 admitted without a connection")
	}
	if runProg(t, p.objs.SkiffPolicyFromPod, l4packet(a, c, policy.TCP, 40001, 9000)) != tcxNext {
		t.Fatal("x/a -> x/c:9000 refused")
	}
	if runProg(t, p.objs.SkiffPolicyToPod, l4packet(c, a, policy.TCP, 9000, 40001)) != tcxNext {
		t.Fatal("the reply to x/a's connection was dropped")
	}
	// A revoked policy: x/a admits y/a on TCP 80 and UDP 55. With the connection and the
	// UDP flow remembered, y's namespace loses its rule (a-in gone). The established TCP
	// connection is kept; a new one on the same addresses and ports (a SYN) is refused, and
	// so is the UDP flow once idle past the timeout.
	ya := addrs["y/a"]
	syn := func(pkt []byte) []byte { pkt[34+13] = 0x02; return pkt }
	if runProg(t, p.objs.SkiffPolicyToPod, syn(l4packet(ya, a, policy.TCP, 40002, 80))) != tcxNext ||
		runProg(t, p.objs.SkiffPolicyToPod, l4packet(ya, a, policy.UDP, 40003, 55)) != tcxNext {
		t.Fatal("y/a -> x/a TCP 80 / UDP 55 refused while a-in admits them")
	}
	revoked, errs := policy.Compile(policy.NewAllocator(), policies[1:], pods, []policy.Namespace{{Name: "x"}, {Name: "y"}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	revoked.Endpoints[a] = policy.Endpoint{Pod: "x/a", Ingress: true} // still isolated, now by nothing
	if _, err := p.Sync(revoked, func(netip.Addr) bool { return true }, []netip.Addr{host}); err != nil {
		t.Fatal(err)
	}
	if runProg(t, p.objs.SkiffPolicyToPod, l4packet(ya, a, policy.TCP, 40002, 80)) != tcxNext {
		t.Error("an established connection's packet dropped after its policy went (kept, as documented)")
	}
	if runProg(t, p.objs.SkiffPolicyToPod, syn(l4packet(ya, a, policy.TCP, 40002, 80))) != tcxDrop {
		t.Error("a new connection (SYN) admitted by a remembered flow after its policy went")
	}
	if runProg(t, p.objs.SkiffPolicyToPod, l4packet(ya, a, policy.TCP, 40002, 80)) != tcxDrop {
		t.Error("the refused SYN left its flow remembered")
	}
	if runProg(t, p.objs.SkiffPolicyToPod, l4packet(ya, a, policy.UDP, 40003, 55)) != tcxNext {
		t.Error("an active UDP flow dropped after its policy went (kept until idle)")
	}
	udpFlow := programs.PolicyPolFlow{Pod: programs.Addr4(a), Peer: programs.Addr4(ya), PodPort: programs.Port(55), PeerPort: programs.Port(40003), Proto: policy.UDP}
	if err := p.objs.SkiffPolFlows.Put(udpFlow, uint64(1)); err != nil { // last seen at boot: idle
		t.Fatal(err)
	}
	if runProg(t, p.objs.SkiffPolicyToPod, l4packet(ya, a, policy.UDP, 40003, 55)) != tcxDrop {
		t.Error("an idle UDP flow admitted after its policy went")
	}
	if _, err := p.Sync(res, func(netip.Addr) bool { return true }, []netip.Addr{host}); err != nil {
		t.Fatal(err)
	}
	// x/b's egress is isolated (b-out): it reaches the node's own DNS resolver on 53 over
	// UDP and TCP, and nothing else of the node, nor port 53 elsewhere.
	b := addrs["x/b"]
	for _, c := range []struct {
		dst   netip.Addr
		proto uint8
		port  uint16
		want  uint32
	}{{host, policy.UDP, 53, tcxNext}, {host, policy.TCP, 53, tcxNext}, {host, policy.TCP, 80, tcxDrop}, {host, policy.SCTP, 53, tcxDrop},
		{netip.MustParseAddr("203.0.113.7"), policy.UDP, 53, tcxDrop}} {
		if got := runProg(t, p.objs.SkiffPolicyFromPod, l4packet(b, c.dst, c.proto, 40010, c.port)); got != c.want {
			t.Errorf("x/b (egress isolated) -> %s proto %d port %d: %d, want %d", c.dst, c.proto, c.port, got, c.want)
		}
		clearFlows(t, p)
	}
	// An address with no endpoint entry gets nothing (fail closed).
	stranger := netip.MustParseAddr("10.244.0.99")
	if runProg(t, p.objs.SkiffPolicyFromPod, l4packet(stranger, a, policy.TCP, 1, 80)) != tcxDrop {
		t.Fatal("a pod without an endpoint entry sent a packet")
	}
	drops, err := p.Drops()
	if err != nil || len(drops) == 0 {
		t.Fatalf("drops %v, %v", drops, err)
	}
	// A sync writes only the difference from the last one; an entry removed behind its
	// back comes back with the next periodic pass (Reread), which compares with the kernel.
	if n, err := p.Sync(res, func(netip.Addr) bool { return true }, []netip.Addr{host}); err != nil || n != 0 {
		t.Fatalf("a second identical sync: %d changes, %v", n, err)
	}
	// Another node's pod joining an existing identity is one identity entry, written
	// without a sync; the next sync of the same result takes it back out, and only it.
	remote := netip.MustParseAddr("10.244.9.9")
	someID := res.PodIdentities[a]
	if err := p.SetPeerIdentities(map[netip.Addr]policy.Identity{remote: someID}); err != nil {
		t.Fatal(err)
	}
	var got uint32
	if err := p.objs.SkiffPolIdentities.Lookup(programs.Addr4(remote), &got); err != nil || got != uint32(someID) {
		t.Fatalf("the remote pod's identity: %d, %v; want %d", got, err, someID)
	}
	if n, err := p.Sync(res, func(netip.Addr) bool { return true }, []netip.Addr{host}); err != nil || n != 1 {
		t.Fatalf("a sync after SetPeerIdentities: %d changes, %v; want the one entry removed", n, err)
	}
	if err := p.SetPeerIdentities(map[netip.Addr]policy.Identity{remote: someID}); err != nil {
		t.Fatal(err)
	}
	if err := p.SetPeerIdentities(map[netip.Addr]policy.Identity{remote: Unidentified}); err != nil {
		t.Fatal(err)
	}
	if err := p.objs.SkiffPolIdentities.Lookup(programs.Addr4(remote), &got); err == nil {
		t.Fatalf("the remote pod's identity %d is left after Unidentified", got)
	}
	if n, err := p.Sync(res, func(netip.Addr) bool { return true }, []netip.Addr{host}); err != nil || n != 0 {
		t.Fatalf("a sync after an identity came and went: %d changes, %v", n, err)
	}
	if err := p.objs.SkiffPolEndpoints.Delete(programs.Addr4(a)); err != nil {
		t.Fatal(err)
	}
	p.Reread()
	if n, err := p.Sync(res, func(netip.Addr) bool { return true }, []netip.Addr{host}); err != nil || n != 1 {
		t.Fatalf("the sync after Reread: %d changes, %v; want the one missing endpoint rewritten", n, err)
	}
	// Sync to nothing removes every entry.
	empty, _ := policy.Compile(policy.NewAllocator(), nil, nil, nil, nil)
	if _, err := p.Sync(empty, func(netip.Addr) bool { return true }, nil); err != nil {
		t.Fatal(err)
	}
	var k programs.PolicyPolRuleKey
	var v programs.PolicyPolRuleValue
	if p.objs.SkiffPolRules.Iterate().Next(&k, &v) {
		t.Fatalf("rule %+v left after syncing to nothing", k)
	}
}

// BenchmarkPolicyVerdict times the verdict program (BPF_PROG_RUN) for a packet to a pod
// isolated by a policy with 0, 100 and 10,000 port rules, and reports each as a ratio to the
// same packet at a pod no policy selects, in one run: the first packet of a connection (the
// rule lookup; a median of single runs, coarse) and its later packets (the flow lookup,
// repeated 100,000 times in the kernel).
func BenchmarkPolicyVerdict(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Fatal("needs root (BPF)")
	}
	dir := filepath.Join(loader.BPFFS, fmt.Sprintf("skiff-bench-policy-%d", os.Getpid()))
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	p, err := LoadPolicy(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	server, client := netip.MustParseAddr("10.244.0.1"), netip.MustParseAddr("10.244.0.2")
	open := netip.MustParseAddr("10.244.0.3")
	pods := []policy.Pod{
		{Namespace: "x", Name: "server", Labels: map[string]string{"app": "server"}, IPs: []netip.Addr{server}},
		{Namespace: "x", Name: "client", Labels: map[string]string{"app": "client"}, IPs: []netip.Addr{client}},
		{Namespace: "x", Name: "open", Labels: map[string]string{"app": "open"}, IPs: []netip.Addr{open}},
	}
	run := func(rules int) (fresh, established time.Duration) {
		// rules ingress rules on the server: all but the last admit others' ports.
		var ports []networkingv1.NetworkPolicyPort
		tcp := corev1.ProtocolTCP
		for i := 0; i < rules; i++ {
			ports = append(ports, networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(int32(10000 + i)))})
		}
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "server"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}},
				Ports: append(ports, networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(80))})}}}}
		res, _ := policy.Compile(policy.NewAllocator(), []*networkingv1.NetworkPolicy{np}, pods, nil, nil)
		if _, err := p.Sync(res, func(netip.Addr) bool { return true }, nil); err != nil {
			b.Fatal(err)
		}
		to := server
		if rules < 0 {
			to = open
		}
		pkt := l4packet(client, to, policy.TCP, 40000, 80)
		// Each sample must decide afresh (a new connection): the flow the last one admitted
		// is cleared; the figure is the median of 301 samples.
		var ds []time.Duration
		for i := 0; i < 301; i++ {
			clearFlows(nil, p)
			ret, d, err := p.objs.SkiffPolicyToPod.Benchmark(pkt, 1, nil)
			if err != nil || ret != tcxNext {
				b.Fatalf("verdict %d, %v", ret, err)
			}
			ds = append(ds, d)
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		// The connection's later packets: the flow is known, repeated in the kernel.
		_, est, err := p.objs.SkiffPolicyToPod.Benchmark(pkt, 100000, nil)
		if err != nil {
			b.Fatal(err)
		}
		return ds[len(ds)/2], est
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		base, baseEst := run(-1)
		for _, n := range []int{0, 100, 10000} {
			d, est := run(n)
			b.ReportMetric(float64(d)/float64(base), fmt.Sprintf("new-conn-x-unpoliced-%d-rules", n))
			b.ReportMetric(float64(est)/float64(baseEst), fmt.Sprintf("established-x-unpoliced-%d-rules", n))
		}
		b.ReportMetric(float64(base.Nanoseconds()), "ns/new-conn-unpoliced")
		b.ReportMetric(float64(baseEst.Nanoseconds()), "ns/established-unpoliced")
	}
}

// l6packet is Ethernet + IPv6 + the first bytes of a TCP header, or an ICMPv6 message of
// type icmpType when it is not zero.
func l6packet(src, dst netip.Addr, icmpType uint8) []byte {
	b := make([]byte, 14+40+20)
	binary.BigEndian.PutUint16(b[12:], 0x86dd)
	ip := b[14:54]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], 20)
	ip[6], ip[7] = policy.TCP, 64
	if icmpType != 0 {
		ip[6] = 58
		b[54] = icmpType
	} else {
		binary.BigEndian.PutUint16(b[54:], 40000)
		binary.BigEndian.PutUint16(b[56:], 80)
	}
	s, d := src.As16(), dst.As16()
	copy(ip[8:24], s[:])
	copy(ip[24:40], d[:])
	return b
}

// The kernel's program on IPv6: an isolated dual-stack pod's IPv6 is dropped in the direction
// it is isolated in and passes in the other, an unisolated pod's passes, an address that is no
// endpoint gets nothing, and neighbour discovery always passes.
func TestPolicyProgramIPv6(t *testing.T) {
	p := loadTestPolicy(t)
	a4, a6 := netip.MustParseAddr("10.244.0.1"), netip.MustParseAddr("fd00:10:244::1")
	b4, b6 := netip.MustParseAddr("10.244.0.2"), netip.MustParseAddr("fd00:10:244::2")
	stranger := netip.MustParseAddr("fd00:10:244::99")
	pods := []policy.Pod{
		{Namespace: "x", Name: "a", Labels: map[string]string{"pod": "a"}, IPs: []netip.Addr{a4, a6}},
		{Namespace: "x", Name: "b", Labels: map[string]string{"pod": "b"}, IPs: []netip.Addr{b4, b6}},
	}
	denyA := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "deny-a"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "a"}}}}
	res, errs := policy.Compile(policy.NewAllocator(), []*networkingv1.NetworkPolicy{denyA}, pods, []policy.Namespace{{Name: "x"}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if _, err := p.Sync(res, func(netip.Addr) bool { return true }, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		to   bool // the pod's ingress (skiff_policy_to_pod), else its egress
		pkt  []byte
		pass bool
	}{
		{"b → a (a isolated for ingress)", true, l6packet(b6, a6, 0), false},
		{"a → b, a's egress (not isolated)", false, l6packet(a6, b6, 0), true},
		{"a → b, b's ingress (b not isolated)", true, l6packet(a6, b6, 0), true},
		{"to an address that is no endpoint", true, l6packet(b6, stranger, 0), false},
		{"neighbour solicitation to a", true, l6packet(b6, a6, 135), true},
		{"neighbour advertisement from a", false, l6packet(a6, b6, 136), true},
		{"an echo request to a (ICMPv6 is policed)", true, l6packet(b6, a6, 128), false},
	} {
		prog := p.objs.SkiffPolicyFromPod
		if c.to {
			prog = p.objs.SkiffPolicyToPod
		}
		if got := runProg(t, prog, c.pkt) == tcxNext; got != c.pass {
			t.Errorf("%s: passes %v, want %v", c.what, got, c.pass)
		}
	}
	// Rules over IPv6: a admits b (a pod peer, by its identity) on TCP 80, and an IPv6 ipBlock
	// with an except; everyone else is dropped and counted, the node (a link-local peer)
	// passes.
	allowA := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "allow-a"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "a"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "b"}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(80))}}},
				{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "fd00:20::/64", Except: []string{"fd00:20::/96"}}}}},
			}}}
	res, errs = policy.Compile(policy.NewAllocator(), []*networkingv1.NetworkPolicy{allowA}, pods, []policy.Namespace{{Name: "x"}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if _, err := p.Sync(res, func(netip.Addr) bool { return true }, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		src  string
		pass bool
	}{
		{"b (admitted on TCP 80)", b6.String(), true},
		{"an address no pod has", stranger.String(), false},
		{"inside the ipBlock", "fd00:20::1:0:0:7", true},
		{"inside the ipBlock's except", "fd00:20::7", false},
		{"the node, link-local", "fe80::1", true},
	} {
		if got := runProg(t, p.objs.SkiffPolicyToPod, l6packet(netip.MustParseAddr(c.src), a6, 0)) == tcxNext; got != c.pass {
			t.Errorf("%s → a over IPv6: passes %v, want %v", c.what, got, c.pass)
		}
	}
	// skiff policy trace and skiff bpf policy read the IPv6 maps as the program does.
	view, err := OpenPolicyPinned(p.pinDir)
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	if steps, ok, err := view.Trace(b6, a6, policy.TCP, 80); err != nil || !ok || len(steps) != 2 || !strings.Contains(steps[1].Why, "x/allow-a") {
		t.Errorf("trace b → a over IPv6: %+v %v %v", steps, ok, err)
	}
	if steps, ok, err := view.Trace(stranger, a6, policy.TCP, 80); err != nil || ok || len(steps) != 1 || steps[0].Endpoint != "x/a" {
		t.Errorf("trace of a stranger → a over IPv6: %+v %v %v", steps, ok, err)
	}
	if _, _, err := view.Trace(b4, a6, policy.TCP, 80); err == nil {
		t.Error("a trace across families accepted")
	}
	eps, err := view.Endpoints()
	var rules6 int
	for _, e := range eps {
		if e.Address == a6 && e.Pod == "x/a" && e.Ingress {
			rules6 = len(e.Rules)
		}
	}
	if err != nil || rules6 != 2 {
		t.Errorf("a's IPv6 endpoint in skiff bpf policy: %d rules (%v), want 2: %+v", rules6, err, eps)
	}

	drops, err := p.Drops()
	found := false
	for _, d := range drops {
		found = found || (d.Endpoint == a6 && d.Direction == policy.Ingress && d.Packets >= 2)
	}
	if err != nil || !found {
		t.Errorf("drops %+v (%v), want a's IPv6 ingress drops counted", drops, err)
	}

	// The policy goes: a's IPv6 ingress passes again.
	res, _ = policy.Compile(policy.NewAllocator(), nil, pods, []policy.Namespace{{Name: "x"}}, nil)
	if _, err := p.Sync(res, func(netip.Addr) bool { return true }, nil); err != nil {
		t.Fatal(err)
	}
	if runProg(t, p.objs.SkiffPolicyToPod, l6packet(b6, a6, 0)) != tcxNext {
		t.Error("b → a after the policy went: dropped")
	}
}

// floodPolicy loads the programs with x/server isolated (nothing admitted) and returns them
// with a packet its policy drops.
func floodPolicy(tb testing.TB) (*Policy, []byte) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Fatal("needs root (BPF)")
	}
	dir := filepath.Join(loader.BPFFS, fmt.Sprintf("skiff-flood-%d", os.Getpid()))
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	p, err := LoadPolicy(dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	server, client := netip.MustParseAddr("10.244.0.1"), netip.MustParseAddr("10.244.0.2")
	pods := []policy.Pod{
		{Namespace: "x", Name: "server", Labels: map[string]string{"app": "server"}, IPs: []netip.Addr{server}},
		{Namespace: "x", Name: "client", Labels: map[string]string{"app": "client"}, IPs: []netip.Addr{client}},
	}
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "deny"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}}}}
	res, _ := policy.Compile(policy.NewAllocator(), []*networkingv1.NetworkPolicy{deny}, pods, nil, nil)
	if _, err := p.Sync(res, func(netip.Addr) bool { return true }, nil); err != nil {
		tb.Fatal(err)
	}
	return p, l4packet(client, server, policy.TCP, 40000, 80)
}

// lostEvents sums the per-CPU counter of events the ring had no room for.
func lostEvents(tb testing.TB, p *Policy) uint64 {
	tb.Helper()
	var perCPU []uint64
	if err := p.objs.SkiffFlowLost.Lookup(uint32(0), &perCPU); err != nil {
		tb.Fatal(err)
	}
	var n uint64
	for _, v := range perCPU {
		n += v
	}
	return n
}

// drainEvents reads every event waiting in the ring.
func drainEvents(tb testing.TB, rd *ringbuf.Reader) int {
	tb.Helper()
	n := 0
	for {
		rd.SetDeadline(time.Now())
		if _, err := rd.Read(); err != nil {
			return n
		}
		n++
	}
}

// A flood of dropped packets with nobody reading fills the ring and no more: every event is
// either in the ring or counted as lost, and the packets are dropped all the same.
func TestFlowEventsLostAreCounted(t *testing.T) {
	p, pkt := floodPolicy(t)
	rd := flowEvents(t, p)
	const packets = 50000
	ret, _, err := p.objs.SkiffPolicyToPod.Benchmark(pkt, packets, nil)
	if err != nil || ret != tcxDrop {
		t.Fatalf("verdict %d, %v", ret, err)
	}
	written, lost := drainEvents(t, rd), lostEvents(t, p)
	if uint64(written)+lost != packets || lost == 0 || written == 0 {
		t.Fatalf("%d events written and %d lost for %d drops: want all %d accounted for, some lost", written, lost, packets, packets)
	}
	t.Logf("%d drops with nobody reading: %d events in the ring, %d counted lost", packets, written, lost)
	// Off, nothing is written or lost.
	setFlowEvents(t, p, false)
	if _, _, err := p.objs.SkiffPolicyToPod.Benchmark(pkt, 1000, nil); err != nil {
		t.Fatal(err)
	}
	if n, l := drainEvents(t, rd), lostEvents(t, p); n != 0 || l != lost {
		t.Fatalf("events off: %d written, %d more lost", n, l-lost)
	}
}

// BenchmarkFlowEventsFlood is the cost of an event on the datapath's two event paths — a
// dropped packet (an event each) and a new connection admitted (an event once) — with events
// off and on, and a flood's losses: 1,000,000 drops with nobody reading.
func BenchmarkFlowEventsFlood(b *testing.B) {
	p, drop := floodPolicy(b)
	rd := flowEvents(b, p)
	open := l4packet(netip.MustParseAddr("10.244.0.1"), netip.MustParseAddr("10.244.0.2"), policy.TCP, 40000, 80) // to the unpoliced client
	perPacket := func(pkt []byte, repeat int, fresh bool) time.Duration {
		var ds []time.Duration
		for range 301 {
			if fresh {
				clearFlows(nil, p)
			}
			_, d, err := p.objs.SkiffPolicyToPod.Benchmark(pkt, repeat, nil)
			if err != nil {
				b.Fatal(err)
			}
			ds = append(ds, d)
			drainEvents(b, rd)
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	for i := 0; i < b.N; i++ {
		setFlowEvents(b, p, false)
		dropOff, newOff := perPacket(drop, 100, false), perPacket(open, 1, true)
		setFlowEvents(b, p, true)
		dropOn, newOn := perPacket(drop, 100, false), perPacket(open, 1, true)
		lostBefore := lostEvents(b, p)
		drainEvents(b, rd)
		const flood = 1000000
		if _, _, err := p.objs.SkiffPolicyToPod.Benchmark(drop, flood, nil); err != nil {
			b.Fatal(err)
		}
		written, lost := drainEvents(b, rd), lostEvents(b, p)-lostBefore
		fmt.Printf("\nFlow events on the datapath (BPF_PROG_RUN, median of 301)   off         on          on/off\n")
		fmt.Printf("  a dropped packet (an event each)                      %8v   %8v   %6.2fx\n", dropOff, dropOn, float64(dropOn)/float64(dropOff))
		fmt.Printf("  a new connection admitted (an event once)             %8v   %8v   %6.2fx\n", newOff, newOn, float64(newOn)/float64(newOff))
		fmt.Printf("  a flood of %d drops, nobody reading: %d events in the ring, %d counted lost (%d unaccounted)\n",
			flood, written, lost, flood-uint64(written)-lost)
		b.ReportMetric(float64(dropOn)/float64(dropOff), "drop-on/off")
		b.ReportMetric(float64(newOn)/float64(newOff), "new-on/off")
		b.ReportMetric(float64(lost), "flood-lost")
	}
}
