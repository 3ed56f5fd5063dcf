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
	"net/netip"
	"regexp"
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
// for as long as the lab is up: pods, Services, the fabric and the LoadBalancer pool. A program on the host (the
// conformance suite dials pods and NodePorts) then reaches the lab, or is refused by the
// master at once (ClusterIPs exist only in the pods' socket hooks), and never sends lab
// traffic out of the host's default route — which on many hosts also covers these ranges.
func (s Spec) HostRoutes() []netip.Prefix {
	out := []netip.Prefix{s.PodCIDR(), serviceCIDR, fabric, LoadBalancerPool}
	if s.Dual() {
		out = append(out, podCIDR6, serviceCIDR6, fabric6, LoadBalancerPool6)
	}
	return out
}

// LoadBalancerPools are the master's --loadbalancer-cidr: IPv4's pool, and IPv6's in a
// dual-stack lab.
func (s Spec) LoadBalancerPools() string {
	if s.Dual() {
		return LoadBalancerPool.String() + "," + LoadBalancerPool6.String()
	}
	return LoadBalancerPool.String()
}

// Dual says whether the lab is dual-stack.
func (s Spec) Dual() bool { return s.IPFamily == DualStack }

// ClusterCIDRs is the server's --cluster-cidr: the IPv4 range, then IPv6's in a dual-stack lab.
func (s Spec) ClusterCIDRs() string {
	if s.Dual() {
		return s.PodCIDR().String() + "," + podCIDR6.String()
	}
	return s.PodCIDR().String()
}

// ServiceCIDRs is the server's --service-cidr, in the same order.
func (s Spec) ServiceCIDRs() string {
	if s.Dual() {
		return serviceCIDR.String() + "," + serviceCIDR6.String()
	}
	return serviceCIDR.String()
}

// NodeIPs is a host's --node-ip: its fabric addresses, IPv4 first.
func (h Host) NodeIPs() string {
	if h.IP6.IsValid() {
		return h.IP.String() + "," + h.IP6.String()
	}
	return h.IP.String()
}

// HostLink is the host's interface into the master's namespace.
func (s Spec) HostLink() string { return s.Name + "-api" }

// Spec is what `skiff lab up` is asked for.
type Spec struct {
	Name  string
	Nodes int
	ToR   string
	// NoServiceProxy runs the agents with --service-proxy=false, so another Service
	// proxy (kube-proxy, for the side-by-side benchmark) can take the nodes.
	NoServiceProxy bool `json:",omitempty"`
	// NoNetworkPolicy runs the agents with --network-policy=false (no policy programs on
	// the pods' veths): the baseline of the policy benchmark.
	NoNetworkPolicy bool `json:",omitempty"`
	// ClusterCIDR, if valid, is the server's --cluster-cidr instead of its default
	// 10.244.0.0/16 (256 node blocks): the scale harness adds thousands of simulated nodes.
	ClusterCIDR netip.Prefix `json:",omitempty"`
	// IPFamily is ipv4 (the default, "" too) or dual: every host then also has an IPv6
	// address on the fabric, and the cluster IPv6 pod and Service ranges.
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
	switch s.ToR {
	case ToRFRR, ToRBIRD, ToRNone:
	default:
		return fmt.Errorf("--tor %q: want frr, bird or none", s.ToR)
	}
	switch s.IPFamily {
	case "", IPv4, DualStack:
	case IPv6:
		return fmt.Errorf("--ip-family ipv6: IPv6-only labs are not built yet; use dual")
	default:
		return fmt.Errorf("--ip-family %q: want ipv4 or dual", s.IPFamily)
	}
	if c := s.ClusterCIDR; c.IsValid() {
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
	// IP is the host's address on the fabric; IP6 its IPv6 address in a dual-stack lab.
	IP, IP6 netip.Addr
}

// Master, Node and ToR describe the lab's hosts.
func (s Spec) Master() Host { return s.host("master", 1) }

// Node is worker i (1-based).
func (s Spec) Node(i int) Host { return s.host(fmt.Sprintf("node%d", i), 1+i) }

// ToRHost is the router (and the fabric's bridge).
func (s Spec) ToRHost() Host {
	h := Host{Role: "tor", Netns: s.Name + "-tor", IP: torAddr}
	if s.Dual() {
		h.IP6 = torAddr6
	}
	return h
}

func (s Spec) host(role string, octet int) Host {
	a := fabric.Addr().As4()
	a[3] = byte(octet)
	h := Host{Role: role, Netns: s.Name + "-" + role, NodeName: s.Name + "-" + role, IP: netip.AddrFrom4(a)}
	if s.Dual() {
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
func (s Spec) APIServer() string { return "https://" + s.Master().IP.String() + ":6443" }

// HostAPIServer is reached through the host link.
func (s Spec) HostAPIServer() string { return "https://" + masterSide.String() + ":6443" }
