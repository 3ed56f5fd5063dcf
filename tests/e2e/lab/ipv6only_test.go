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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	skifflab "github.com/skiff-sh/skiff/lab"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestLabIPv6Only brings up an IPv6-only lab (`skiff lab up --ip-family ipv6`, BIRD as the
// ToR: the conformance runs use FRR) and checks, with the real kubectl and the ToR's kernel
// table: no host has an IPv4 address on the fabric; every node has one InternalIP, IPv6, and
// one pod block, a /64; the BGP sessions to the ToR are IPv6 ones carrying IPv6 only; pods get
// one address, IPv6, and reach each other across nodes with it; the host reaches them
// through its route into the lab; a Service gets an IPv6 ClusterIP by default and pods reach
// it by name through the cluster DNS at its IPv6 address; the ToR reaches the pods through an
// IPv6 NodePort and an IPv6 LoadBalancer address; the API server reaches the agents over IPv6
// (kubectl logs and exec); an IPv6 ipBlock policy holds; an agent restart loses no packet.
func TestLabIPv6Only(t *testing.T) {
	const name = "e2e6only"
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	l := familyLab(ctx, t, name, "bird", "ipv6")
	cfg, err := clientcmd.BuildConfigFromFlags("", skifflab.Kubeconfig(name))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cfg.Host, "https://[2001:2:0:ffff::2]") {
		t.Errorf("the host's kubeconfig names the server %s, want the host link's IPv6 end", cfg.Host)
	}

	// Every node: one InternalIP and one pod block, both IPv6.
	nodes, err := l.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]netip.Prefix{}
	for _, n := range nodes.Items {
		var ips []string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ips = append(ips, a.Address)
			}
		}
		if len(ips) != 1 || !strings.HasPrefix(ips[0], "2001:2::") {
			t.Errorf("node %s InternalIPs %v, want its IPv6 fabric address only", n.Name, ips)
		}
		if len(n.Spec.PodCIDRs) != 1 {
			t.Fatalf("node %s podCIDRs %v, want one IPv6 block", n.Name, n.Spec.PodCIDRs)
		}
		p := netip.MustParsePrefix(n.Spec.PodCIDRs[0])
		if p.Bits() != 64 || !netip.MustParsePrefix("fd00:10:244::/56").Contains(p.Addr()) {
			t.Errorf("node %s block %s, want a /64 of fd00:10:244::/56", n.Name, p)
		}
		blocks[strings.TrimPrefix(n.Name, name+"-")] = p
	}
	// No IPv4 on the fabric; every other node's block through that node's IPv6 address, by BGP.
	for _, host := range []string{"master", "node1", "node2"} {
		if out, _ := l.in(host, "ip", "-4", "addr", "show", "dev", "eth0"); strings.Contains(out, "inet ") {
			t.Errorf("%s has an IPv4 address on the fabric:\n%s", host, out)
		}
	}
	l.routesVia6(blocks)
	// The session to the ToR is an IPv6 one (skiff bgp peers), and the ToR installed the blocks.
	if out, err := l.in("node1", l.bin, "bgp", "peers"); err != nil || !regexp.MustCompile(`2001:2::fe\s+64512\s+ESTABLISHED`).MatchString(out) {
		t.Errorf("skiff bgp peers on node1: want an Established session with 2001:2::fe: %v\n%s", err, out)
	}
	framework.Eventually(t, 30*time.Second, "the ToR's IPv6 routes", func() (bool, string) {
		kernel, _ := l.in("tor", "ip", "-6", "route")
		for _, p := range blocks {
			if !regexp.MustCompile(regexp.QuoteMeta(p.String()) + ` .*via 2001:2::\d+`).MatchString(kernel) {
				return false, kernel
			}
		}
		return true, ""
	})

	// Pods: one address, IPv6, from the node's block; across nodes with their own addresses.
	p1, p2 := l.pod("p1", "node1"), l.pod("p2", "node2")
	only6 := func(p *corev1.Pod, node string) string {
		if len(p.Status.PodIPs) != 1 || !blocks[node].Contains(netip.MustParseAddr(p.Status.PodIP)) {
			t.Fatalf("%s podIPs %v, want one address of %s", p.Name, p.Status.PodIPs, blocks[node])
		}
		return p.Status.PodIP
	}
	ip1, ip2 := only6(p1, "node1"), only6(p2, "node2")
	if got := l.fetch("p1", "http://["+ip2+"]:8080/clientip"); !strings.HasPrefix(got, "["+ip1+"]:") {
		t.Errorf("p2 saw p1 as %q, want %s", got, ip1)
	}
	netutil := filepath.Join(filepath.Dir(l.bin), "netutil")
	framework.Eventually(t, 20*time.Second, "the host reaches p2", func() (bool, string) {
		out, err := exec.CommandContext(ctx, netutil, "fetch", "http://["+ip2+"]:8080/hostname").CombinedOutput()
		return err == nil && strings.TrimSpace(string(out)) == "p2", string(out)
	})
	// The API server reaches the agents over IPv6: logs and exec (fetch above) work.
	if _, err := l.kubectlErr("logs", "p2"); err != nil {
		t.Errorf("kubectl logs p2: %v", err)
	}

	l.ipv6OnlyService(ip1)
	l.ipv6Policy(ip1, ip2)
	pingFromPod(t, l, p1, ip2, "node2", true)
	l.linkLocalPeer(ip2)
	l.kubectl("delete", "pod", "p1", "p2", "--wait=false")
}

// linkLocalPeer moves node1's session with the ToR to their link-local addresses (the
// bgp.skiff.sh/peers annotation names fe80::…%eth0; BIRD gets a protocol for node1's
// link-local address on its bridge) and checks that the session comes up, that both ends
// still route each other's blocks through the nodes' global addresses, and that p1 still
// reaches p2 (ip2).
func (l *lab) linkLocalPeer(ip2 string) {
	l.t.Helper()
	linkLocal := func(host, dev string) string {
		out, err := l.in(host, "ip", "-6", "-o", "addr", "show", "dev", dev, "scope", "link")
		m := regexp.MustCompile(`inet6 (fe80::[0-9a-f:]+)/64`).FindStringSubmatch(out)
		if err != nil || m == nil {
			l.t.Fatalf("%s's link-local address on %s: %v\n%s", host, dev, err, out)
		}
		return m[1]
	}
	tor, node1 := linkLocal("tor", "fabric"), linkLocal("node1", "eth0")
	dir := filepath.Join(skifflab.Root, l.name, "tor")
	conf, err := os.ReadFile(filepath.Join(dir, "bird.conf"))
	if err != nil {
		l.t.Fatal(err)
	}
	conf = append(conf, fmt.Sprintf(`
protocol bgp node1ll {
  local as %[1]d;
  neighbor %[2]s%%fabric as %[1]d;
  rr client;
  direct;
  graceful restart on;
  ipv6 { import all; export where source = RTS_BGP; next hop keep; };
}
`, skifflab.ASN, node1)...)
	if err := os.WriteFile(filepath.Join(dir, "bird.conf"), conf, 0o644); err != nil {
		l.t.Fatal(err)
	}
	if out, err := l.in("tor", "birdc", "-s", filepath.Join(dir, "bird.ctl"), "configure"); err != nil || !strings.Contains(out, "Reconfigured") {
		l.t.Fatalf("birdc configure: %v\n%s", err, out)
	}
	peer := tor + "%eth0"
	l.kubectl("annotate", "node", l.name+"-node1", fmt.Sprintf(`bgp.skiff.sh/peers=[{"address": "%s", "asn": %d, "holdTime": "9s", "keepaliveTime": "3s"}]`, peer, skifflab.ASN))
	framework.Eventually(l.t, 60*time.Second, "node1's link-local session Established", func() (bool, string) {
		out, _ := l.in("node1", l.bin, "bgp", "peers")
		return regexp.MustCompile(regexp.QuoteMeta(peer)+`\s+64512\s+ESTABLISHED`).MatchString(out) && !strings.Contains(out, "2001:2::fe"), out
	})
	blocks := l.podCIDRs()
	framework.Eventually(l.t, 60*time.Second, "routes over the link-local session", func() (bool, string) {
		bird, _ := l.in("tor", "birdc", "-s", filepath.Join(dir, "bird.ctl"), "show", "protocols")
		torRoutes, _ := l.in("tor", "ip", "-6", "route", "show", blocks["node1"])
		node1Routes, _ := l.in("node1", "ip", "-6", "route", "show", blocks["node2"])
		ok := regexp.MustCompile(`node1ll\s+BGP\s+---\s+up`).MatchString(bird) &&
			strings.Contains(torRoutes, "via 2001:2::2") && strings.Contains(node1Routes, "via 2001:2::3 dev eth0 proto bgp")
		return ok, bird + "--- ToR: " + torRoutes + "--- node1: " + node1Routes
	})
	if got := strings.TrimSpace(l.fetch("p1", "http://["+ip2+"]:8080/hostname")); got != "p2" {
		l.t.Errorf("p1 → p2 with node1 peering over link-local: %q", got)
	}
}

// ipv6OnlyService puts p1 and p2 behind a LoadBalancer Service with no ipFamilies (the
// cluster's only family: IPv6) and checks its ClusterIP, that a pod resolves it by name
// through the cluster DNS (resolv.conf names kube-dns's IPv6 ClusterIP) and reaches both
// pods, and that the ToR reaches both through node1's IPv6 NodePort and the Service's IPv6
// LoadBalancer address.
func (l *lab) ipv6OnlyService(ip1 string) {
	l.t.Helper()
	l.kubectl("label", "pod", "p1", "p2", "app=v6")
	remove := l.apply(`apiVersion: v1
kind: Service
metadata: {name: v6}
spec:
  type: LoadBalancer
  selector: {app: v6}
  ports: [{port: 80, targetPort: 8080}]
`)
	defer remove()
	svc, err := l.client.CoreV1().Services("default").Get(l.ctx, "v6", metav1.GetOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	if len(svc.Spec.ClusterIPs) != 1 || !netip.MustParsePrefix("fd00:10:96::/108").Contains(netip.MustParseAddr(svc.Spec.ClusterIP)) ||
		len(svc.Spec.IPFamilies) != 1 || svc.Spec.IPFamilies[0] != corev1.IPv6Protocol {
		l.t.Fatalf("Service ClusterIPs %v families %v, want one IPv6 address of fd00:10:96::/108", svc.Spec.ClusterIPs, svc.Spec.IPFamilies)
	}
	dnsSvc, err := l.client.CoreV1().Services("kube-system").Get(l.ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	if resolv := l.kubectl("exec", "p1", "--", "netutil", "cat", "/etc/resolv.conf"); !strings.Contains(resolv, "nameserver "+dnsSvc.Spec.ClusterIP+"\n") || !strings.Contains(dnsSvc.Spec.ClusterIP, ":") {
		l.t.Errorf("p1's resolv.conf, want kube-dns's IPv6 ClusterIP %s:\n%s", dnsSvc.Spec.ClusterIP, resolv)
	}
	framework.Eventually(l.t, 20*time.Second, "p1 resolves v6 and kubernetes.default", func() (bool, string) {
		a, err1 := l.kubectlErr("exec", "p1", "--", "netutil", "dns", "v6")
		k, err2 := l.kubectlErr("exec", "p1", "--", "netutil", "dns", "kubernetes.default")
		return err1 == nil && err2 == nil && strings.TrimSpace(a) == svc.Spec.ClusterIP && strings.TrimSpace(k) == "fd00:10:96::1", a + k
	})
	seen := map[string]bool{}
	framework.Eventually(l.t, 30*time.Second, "p1 reaches both pods by the Service's name", func() (bool, string) {
		seen[strings.TrimSpace(l.fetchErr("p1", "http://v6/hostname"))] = true
		return seen["p1"] && seen["p2"], fmt.Sprint(seen)
	})
	// The socket programs connect p1 straight to a backend: whichever answers sees p1's address.
	if got := strings.TrimSpace(l.fetch("p1", "http://v6.default.svc.cluster.local/clientip")); !strings.HasPrefix(got, "["+ip1+"]:") {
		l.t.Errorf("a client through the ClusterIP seen as %q, want p1's %s", got, ip1)
	}
	netutil := filepath.Join(filepath.Dir(l.bin), "netutil")
	viaNode1 := fmt.Sprintf("http://[2001:2::2]:%d/hostname", svc.Spec.Ports[0].NodePort)
	fromToR := map[string]bool{}
	framework.Eventually(l.t, 30*time.Second, "the ToR reaches both pods through node1's NodePort", func() (bool, string) {
		host, err := l.in("tor", netutil, "fetch", viaNode1, "--timeout", "2s")
		fromToR[strings.TrimSpace(host)] = err == nil
		return fromToR["p1"] && fromToR["p2"], fmt.Sprint(fromToR, err)
	})
	var lb string
	framework.Eventually(l.t, 30*time.Second, "an IPv6 LoadBalancer address", func() (bool, string) {
		got, err := l.client.CoreV1().Services("default").Get(l.ctx, "v6", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		in := got.Status.LoadBalancer.Ingress
		if len(in) != 1 || !skifflab.LoadBalancerPool6.Contains(netip.MustParseAddr(in[0].IP)) {
			return false, fmt.Sprint(in)
		}
		lb = in[0].IP
		return true, ""
	})
	fromLB := map[string]bool{}
	framework.Eventually(l.t, 30*time.Second, "the ToR reaches both pods through the LoadBalancer address", func() (bool, string) {
		host, err := l.in("tor", netutil, "fetch", "http://["+lb+"]/hostname", "--timeout", "2s")
		fromLB[strings.TrimSpace(host)] = err == nil
		return fromLB["p1"] && fromLB["p2"], fmt.Sprint(fromLB, err)
	})
}
