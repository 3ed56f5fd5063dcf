package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	skifflab "github.com/skiff-sh/skiff/lab"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestLabDualStackFRR and TestLabDualStackBIRD bring up a dual-stack lab (`skiff lab up
// --ip-family dual`) and check, with the real kubectl and the ToR's own CLI: every node has
// an address and a pod block per family; pods get an address per family, IPv4 first; pods on
// different nodes reach each other over IPv6 with their own addresses, routed by BGP (MP-BGP
// IPv6 unicast over the IPv4 sessions, the node's IPv6 address as next hop), no overlay; the
// ToR holds and installs the IPv6 blocks; the host reaches a pod's IPv6 address through its
// route into the lab; a dual-stack Service answers on its IPv6 ClusterIP from the socket
// programs, with the client's IPv6 address kept; a NetworkPolicy's IPv6 ipBlock with an
// except holds over IPv6; an agent restart loses no IPv6 packet.
func TestLabDualStackFRR(t *testing.T)  { runDualStack(t, "e2edfrr", "frr") }
func TestLabDualStackBIRD(t *testing.T) { runDualStack(t, "e2edbird", "bird") }

func runDualStack(t *testing.T, name, tor string) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	l := familyLab(ctx, t, name, tor, "dual")

	// Every node: an InternalIP and a pod block per family, IPv4 first.
	nodes, err := l.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]netip.Prefix{} // node role -> IPv6 block
	for _, n := range nodes.Items {
		var ips []string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ips = append(ips, a.Address)
			}
		}
		if len(ips) != 2 || !strings.HasPrefix(ips[0], "198.18.0.") || !strings.HasPrefix(ips[1], "2001:2::") {
			t.Errorf("node %s InternalIPs %v, want its IPv4 then its IPv6 fabric address", n.Name, ips)
		}
		if len(n.Spec.PodCIDRs) != 2 {
			t.Fatalf("node %s podCIDRs %v, want one per family", n.Name, n.Spec.PodCIDRs)
		}
		p6 := netip.MustParsePrefix(n.Spec.PodCIDRs[1])
		if !p6.Addr().Is6() || p6.Bits() != 64 || !netip.MustParsePrefix("fd00:10:244::/56").Contains(p6.Addr()) {
			t.Errorf("node %s IPv6 block %s, want a /64 of fd00:10:244::/56", n.Name, p6)
		}
		blocks[strings.TrimPrefix(n.Name, name+"-")] = p6
	}
	// The real kubectl shows both addresses.
	if out := l.kubectl("get", "nodes", name+"-node1", "-o", "jsonpath={.status.addresses[*].address}"); !strings.Contains(out, "198.18.0.2 2001:2::2") {
		t.Errorf("kubectl: node1's addresses %q", out)
	}

	// Every node routes every other node's IPv6 block through that node's IPv6 address.
	l.routesVia6(blocks)
	// skiff bgp routes shows both tables.
	if out, err := l.in("node1", l.bin, "bgp", "routes"); err != nil || !strings.Contains(out, blocks["node2"].String()) || !strings.Contains(out, "10.244.") {
		t.Errorf("skiff bgp routes on node1 lacks node2's IPv6 block %s or the IPv4 blocks: %v\n%s", blocks["node2"], err, out)
	}
	// The ToR learned them (its own CLI) and installed them.
	framework.Eventually(t, 30*time.Second, "the ToR's IPv6 table", func() (bool, string) {
		var cli []string
		switch tor {
		case "frr":
			cli = []string{"vtysh", "-N", name + "-tor", "-c", "show bgp ipv6 unicast"}
		case "bird":
			cli = []string{"birdc", "-s", filepath.Join(skifflab.Root, name, "tor", "bird.ctl"), "show", "route"}
		}
		table, err := l.in("tor", cli...)
		kernel, _ := l.in("tor", "ip", "-6", "route")
		for _, p := range blocks {
			if !strings.Contains(table, p.String()) || !regexp.MustCompile(regexp.QuoteMeta(p.String())+` .*via 2001:2::\d+`).MatchString(kernel) {
				return false, fmt.Sprintf("%v\n%s\n--- ip -6 route\n%s", err, table, kernel)
			}
		}
		return true, ""
	})

	// Pods: an address per family, IPv4 first, the IPv6 one from the node's block.
	p1, p2 := l.pod("p1", "node1"), l.pod("p2", "node2")
	v6 := func(p *corev1.Pod, node string) string {
		if len(p.Status.PodIPs) != 2 || p.Status.PodIPs[0].IP != p.Status.PodIP {
			t.Fatalf("%s podIPs %v (podIP %s), want two, podIP first", p.Name, p.Status.PodIPs, p.Status.PodIP)
		}
		a := netip.MustParseAddr(p.Status.PodIPs[1].IP)
		if !blocks[node].Contains(a) {
			t.Errorf("%s IPv6 %s outside %s's block %s", p.Name, a, node, blocks[node])
		}
		return a.String()
	}
	ip1, ip2 := v6(p1, "node1"), v6(p2, "node2")
	if out := l.kubectl("get", "pod", "p1", "-o", "jsonpath={.status.podIPs[*].ip}"); out != p1.Status.PodIP+" "+ip1 {
		t.Errorf("kubectl: p1's podIPs %q", out)
	}

	// Pod to pod across nodes over IPv6, with the pods' own addresses (no NAT, no overlay:
	// the fabric carries them).
	captured := l.captureOnFabric(fmt.Sprintf("ip6 and tcp and src host %s and dst host %s", ip1, ip2))
	if got := l.fetch("p1", "http://["+ip2+"]:8080/clientip"); !strings.HasPrefix(got, "["+ip1+"]:") {
		t.Errorf("p2 saw the client as %q, want p1's IPv6 address %s", got, ip1)
	}
	if got := l.fetch("p2", "http://["+ip1+"]:8080/hostname"); got != "p1" {
		t.Errorf("p2 → p1 over IPv6 answered %q", got)
	}
	if got := captured(); !strings.Contains(got, ip1) {
		t.Errorf("the fabric did not carry p1's IPv6 packets to p2 as they are: %q", got)
	}

	// The host reaches the pod's IPv6 address through its route into the lab, never its
	// default route.
	out, err := exec.Command("ip", "-6", "route", "get", ip2).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "dev "+name+"-api ") {
		t.Errorf("the host routes %s %q, want through %s-api: %v", ip2, strings.TrimSpace(string(out)), name, err)
	}
	netutil := filepath.Join(filepath.Dir(l.bin), "netutil")
	framework.Eventually(t, 20*time.Second, "the host reaches p2 over IPv6", func() (bool, string) {
		out, err := exec.CommandContext(ctx, netutil, "fetch", "http://["+ip2+"]:8080/hostname").CombinedOutput()
		return err == nil && strings.TrimSpace(string(out)) == "p2", string(out)
	})

	l.dualStackService(ip1, ip2)
	l.ipv6Policy(ip1, ip2)

	// An agent restart loses no IPv6 packet (graceful restart in both families, with the
	// ToR): p1 pings p2's IPv6 address every 50 ms through node2's agent restart.
	pingFromPod(t, l, p1, ip2, "node2", true)
	l.kubectl("delete", "pod", "p1", "p2", "--wait=false")
}

// familyLab brings up a 2-worker lab of an IP family (`skiff lab up --ip-family`) with tor
// as its router, and a client of it; at the end of the test it logs the tails of the nodes'
// logs if the test failed and takes the lab down.
func familyLab(ctx context.Context, t *testing.T, name, tor, family string) *lab {
	t.Helper()
	framework.AgentArtifacts(t)
	l := &lab{t: t, name: name, bin: framework.Binary(t), ctx: ctx}
	downAtCleanup(t, name, l.bin, "master", "node1", "node2")
	l.skiff("up", "--nodes", "2", "--tor", tor, "--ip-family", family, "--timeout", "3m")
	cfg, err := clientcmd.BuildConfigFromFlags("", skifflab.Kubeconfig(name))
	if err != nil {
		t.Fatal(err)
	}
	if l.client, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return l
}

// routesVia6 waits until every node routes every other node's IPv6 block (blocks, by role)
// through that node's IPv6 address, learned by BGP.
func (l *lab) routesVia6(blocks map[string]netip.Prefix) {
	l.t.Helper()
	for _, host := range []string{"master", "node1", "node2"} {
		framework.Eventually(l.t, 60*time.Second, host+"'s IPv6 routes", func() (bool, string) {
			out, _ := l.in(host, "ip", "-6", "route")
			for other, p := range blocks {
				if other != host && !regexp.MustCompile(regexp.QuoteMeta(p.String())+` via 2001:2::\d+ dev eth0 proto bgp`).MatchString(out) {
					return false, out
				}
			}
			return true, ""
		})
	}
}

// dualStackService puts p1 (ip1) and p2 (ip2) behind a RequireDualStack LoadBalancer Service and
// checks that it has a ClusterIP per family, that p1 reaches both pods through the IPv6 one
// (the socket programs send it to a backend's IPv6 address: p2 sees p1's own IPv6 address)
// and through the IPv4 one, that the ToR reaches both pods through the NodePort on node1's
// IPv6 address (the tc programs: p1 local with the ToR's address kept, p2 across the fabric
// SNATed to node1's IPv6 address), that it gets a LoadBalancer address of each family, the
// IPv6 one advertised by the nodes as a /128 and reached from the ToR over IPv6, and that
// `skiff bpf services` shows the IPv6 frontend.
func (l *lab) dualStackService(ip1, ip2 string) {
	l.t.Helper()
	l.kubectl("label", "pod", "p1", "p2", "app=dual")
	remove := l.apply(`apiVersion: v1
kind: Service
metadata: {name: dual}
spec:
  type: LoadBalancer
  ipFamilyPolicy: RequireDualStack
  selector: {app: dual}
  ports: [{port: 80, targetPort: 8080}]
`)
	defer remove()
	svc, err := l.client.CoreV1().Services("default").Get(l.ctx, "dual", metav1.GetOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	if len(svc.Spec.ClusterIPs) != 2 || !netip.MustParsePrefix("fd00:10:96::/108").Contains(netip.MustParseAddr(svc.Spec.ClusterIPs[1])) {
		l.t.Fatalf("dual-stack Service ClusterIPs %v, want an IPv4 one then one of fd00:10:96::/108", svc.Spec.ClusterIPs)
	}
	v4, v6 := svc.Spec.ClusterIPs[0], svc.Spec.ClusterIPs[1]
	seen := map[string]bool{}
	framework.Eventually(l.t, 30*time.Second, "p1 reaches both pods through the IPv6 ClusterIP", func() (bool, string) {
		seen[strings.TrimSpace(l.fetchErr("p1", "http://["+v6+"]/hostname"))] = true
		return seen["p1"] && seen["p2"], fmt.Sprint(seen)
	})
	framework.Eventually(l.t, 30*time.Second, "p2 sees p1's IPv6 address through the IPv6 ClusterIP", func() (bool, string) {
		got := strings.TrimSpace(l.fetchErr("p1", "http://["+v6+"]/clientip"))
		return strings.HasPrefix(got, "["+ip1+"]:"), got
	})
	if got := l.fetch("p2", "http://"+v4+"/hostname"); got != "p1" && got != "p2" {
		l.t.Errorf("p2 through the IPv4 ClusterIP %s: %q", v4, got)
	}
	netutil := filepath.Join(filepath.Dir(l.bin), "netutil")
	viaNode1 := fmt.Sprintf("http://[2001:2::2]:%d", svc.Spec.Ports[0].NodePort)
	fromToR := map[string]bool{}
	framework.Eventually(l.t, 30*time.Second, "the ToR reaches both pods through node1's IPv6 NodePort", func() (bool, string) {
		host, err1 := l.in("tor", netutil, "fetch", viaNode1+"/hostname", "--timeout", "2s")
		client, err2 := l.in("tor", netutil, "fetch", viaNode1+"/clientip", "--timeout", "2s")
		if err1 == nil && err2 == nil {
			fromToR[strings.TrimSpace(host)] = true
			// p1 (local) sees the ToR, p2 (remote) node1's IPv6 address.
			c := strings.TrimSpace(client)
			if !strings.HasPrefix(c, "[2001:2::fe]:") && !strings.HasPrefix(c, "[2001:2::2]:") {
				l.t.Errorf("a NodePort client seen as %q, want the ToR's or node1's IPv6 address", c)
			}
		}
		return fromToR["p1"] && fromToR["p2"], fmt.Sprint(fromToR, err1, err2)
	})
	// The LoadBalancer addresses: one per family, in the Service's family order; the IPv6
	// one from the lab's IPv6 pool, a /128 at the ToR through the nodes, answering.
	var lb6 string
	framework.Eventually(l.t, 30*time.Second, "a LoadBalancer address per family", func() (bool, string) {
		got, err := l.client.CoreV1().Services("default").Get(l.ctx, "dual", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		in := got.Status.LoadBalancer.Ingress
		if len(in) != 2 || !skifflab.LoadBalancerPool.Contains(netip.MustParseAddr(in[0].IP)) || !skifflab.LoadBalancerPool6.Contains(netip.MustParseAddr(in[1].IP)) {
			return false, fmt.Sprint(in)
		}
		lb6 = in[1].IP
		return true, ""
	})
	framework.Eventually(l.t, 30*time.Second, "the ToR routes the IPv6 LoadBalancer address to the nodes", func() (bool, string) {
		out, _ := l.in("tor", "ip", "-6", "route", "show", lb6+"/128")
		return strings.Contains(out, "2001:2::2") && strings.Contains(out, "2001:2::3"), out
	})
	fromLB := map[string]bool{}
	framework.Eventually(l.t, 30*time.Second, "the ToR reaches both pods through the IPv6 LoadBalancer address", func() (bool, string) {
		for i := 0; i < 4; i++ {
			if host, err := l.in("tor", netutil, "fetch", "http://["+lb6+"]/hostname", "--timeout", "2s"); err == nil {
				fromLB[strings.TrimSpace(host)] = true
			}
		}
		return fromLB["p1"] && fromLB["p2"], fmt.Sprint(fromLB)
	})
	// The cluster DNS answers AAAA with the IPv6 ClusterIP, and its reverse name.
	framework.Eventually(l.t, 20*time.Second, "AAAA and ip6.arpa answers", func() (bool, string) {
		aaaa, err1 := l.in("node1", l.bin, "dns", "query", "dual.default.svc.cluster.local", "--type", "AAAA")
		rev, _ := dns.ReverseAddr(v6)
		ptr, err2 := l.in("node1", l.bin, "dns", "query", rev, "--type", "PTR")
		return err1 == nil && err2 == nil && strings.Contains(aaaa, "\tAAAA\t"+v6) && strings.Contains(ptr, "dual.default.svc.cluster.local."), aaaa + ptr
	})
	if out, err := exec.Command(l.bin, "bpf", "services", "--node", l.name+"-node1").CombinedOutput(); err != nil || !strings.Contains(string(out), "["+v6+"]:80/TCP") || !strings.Contains(string(out), "["+ip2+"]:8080") {
		l.t.Errorf("skiff bpf services on node1 lacks the IPv6 frontend [%s]:80 with backend [%s]:8080: %v\n%s", v6, ip2, err, out)
	}
}

// ipv6Policy admits p2's ingress from every IPv6 address but p1's (an ipBlock ::/0 with an
// except) and checks that p1 is refused over IPv6 while the host reaches p2 over IPv6, and
// that `skiff policy trace` names the verdicts; the policy goes at the end.
func (l *lab) ipv6Policy(ip1, ip2 string) {
	l.t.Helper()
	l.kubectl("label", "pod", "p2", "role=target")
	remove := l.apply(fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: v6-but-p1}
spec:
  podSelector: {matchLabels: {role: target}}
  ingress: [{from: [{ipBlock: {cidr: "::/0", except: ["%s/128"]}}]}]
`, ip1))
	defer remove()
	netutil := filepath.Join(filepath.Dir(l.bin), "netutil")
	framework.Eventually(l.t, 20*time.Second, "p1 refused by p2's IPv6 ipBlock, the host admitted", func() (bool, string) {
		denied := l.fetchErr("p1", "http://["+ip2+"]:8080/hostname")
		out, err := exec.CommandContext(l.ctx, netutil, "fetch", "http://["+ip2+"]:8080/hostname", "--timeout", "2s").CombinedOutput()
		return strings.TrimSpace(denied) != "p2" && err == nil && strings.TrimSpace(string(out)) == "p2", denied + " / " + string(out)
	})
	out, err := exec.Command(l.bin, "policy", "trace", ip1, ip2, "--port", "8080", "--node", l.name+"-node2").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "verdict: DENIED") || !strings.Contains(string(out), "default/p2") {
		l.t.Errorf("skiff policy trace %s → %s over IPv6: %v\n%s", ip1, ip2, err, out)
	}
}

// downAtCleanup takes the lab down with bin when the test ends, first showing the tail of
// each node's log (master.log, node1.log, …) if the test failed.
func downAtCleanup(t *testing.T, name, bin string, nodes ...string) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range nodes {
				b, _ := os.ReadFile(filepath.Join(skifflab.Root, name, n+".log"))
				if len(b) > 3000 {
					b = b[len(b)-3000:]
				}
				t.Logf("--- %s.log\n%s", n, b)
			}
		}
		if out, err := exec.Command(bin, "lab", "down", "--name", name).CombinedOutput(); err != nil {
			t.Errorf("skiff lab down: %v\n%s", err, out)
		}
	})
}
