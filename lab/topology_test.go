package lab

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestSpecValidate(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		ok   bool
	}{
		{Spec{Name: "lab", Nodes: 2, ToR: ToRFRR}, true},
		{Spec{Name: "a1", Nodes: 0, ToR: ToRNone}, true},
		{Spec{Name: "lab", Nodes: 100, ToR: ToRBIRD}, true},
		{Spec{Name: "", Nodes: 2, ToR: ToRFRR}, false},
		{Spec{Name: "Lab", Nodes: 2, ToR: ToRFRR}, false},
		{Spec{Name: "toolongname", Nodes: 2, ToR: ToRFRR}, false},
		{Spec{Name: "1lab", Nodes: 2, ToR: ToRFRR}, false},
		{Spec{Name: "la-b", Nodes: 2, ToR: ToRFRR}, false},
		{Spec{Name: "lab", Nodes: -1, ToR: ToRFRR}, false},
		{Spec{Name: "lab", Nodes: 101, ToR: ToRFRR}, false},
		{Spec{Name: "lab", Nodes: 2, ToR: "quagga"}, false},
		{Spec{Name: "lab", Nodes: 1, ToR: ToRFRR, ClusterCIDR: netip.MustParsePrefix("10.128.0.0/9")}, true},
		{Spec{Name: "lab", Nodes: 1, ToR: ToRFRR, ClusterCIDR: netip.MustParsePrefix("10.0.0.0/8")}, false},    // holds the Service range
		{Spec{Name: "lab", Nodes: 1, ToR: ToRFRR, ClusterCIDR: netip.MustParsePrefix("198.18.0.0/16")}, false}, // the fabric
		{Spec{Name: "lab", Nodes: 1, ToR: ToRFRR, ClusterCIDR: netip.MustParsePrefix("10.128.0.0/25")}, false}, // not one node's block
		{Spec{Name: "lab", Nodes: 1, ToR: ToRFRR, ClusterCIDR: netip.MustParsePrefix("fd00::/48")}, false},
	} {
		if err := tc.spec.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: err = %v, want ok=%v", tc.spec, err, tc.ok)
		}
	}
}

func TestAddresses(t *testing.T) {
	s := Spec{Name: "lab", Nodes: 3, ToR: ToRFRR}
	hosts := s.Hosts()
	want := []struct{ netns, node, ip string }{
		{"lab-master", "lab-master", "198.18.0.1"}, {"lab-node1", "lab-node1", "198.18.0.2"},
		{"lab-node2", "lab-node2", "198.18.0.3"}, {"lab-node3", "lab-node3", "198.18.0.4"},
	}
	if len(hosts) != len(want) {
		t.Fatalf("%d hosts", len(hosts))
	}
	for i, w := range want {
		if h := hosts[i]; h.Netns != w.netns || h.NodeName != w.node || h.IP.String() != w.ip {
			t.Errorf("host %d = %+v, want %+v", i, h, w)
		}
	}
	if tor := s.ToRHost(); tor.Netns != "lab-tor" || tor.IP.String() != "198.18.0.254" || tor.NodeName != "" {
		t.Errorf("tor %+v", tor)
	}
	if s.APIServer() != "https://198.18.0.1:6443" || s.HostAPIServer() != "https://198.19.0.2:6443" {
		t.Errorf("API servers %s %s", s.APIServer(), s.HostAPIServer())
	}
	for _, h := range append(hosts, s.ToRHost()) {
		if !fabric.Contains(h.IP) {
			t.Errorf("%s outside the fabric", h.IP)
		}
	}
}

func TestMissingRoutes(t *testing.T) {
	s := Spec{Name: "t", Nodes: 2, ToR: ToRFRR}
	hosts := s.Hosts()
	cidrs := map[string][]string{"t-master": {"10.244.0.0/24"}, "t-node1": {"10.244.1.0/24"}, "t-node2": {"10.244.2.0/24"}}
	tables := map[string]string{
		"t-master": "10.244.1.0/24 via 198.18.0.2 dev eth0 proto bgp\n10.244.2.0/24 via 198.18.0.3 dev eth0 proto bgp\n",
		// node1 has learned only the master's block; its own is local and not required.
		"t-node1": "10.244.0.0/24 via 198.18.0.1 dev eth0 proto bgp\n10.244.1.2 dev skabc scope link\n198.18.0.0/24 dev eth0 proto kernel scope link src 198.18.0.2\n",
		"t-node2": "",
	}
	got := missingRoutes(hosts, cidrs, func(netns string) (string, error) {
		if netns == "t-node2" {
			return "", errors.New("no such namespace")
		}
		return tables[netns], nil
	})
	want := []string{"node1 has no route to node2's pods (10.244.2.0/24)", "node2: no such namespace"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("missing = %q, want %q", got, want)
	}
	tables["t-node1"] += "10.244.2.0/24 via 198.18.0.3 dev eth0 proto bgp\n"
	tables["t-node2"] = "10.244.0.0/24 via 198.18.0.1 dev eth0 proto bgp\n10.244.1.0/24 via 198.18.0.2 dev eth0 proto bgp\n"
	if got := missingRoutes(hosts, cidrs, func(netns string) (string, error) { return tables[netns], nil }); len(got) != 0 {
		t.Errorf("with every route: missing %q", got)
	}
	// Dual-stack: every block of the other nodes, IPv6's as `ip -6 route` prints them.
	cidrs["t-node2"] = append(cidrs["t-node2"], "fd00:10:244:2::/64")
	tables["t-node1"] += "fd00:10:244:2::/64 via 2001:2::3 dev eth0 proto bgp metric 20 pref medium\n"
	want = []string{"master has no route to node2's pods (fd00:10:244:2::/64)"}
	if got := missingRoutes(hosts, cidrs, func(netns string) (string, error) { return tables[netns], nil }); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("dual-stack: missing %q, want %q", got, want)
	}
}

func TestDualStackSpec(t *testing.T) {
	s := Spec{Name: "t", Nodes: 2, ToR: ToRFRR, IPFamily: DualStack}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := s.Node(2).NodeIPs(); got != "198.18.0.3,2001:2::3" {
		t.Errorf("node2's --node-ip %q", got)
	}
	if got := s.ClusterCIDRs(); got != "10.244.0.0/16,fd00:10:244::/56" {
		t.Errorf("--cluster-cidr %q", got)
	}
	if got := s.ServiceCIDRs(); got != "10.96.0.0/12,fd00:10:96::/108" {
		t.Errorf("--service-cidr %q", got)
	}
	for _, h := range append(s.Hosts(), s.ToRHost()) {
		if !fabric6.Contains(h.IP6) {
			t.Errorf("%s: IPv6 %s outside the fabric", h.Role, h.IP6)
		}
	}
	// Every IPv6 range the lab uses is routed from the host into it.
	routes := s.HostRoutes()
	for _, p := range []netip.Prefix{podCIDR6, serviceCIDR6, fabric6, LoadBalancerPool6} {
		if !slices.Contains(routes, p) {
			t.Errorf("host routes %v lack %s", routes, p)
		}
	}
	if got := s.LoadBalancerPools(); got != "198.18.200.0/24,2001:2:0:200::/120" {
		t.Errorf("--loadbalancer-cidr %q", got)
	}
	if (Spec{Name: "t", Nodes: 1, ToR: ToRFRR}).Node(1).NodeIPs() != "198.18.0.2" {
		t.Error("an IPv4 lab's node has an IPv6 address")
	}
	if err := (Spec{Name: "t", ToR: ToRFRR, IPFamily: "ipv7"}).Validate(); err == nil {
		t.Error("--ip-family ipv7 accepted")
	}
}

func TestIPv6OnlySpec(t *testing.T) {
	s := Spec{Name: "t", Nodes: 2, ToR: ToRBIRD, IPFamily: IPv6}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, h := range append(s.Hosts(), s.ToRHost()) {
		if h.IP.IsValid() || !fabric6.Contains(h.IP6) || h.Addr() != h.IP6 {
			t.Errorf("%s: IPv4 %v, IPv6 %v (primary %v), want IPv6 only on the fabric", h.Role, h.IP, h.IP6, h.Addr())
		}
	}
	for _, tc := range []struct{ name, got, want string }{
		{"node2's --node-ip", s.Node(2).NodeIPs(), "2001:2::3"},
		{"--cluster-cidr", s.ClusterCIDRs(), "fd00:10:244::/56"},
		{"--service-cidr", s.ServiceCIDRs(), "fd00:10:96::/108"},
		{"--loadbalancer-cidr", s.LoadBalancerPools(), "2001:2:0:200::/120"},
		{"the nodes' server", s.APIServer(), "https://[2001:2::1]:6443"},
		{"the host's server", s.HostAPIServer(), "https://[2001:2:0:ffff::2]:6443"},
		{"the ToR's session range", s.sessionRange().String(), "2001:2::/64"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	if routes := s.HostRoutes(); !slices.Equal(routes, []netip.Prefix{podCIDR6, serviceCIDR6, fabric6, LoadBalancerPool6}) {
		t.Errorf("host routes %v, want IPv6's ranges only", routes)
	}
	// The routers: sessions from the IPv6 fabric, the IPv6 family only.
	bird := birdConfig(s, "/dev/null")
	for _, want := range []string{"local 2001:2::fe as 64512;", "neighbor range 2001:2::/64 as 64512;", "ipv6 { import all;"} {
		if !strings.Contains(bird, want) {
			t.Errorf("BIRD's configuration lacks %q:\n%s", want, bird)
		}
	}
	if strings.Contains(bird, "ipv4 { import all;") {
		t.Errorf("BIRD's sessions carry IPv4 in an IPv6-only lab:\n%s", bird)
	}
	frr := frrConfig(s)
	if !strings.Contains(frr, "bgp listen range 2001:2::/64 peer-group nodes") || !strings.Contains(frr, "address-family ipv6 unicast") || strings.Contains(frr, "address-family ipv4 unicast") {
		t.Errorf("FRR's configuration:\n%s", frr)
	}
	if cm := bgpConfigMap(s); !strings.Contains(cm, "address: 2001:2::fe") {
		t.Errorf("the nodes peer with the ToR at:\n%s", cm)
	}
	if (Spec{Name: "t", ToR: ToRFRR, IPFamily: IPv6, ClusterCIDR: netip.MustParsePrefix("10.128.0.0/9")}).Validate() == nil {
		t.Error("an IPv6-only lab took an IPv4 --cluster-cidr")
	}
	// A dual-stack lab's sessions stay IPv4 and carry both families.
	d := Spec{Name: "t", Nodes: 1, ToR: ToRFRR, IPFamily: DualStack}
	if frr := frrConfig(d); !strings.Contains(frr, "bgp listen range 198.18.0.0/24") || !strings.Contains(frr, "address-family ipv4 unicast") || !strings.Contains(frr, "address-family ipv6 unicast") {
		t.Errorf("a dual-stack lab's FRR configuration:\n%s", frr)
	}
}

func TestInferNode(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"bin/skiff", "bpf", "services"}, []string{"bin/skiff", "bpf", "services", "--node", "lab-node1"}},
		{[]string{"/usr/bin/skiff", "bpf", "conntrack", "-o", "json"}, []string{"/usr/bin/skiff", "bpf", "conntrack", "-o", "json", "--node", "lab-node1"}},
		{[]string{"skiff", "bpf", "services", "--node", "lab-node2"}, []string{"skiff", "bpf", "services", "--node", "lab-node2"}},
		{[]string{"skiff", "bpf", "services", "--node=lab-node2"}, []string{"skiff", "bpf", "services", "--node=lab-node2"}},
		{[]string{"skiff", "bgp", "peers"}, []string{"skiff", "bgp", "peers"}},
		{[]string{"ip", "route"}, []string{"ip", "route"}},
		{[]string{"skiff"}, []string{"skiff"}},
	} {
		if got := InferNode(tc.in, "lab-node1"); !slices.Equal(got, tc.want) {
			t.Errorf("InferNode(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestServers(t *testing.T) {
	for _, c := range []struct {
		servers, nodes int
		err            string
	}{{0, 0, ""}, {1, 0, ""}, {3, 2, ""}, {5, 4, ""}, {2, 3, "want 1, 3 or 5"}, {7, 9, "want 1, 3 or 5"}, {3, 1, "needs --nodes 2"}} {
		err := Spec{Name: "x", ToR: ToRNone, Servers: c.servers, Nodes: c.nodes}.Validate()
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("--servers %d --nodes %d: %v, want %q", c.servers, c.nodes, err, c.err)
		}
	}
	s := Spec{Name: "x", ToR: ToRNone, Servers: 3, Nodes: 3}
	if got := s.APIServers(); got != "https://198.18.0.1:6443,https://198.18.0.2:6443,https://198.18.0.3:6443" {
		t.Errorf("APIServers %s", got)
	}
	if !s.IsServer(2) || s.IsServer(3) {
		t.Error("node2 should be a server, node3 an agent")
	}
}
