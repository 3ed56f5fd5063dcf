// Package lab builds skiff's multi-node lab on one machine, as seed 000 draws the cluster:
// a network namespace per node (<name>-master, <name>-node1 …) and one for the top-of-rack
// router (<name>-tor), joined by a bridge in the ToR namespace on 198.18.0.0/24 — the range
// reserved for network benchmarking, so the lab routes nothing that exists outside it. The
// master runs `skiff server` (with its own tainted agent), every node `skiff agent` joined
// with the server's token, the ToR FRR or BIRD. The host reaches the API through a
// point-to-point link into the master's namespace (198.19.0.0/30).
//
// Everything the lab makes is recorded under /var/lib/skiff/lab/<name>, so `skiff lab down`
// removes it even after a crash: processes (by PID, and by the lab's directory and cgroup
// root), namespaces, cgroups and files.
package lab

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
)

// ToR routers the lab can run.
const (
	ToRFRR  = "frr"
	ToRBIRD = "bird"
	ToRNone = "none"
)

// ASN is the lab's AS: nodes and the ToR speak iBGP, the ToR reflecting routes.
const ASN = 64512

var (
	fabric     = netip.MustParsePrefix("198.18.0.0/24")
	torAddr    = netip.MustParseAddr("198.18.0.254")
	hostSide   = netip.MustParseAddr("198.19.0.1")
	masterSide = netip.MustParseAddr("198.19.0.2")
	hostLink   = netip.MustParsePrefix("198.19.0.0/30")
	// LoadBalancerPool is the lab's pool of LoadBalancer addresses (the master's
	// --loadbalancer-cidr), inside the fabric's benchmarking range: the nodes advertise
	// them to the ToR, which spreads them over the nodes (ECMP).
	LoadBalancerPool = netip.MustParsePrefix("198.18.200.0/24")
	nameRE           = regexp.MustCompile(`^[a-z][a-z0-9]{0,7}$`)

	// The cluster's ranges as skiff server defaults them (the lab does not change them).
	podCIDR     = netip.MustParsePrefix("10.244.0.0/16")
	serviceCIDR = netip.MustParsePrefix("10.96.0.0/12")

	// A dual-stack lab's IPv6: the fabric and the host link from the benchmarking range
	// 2001:2::/48 (RFC 5180), as IPv4's are from 198.18.0.0/15; pods and Services from
	// unique local ranges (kind's). The host routes them all into the lab.
	fabric6      = netip.MustParsePrefix("2001:2::/64")
	torAddr6     = netip.MustParseAddr("2001:2::fe")
	hostSide6    = netip.MustParseAddr("2001:2:0:ffff::1")
	masterSide6  = netip.MustParseAddr("2001:2:0:ffff::2")
	hostLink6    = netip.MustParsePrefix("2001:2:0:ffff::/126")
	podCIDR6     = netip.MustParsePrefix("fd00:10:244::/56")
	serviceCIDR6 = netip.MustParsePrefix("fd00:10:96::/108")
	// LoadBalancerPool6 is a dual-stack lab's IPv6 LoadBalancer pool, beside the fabric as
	// IPv4's is; the nodes advertise its addresses as /128s.
	LoadBalancerPool6 = netip.MustParsePrefix("2001:2:0:200::/120")
)

// IP families a lab can have (kind's --ip-family words).
const (
	IPv4      = "ipv4"
	DualStack = "dual"
	IPv6      = "ipv6"
)

// HostRoutes are the ranges the host routes into the lab, through its link to the master,
// for as long as the lab is up: pods, Services, the fabric and the LoadBalancer pool of each
// of the lab's families. A program on the host (the conformance suite dials pods and
// NodePorts) then reaches the lab, or is refused by the master at once (ClusterIPs exist only
// in the pods' socket hooks), and never sends lab traffic out of the host's default route —
// which on many hosts also covers these ranges.
func (s Spec) HostRoutes() []netip.Prefix {
	var out []netip.Prefix
	if s.HasIPv4() {
		out = append(out, s.PodCIDR(), serviceCIDR, fabric, LoadBalancerPool)
	}
	if s.HasIPv6() {
		out = append(out, podCIDR6, serviceCIDR6, fabric6, LoadBalancerPool6)
	}
	return out
}

// families joins the IPv4 and the IPv6 value of a setting with a comma, each only when the
// lab has that family, IPv4 first (the primary family of a dual-stack lab, as kind's).
func (s Spec) families(v4, v6 string) string {
	var out []string
	if s.HasIPv4() {
		out = append(out, v4)
	}
	if s.HasIPv6() {
		out = append(out, v6)
	}
	return strings.Join(out, ",")
}

// LoadBalancerPools are the master's --loadbalancer-cidr: a pool per family.
func (s Spec) LoadBalancerPools() string {
	return s.families(LoadBalancerPool.String(), LoadBalancerPool6.String())
}

// Dual says whether the lab is dual-stack.
func (s Spec) Dual() bool { return s.IPFamily == DualStack }

// HasIPv4 says whether the lab's hosts and cluster have IPv4 (all but IPv6-only labs).
func (s Spec) HasIPv4() bool { return s.IPFamily != IPv6 }

// HasIPv6 says whether they have IPv6 (dual-stack and IPv6-only labs).
func (s Spec) HasIPv6() bool { return s.IPFamily == DualStack || s.IPFamily == IPv6 }

// ClusterCIDRs is the server's --cluster-cidr: a range per family, IPv4 first.
func (s Spec) ClusterCIDRs() string { return s.families(s.PodCIDR().String(), podCIDR6.String()) }

// ServiceCIDRs is the server's --service-cidr, in the same order.
func (s Spec) ServiceCIDRs() string {
	return s.families(serviceCIDR.String(), serviceCIDR6.String())
}

// NodeIPs is a host's --node-ip: its fabric addresses, IPv4 first.
func (h Host) NodeIPs() string {
	var out []string
	for _, a := range []netip.Addr{h.IP, h.IP6} {
		if a.IsValid() {
			out = append(out, a.String())
		}
	}
	return strings.Join(out, ",")
}

// Addr is the host's primary fabric address: IPv4's, or IPv6's in an IPv6-only lab.
func (h Host) Addr() netip.Addr {
	if h.IP.IsValid() {
		return h.IP
	}
	return h.IP6
}

// HostLink is the host's interface into the master's namespace.
func (s Spec) HostLink() string { return s.Name + "-api" }

// Spec is what `skiff lab up` is asked for.
type Spec struct {
	Name  string
	Nodes int
	ToR   string
	// Servers is how many hosts run `skiff server` (HA with embedded etcd): the master, with
	// --cluster-init, and node1 … node<Servers-1> joining it; 0 is 1.
	Servers int `json:",omitempty"`
	// NoServiceProxy runs the agents with --service-proxy=false, so another Service
	// proxy (kube-proxy, for the side-by-side benchmark) can take the nodes.
	NoServiceProxy bool `json:",omitempty"`
	// NoNetworkPolicy runs the agents with --network-policy=false (no policy programs on
	// the pods' veths): the baseline of the policy benchmark.
	NoNetworkPolicy bool `json:",omitempty"`
	// ClusterCIDR, if valid, is the server's --cluster-cidr instead of its default
	// 10.244.0.0/16 (256 node blocks): the scale harness adds thousands of simulated nodes.
	ClusterCIDR netip.Prefix `json:",omitempty"`
	// IPFamily is ipv4 (the default, "" too), dual (every host then also has an IPv6
	// address on the fabric, and the cluster IPv6 pod and Service ranges) or ipv6 (IPv6's
	// addresses and ranges only: no host has an IPv4 address but its loopback's).
	IPFamily string `json:",omitempty"`
}

// PodCIDR is the range the cluster's pod blocks come from.
func (s Spec) PodCIDR() netip.Prefix {
	if s.ClusterCIDR.IsValid() {
		return s.ClusterCIDR.Masked()
	}
	return podCIDR
}

// Validate checks the spec; names are short because they prefix interface names (15 bytes).
func (s Spec) Validate() error {
	if !nameRE.MatchString(s.Name) {
		return fmt.Errorf("lab name %q: use 1-8 lowercase letters and digits, starting with a letter", s.Name)
	}
	if s.Nodes < 0 || s.Nodes > 100 {
		return fmt.Errorf("--nodes %d: the lab takes 0 to 100 worker nodes", s.Nodes)
	}
	if s.Servers < 0 || s.Servers > 5 || s.Servers%2 == 0 && s.Servers != 0 {
		return fmt.Errorf("--servers %d: want 1, 3 or 5 (an odd number keeps a majority when one is lost)", s.Servers)
	}
	if s.Servers > s.Nodes+1 {
		return fmt.Errorf("--servers %d needs --nodes %d or more: the master and node1 … node%d run the servers", s.Servers, s.Servers-1, s.Servers-1)
	}
	switch s.ToR {
	case ToRFRR, ToRBIRD, ToRNone:
	default:
		return fmt.Errorf("--tor %q: want frr, bird or none", s.ToR)
	}
	switch s.IPFamily {
	case "", IPv4, DualStack, IPv6:
	default:
		return fmt.Errorf("--ip-family %q: want ipv4, dual or ipv6", s.IPFamily)
	}
	if c := s.ClusterCIDR; c.IsValid() {
		if !s.HasIPv4() {
			return fmt.Errorf("--cluster-cidr %s: an IPv6-only lab has no IPv4 pods", c)
		}
		for _, r := range []netip.Prefix{serviceCIDR, fabric, hostLink} {
			if c.Overlaps(r) {
				return fmt.Errorf("--cluster-cidr %s overlaps the lab's %s", c, r)
			}
		}
		if !c.Addr().Is4() || c.Bits() > 24 {
			return fmt.Errorf("--cluster-cidr %s: want an IPv4 range of /24 or larger (a /24 per node)", c)
		}
	}
	return nil
}

// Host is one namespace of the lab.
type Host struct {
	// Role is "master", "node<i>" or "tor".
	Role string
	// Netns is the namespace name (<lab>-<role>), NodeName the Kubernetes node name.
	Netns, NodeName string
	// IP is the host's IPv4 address on the fabric (none in an IPv6-only lab), IP6 its IPv6
	// address (in dual-stack and IPv6-only labs).
	IP, IP6 netip.Addr
}

// Master, Node and ToR describe the lab's hosts.
func (s Spec) Master() Host { return s.host("master", 1) }

// Node is worker i (1-based).
func (s Spec) Node(i int) Host { return s.host(fmt.Sprintf("node%d", i), 1+i) }

// ToRHost is the router (and the fabric's bridge).
func (s Spec) ToRHost() Host {
	h := Host{Role: "tor", Netns: s.Name + "-tor"}
	if s.HasIPv4() {
		h.IP = torAddr
	}
	if s.HasIPv6() {
		h.IP6 = torAddr6
	}
	return h
}

func (s Spec) host(role string, octet int) Host {
	a := fabric.Addr().As4()
	a[3] = byte(octet)
	h := Host{Role: role, Netns: s.Name + "-" + role, NodeName: s.Name + "-" + role}
	if s.HasIPv4() {
		h.IP = netip.AddrFrom4(a)
	}
	if s.HasIPv6() {
		a6 := fabric6.Addr().As16()
		a6[15] = byte(octet)
		h.IP6 = netip.AddrFrom16(a6)
	}
	return h
}

// Hosts lists the master and the workers (not the ToR).
func (s Spec) Hosts() []Host {
	out := []Host{s.Master()}
	for i := 1; i <= s.Nodes; i++ {
		out = append(out, s.Node(i))
	}
	return out
}

// APIServer is the URL the nodes join; HostAPIServer the one the host's kubectl uses.
func (s Spec) APIServer() string {
	return "https://" + net.JoinHostPort(s.Master().Addr().String(), "6443")
}

// APIServers are every server's URL, the master's first: what agents fail over between.
func (s Spec) APIServers() string {
	urls := []string{s.APIServer()}
	for i := 1; i < s.Servers; i++ {
		urls = append(urls, "https://"+net.JoinHostPort(s.Node(i).Addr().String(), "6443"))
	}
	return strings.Join(urls, ",")
}

// IsServer says whether worker i runs `skiff server` (joining the master's) rather than an agent.
func (s Spec) IsServer(i int) bool { return i < s.Servers }

// HostAPIServer is reached through the host link (its IPv6 end in an IPv6-only lab).
func (s Spec) HostAPIServer() string {
	return "https://" + net.JoinHostPort(s.masterSide().String(), "6443")
}

// masterSide is the master's end of the host link in the lab's primary family.
func (s Spec) masterSide() netip.Addr {
	if s.HasIPv4() {
		return masterSide
	}
	return masterSide6
}
