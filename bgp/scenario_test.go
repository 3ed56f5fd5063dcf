package bgp

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/skiff-sh/skiff/internal/podcidr"

	"github.com/skiff-sh/skiff/bgp/config"
)

var update = flag.Bool("update", false, "rewrite the scenarios' golden files from what the code does now")

// scenario is one file under testdata/scenarios: a cluster (Kubernetes objects as in a
// manifest), the node whose speaker is looked at, its flags, the paths its speaker learned
// and the routes in its kernel. What the speaker does with them is rendered as text and
// compared with NAME.golden beside it (go test ./bgp -run Scenarios -update rewrites them),
// as cilium's pkg/bgpv1/test/testdata scenarios.
type scenario struct {
	Node  string `json:"node"`
	Flags struct {
		ASN      uint32   `json:"asn"`
		Peers    []string `json:"peers"`
		NodeMesh *bool    `json:"nodeMesh"`
	} `json:"flags"`
	Objects    string   `json:"objects"`
	Learned    []string `json:"learned"`   // "PREFIX via NEXTHOP [localpref N] [aspath N]"
	Installed  []string `json:"installed"` // "PREFIX via HOP[,HOP...]"
	Restarting []string `json:"restarting"`
}

func TestScenarios(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "scenarios", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no scenarios")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var sc scenario
			if err := yaml.UnmarshalStrict(b, &sc); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			got := sc.render(t)
			golden := strings.TrimSuffix(f, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test ./bgp -run Scenarios -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from what the speaker does now:\n--- want\n%s\n--- got\n%s", golden, want, got)
			}
		})
	}
}

// render runs the scenario through the speaker's decision cores, as its loop does:
// config.Resolve, Want, Select, KeepRestarting and Plan.
func (sc scenario) render(t *testing.T) string {
	var (
		cm       *corev1.ConfigMap
		nodes    []*corev1.Node
		self     *corev1.Node
		secrets  = map[string]*corev1.Secret{}
		services []*corev1.Service
		eps      []*discoveryv1.EndpointSlice
	)
	for _, doc := range strings.Split(sc.Objects, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("objects: %v", err)
		}
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			cm = o
		case *corev1.Node:
			nodes = append(nodes, o)
			if o.Name == sc.Node {
				self = o
			}
		case *corev1.Secret:
			secrets[o.Name] = o
		case *corev1.Service:
			services = append(services, o)
		case *discoveryv1.EndpointSlice:
			eps = append(eps, o)
		default:
			t.Fatalf("objects: a %T is not part of a scenario", obj)
		}
	}
	if self == nil {
		t.Fatalf("node %q is not among the objects", sc.Node)
	}
	var flags config.Overrides
	if sc.Flags.ASN != 0 {
		flags.ASN = &sc.Flags.ASN
	}
	flags.NodeMesh = sc.Flags.NodeMesh
	for _, p := range sc.Flags.Peers {
		i := strings.LastIndex(p, ":") // an IPv6 address has colons of its own
		host, asn, ok := p[:max(i, 0)], p[i+1:], i > 0
		addr, aerr := netip.ParseAddr(host)
		n, nerr := strconv.ParseUint(asn, 10, 32)
		if !ok || aerr != nil || nerr != nil {
			t.Fatalf("flags.peers %q: want ADDRESS:ASN", p)
		}
		flags.Peers = append(flags.Peers, config.Peer{Address: addr, ASN: uint32(n)})
	}
	secret := func(name, key string) (string, error) {
		s, ok := secrets[name]
		if !ok {
			return "", fmt.Errorf("secret %q not found", name)
		}
		v, ok := s.Data[key]
		if !ok {
			return "", fmt.Errorf("secret %q has no key %q", name, key)
		}
		return string(v), nil
	}

	var out strings.Builder
	c, err := config.Resolve(cm, self, secret, flags)
	if err != nil {
		fmt.Fprintf(&out, "error: %v\n", err)
		return out.String()
	}
	mesh := "off"
	if c.NodeMesh {
		mesh = "on"
	}
	fmt.Fprintf(&out, "config:\n  asn %d (other nodes %d), router id %s, port %d, node mesh %s\n", c.ASN, c.ClusterASN, c.RouterID, c.ListenPort, mesh)
	if !c.IPv4.IsValid() {
		out.WriteString("  no IPv4 address (the router id is derived from the IPv6 one)\n")
	}
	if c.IPv6.IsValid() {
		fmt.Fprintf(&out, "  IPv6 next hop %s\n", c.IPv6)
	}
	fmt.Fprintf(&out, "  graceful restart %t (restart time %s), bfd %t", c.GracefulRestart.Enabled, c.GracefulRestart.RestartTime, c.BFD.Enabled)
	if c.BFD.Enabled {
		fmt.Fprintf(&out, " (every %s, lost after %d)", c.BFD.TransmitInterval, c.BFD.Multiplier)
	}
	out.WriteString("\n")

	intent := Want(c, self, nodes, services, eps)
	out.WriteString("peers:\n")
	for _, p := range intent.Peers {
		dial := "dials"
		if p.Passive {
			dial = "waits"
		}
		fmt.Fprintf(&out, "  %-18s %-15s AS %-10d hold %-6s keepalive %-5s multihop %d password %t %s\n",
			p.Name, p.Address, p.ASN, p.HoldTime, p.KeepaliveTime, p.EBGPMultihop, p.Password != "", dial)
	}
	out.WriteString("advertised:\n")
	if len(podcidr.All(self)) == 0 {
		out.WriteString("  (no pod CIDR yet)\n")
	}
	for _, p := range intent.Advertised {
		fmt.Fprintf(&out, "  %s\n", p)
	}

	var paths []Path
	for _, l := range sc.Learned {
		paths = append(paths, parsePath(t, l))
	}
	var own []netip.Prefix
	for _, p := range intent.Advertised {
		if p.IsValid() {
			own = append(own, p)
		}
	}
	want := Select(paths, own, c.IPv4, c.IPv6)
	installed := Routes{}
	for _, l := range sc.Installed {
		text, hops, ok := strings.Cut(l, " via ")
		prefix, err := netip.ParsePrefix(text)
		if !ok || err != nil {
			t.Fatalf("installed route %q: want PREFIX via HOP[,HOP...]", l)
		}
		for _, h := range strings.Split(hops, ",") {
			hop, err := netip.ParseAddr(strings.TrimSpace(h))
			if err != nil {
				t.Fatalf("installed route %q: %v", l, err)
			}
			installed[prefix] = append(installed[prefix], hop)
		}
	}
	if len(sc.Restarting) > 0 {
		restarting := map[netip.Addr]bool{}
		for _, a := range sc.Restarting {
			restarting[netip.MustParseAddr(a)] = true
		}
		want = KeepRestarting(want, installed, restarting)
	}
	out.WriteString("kernel routes wanted:\n")
	writeRoutes(&out, "  ", want)
	set, del := Plan(want, installed, false)
	out.WriteString("plan:\n")
	writeRoutes(&out, "  set ", set)
	for _, p := range del {
		fmt.Fprintf(&out, "  del %s\n", p)
	}
	return out.String()
}

func writeRoutes(out *strings.Builder, prefix string, r Routes) {
	keys := make([]netip.Prefix, 0, len(r))
	for p := range r {
		keys = append(keys, p)
	}
	slices.SortFunc(keys, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	for _, p := range keys {
		hops := make([]string, len(r[p]))
		for i, h := range r[p] {
			hops[i] = h.String()
		}
		fmt.Fprintf(out, "%s%s via %s\n", prefix, p, strings.Join(hops, ","))
	}
}

// parsePath reads "PREFIX via NEXTHOP [localpref N] [aspath N]".
func parsePath(t *testing.T, s string) Path {
	f := strings.Fields(s)
	if len(f) < 3 || f[1] != "via" {
		t.Fatalf("learned path %q: want PREFIX via NEXTHOP [localpref N] [aspath N]", s)
	}
	p := Path{Prefix: netip.MustParsePrefix(f[0]), NextHop: netip.MustParseAddr(f[2]), LocalPref: 100}
	for i := 3; i+1 < len(f); i += 2 {
		n, err := strconv.Atoi(f[i+1])
		if err != nil {
			t.Fatalf("learned path %q: %v", s, err)
		}
		switch f[i] {
		case "localpref":
			p.LocalPref = uint32(n)
		case "aspath":
			p.ASPathLen = n
		default:
			t.Fatalf("learned path %q: unknown %q", s, f[i])
		}
	}
	return p
}
