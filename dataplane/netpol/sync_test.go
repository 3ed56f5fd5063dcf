package netpol

import (
	"encoding/binary"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-sh/skiff/dataplane/internal/fakemap"
	"github.com/skiff-sh/skiff/dataplane/policy"
	"github.com/skiff-sh/skiff/dataplane/programs"
)

var update = flag.Bool("update", false, "rewrite testdata/sync/*.golden from what Sync writes now")

// fakePolicyMaps are the policy maps in memory, logging every write in order.
type fakePolicyMaps struct {
	identities, cidrs, rules, endpoints, identities6, cidrs6, rules6, endpoints6, names *fakemap.Map
	log                                                                                 []string
}

func newFakePolicyMaps() *fakePolicyMaps {
	f := &fakePolicyMaps{identities: fakemap.New("identity", 1<<16), cidrs: fakemap.New("cidr", 1<<16),
		rules: fakemap.New("rule", 1<<16), endpoints: fakemap.New("endpoint", 1<<16),
		identities6: fakemap.New("identity6", 1<<16), cidrs6: fakemap.New("cidr6", 1<<16), rules6: fakemap.New("rule6", 1<<16),
		endpoints6: fakemap.New("endpoint6", 1<<16), names: fakemap.New("name", 1<<16)}
	for _, m := range f.all() {
		m.Log = &f.log
	}
	return f
}

func (f *fakePolicyMaps) all() []*fakemap.Map {
	return []*fakemap.Map{f.identities, f.cidrs, f.rules, f.endpoints, f.identities6, f.cidrs6, f.rules6, f.endpoints6, f.names}
}

func (f *fakePolicyMaps) maps() policyMaps {
	return policyMaps{identities: f.identities, cidrs: f.cidrs, rules: f.rules, endpoints: f.endpoints,
		identities6: f.identities6, cidrs6: f.cidrs6, rules6: f.rules6, endpoints6: f.endpoints6, names: f.names}
}

func (f *fakePolicyMaps) writes() int {
	n := 0
	for _, m := range f.all() {
		n += m.Writes
	}
	return n
}

// render decodes every entry into a line a person reads (addresses, directions, ports and
// the admitting policy by name), sorted.
func (f *fakePolicyMaps) render(t testing.TB, p *Policy) string {
	t.Helper()
	var lines []string
	ids, err := readAll[uint32, uint32](f.identities)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range ids {
		lines = append(lines, fmt.Sprintf("identity %s = %d", programs.FromAddr4(k), v))
	}
	eps, err := readAll[uint32, programs.PolicyPolEndpoint](f.endpoints)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range eps {
		var iso []string
		if v.Flags&isolatedIngress != 0 {
			iso = append(iso, "ingress")
		}
		if v.Flags&isolatedEgress != 0 {
			iso = append(iso, "egress")
		}
		if len(iso) == 0 {
			iso = append(iso, "none")
		}
		lines = append(lines, fmt.Sprintf("endpoint %s isolated %s", programs.FromAddr4(k), strings.Join(iso, ",")))
	}
	cidrs, err := readAll[programs.PolicyPolCidrKey, uint32](f.cidrs)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range cidrs {
		lines = append(lines, fmt.Sprintf("cidr %s = %d", netip.PrefixFrom(programs.FromAddr4(k.Addr), int(k.Prefixlen)), v))
	}
	rules, err := readAll[programs.PolicyPolRuleKey, programs.PolicyPolRuleValue](f.rules)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range rules {
		ports := "any port"
		if bits := k.Prefixlen - 80; bits > 0 {
			ports = fmt.Sprintf("port %d/%d", programs.FromPort(k.Port), bits)
		}
		lines = append(lines, fmt.Sprintf("rule %s %s %s %s peer %d by %s", programs.FromAddr4(k.Endpoint), policy.Direction(k.Dir),
			ProtocolName(k.Proto), ports, k.Peer, p.PolicyName(v.Policy)))
	}
	names, err := readAll[programs.PolicyPolNameKey, programs.PolicyPolName](f.names)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range names {
		switch k.Kind {
		case nameKindEndpoint:
			lines = append(lines, fmt.Sprintf("name endpoint %s = %s", programs.FromAddr4(k.Id), v))
		case nameKindIdentity:
			lines = append(lines, fmt.Sprintf("name identity %d = %s", k.Id, v))
		default:
			lines = append(lines, fmt.Sprintf("name policy %d = %s", k.Id, v))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// world is a namespace's worth of pods and policies; pods on 10.244.0.0/24 are this node's.
type world struct {
	pods     []policy.Pod
	policies []*networkingv1.NetworkPolicy
	host     []netip.Addr
}

func local(a netip.Addr) bool { return netip.MustParsePrefix("10.244.0.0/24").Contains(a) }

func (w world) compile(t testing.TB, alloc *policy.Allocator) *policy.Result {
	t.Helper()
	res, errs := policy.Compile(alloc, w.policies, w.pods, []policy.Namespace{{Name: "x"}, {Name: "y"}}, local)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return res
}

func pod(ns, name, app, ip string) policy.Pod {
	return policy.Pod{Namespace: ns, Name: name, Labels: map[string]string{"app": app}, IPs: []netip.Addr{netip.MustParseAddr(ip)},
		Ports: []policy.NamedPort{{Name: "http", Protocol: policy.TCP, Port: 8080}}}
}

func denyIngress(ns, app string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deny-" + app},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
}

func allowFrom(ns, app, fromApp string, port intstr.IntOrString) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "allow-" + fromApp + "-to-" + app},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fromApp}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}}}}}
}

func egressToBlock(ns, app, cidr string, except ...string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "egress-" + app},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}}}}}}
}

// TestSyncNamedStates walks one node through named states — pods arrive, policies isolate
// them, a pod moves away, policies go — and compares what the maps hold and the writes each
// step made, in order, with testdata/sync/<state>.golden (go test -run TestSyncNamedStates
// -update rewrites them). The writes show the order Sync promises: identities and rules
// before the endpoints that start isolation, deletions after the new entries are in.
func TestSyncNamedStates(t *testing.T) {
	web1, web2 := pod("x", "web-1", "web", "10.244.0.2"), pod("x", "web-2", "web", "10.244.1.2")
	client := pod("x", "client", "client", "10.244.0.3")
	other := pod("y", "other", "client", "10.244.1.3")
	host := []netip.Addr{netip.MustParseAddr("192.0.2.1")}
	steps := []struct {
		name string
		w    world
	}{
		{"01-pods-no-policy", world{pods: []policy.Pod{web1, web2, client, other}, host: host}},
		{"02-deny-ingress-to-web", world{pods: []policy.Pod{web1, web2, client, other}, host: host,
			policies: []*networkingv1.NetworkPolicy{denyIngress("x", "web")}}},
		{"03-allow-client-on-named-port", world{pods: []policy.Pod{web1, web2, client, other}, host: host,
			policies: []*networkingv1.NetworkPolicy{denyIngress("x", "web"), allowFrom("x", "web", "client", intstr.FromString("http"))}}},
		{"04-egress-ipblock-with-except", world{pods: []policy.Pod{web1, web2, client, other}, host: host,
			policies: []*networkingv1.NetworkPolicy{denyIngress("x", "web"), allowFrom("x", "web", "client", intstr.FromString("http")),
				egressToBlock("x", "client", "10.0.0.0/8", "10.244.1.0/24")}}},
		{"05-client-leaves-the-node", world{pods: []policy.Pod{web1, web2, pod("x", "client", "client", "10.244.1.4"), other}, host: host,
			policies: []*networkingv1.NetworkPolicy{denyIngress("x", "web"), allowFrom("x", "web", "client", intstr.FromString("http")),
				egressToBlock("x", "client", "10.0.0.0/8", "10.244.1.0/24")}}},
		{"06-policies-deleted", world{pods: []policy.Pod{web1, web2, pod("x", "client", "client", "10.244.1.4"), other}, host: host}},
	}
	f := newFakePolicyMaps()
	p := newPolicy("", f.maps())
	alloc := policy.NewAllocator()
	for _, s := range steps {
		f.log = nil
		n, err := p.Sync(s.w.compile(t, alloc), local, s.w.host)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if n != len(f.log) {
			t.Errorf("%s: Sync says %d writes, the maps saw %d", s.name, n, len(f.log))
		}
		got := "# maps\n" + f.render(t, p) + "\n# writes, in order (map by map)\n" + runs(f.log) + "\n"
		path := filepath.Join("testdata", "sync", s.name+".golden")
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test -run TestSyncNamedStates -update writes it)", err)
		}
		if got != string(want) {
			t.Errorf("%s: the maps and writes differ from %s:\n%s", s.name, path, got)
		}
	}
}

// runs is a write log as its runs of one operation on one map, with their lengths ("put
// rule: 3"): the order between maps is Sync's promise, the order inside one is a Go map's.
func runs(log []string) string {
	var out []string
	last, n := "", 0
	flush := func() {
		if n > 0 {
			out = append(out, fmt.Sprintf("%s: %d", last, n))
		}
	}
	for _, l := range log {
		f := strings.Fields(l)
		op := f[0] + " " + f[1]
		if op != last {
			flush()
			last, n = op, 0
		}
		n++
	}
	flush()
	return strings.Join(out, "\n")
}

// randomWorld is a world drawn from seed: pods in two namespaces, here or on another node,
// under some of a fixed set of policies.
func randomWorld(r *rand.Rand) world {
	apps := []string{"web", "db", "client"}
	var w world
	for i := range 2 + r.IntN(8) {
		ns := []string{"x", "y"}[r.IntN(2)]
		ip := fmt.Sprintf("10.244.%d.%d", r.IntN(2), 2+i)
		w.pods = append(w.pods, pod(ns, fmt.Sprintf("p%d", i), apps[r.IntN(len(apps))], ip))
	}
	all := []*networkingv1.NetworkPolicy{denyIngress("x", "web"), denyIngress("y", "db"),
		allowFrom("x", "web", "client", intstr.FromString("http")), allowFrom("y", "db", "web", intstr.FromInt32(5432)),
		egressToBlock("x", "client", "10.0.0.0/8", "10.244.1.0/24"), egressToBlock("y", "web", "192.168.0.0/16")}
	for _, np := range all {
		if r.IntN(2) == 0 {
			w.policies = append(w.policies, np)
		}
	}
	if r.IntN(3) > 0 {
		w.host = []netip.Addr{netip.MustParseAddr("192.0.2.1")}
	}
	return w
}

// TestSyncRandomTransitions drives a Policy through random worlds and checks after every
// step that the maps hold exactly what one Sync into empty maps makes of that world, that
// Sync counts the writes it made, that no rule was written after an endpoint in the same
// step (a newly isolated pod has its rules when isolation starts), and that a second Sync
// of the same world writes nothing. Now and then an entry is lost or a stray one appears
// behind Sync's back: an incremental Sync does not see it, a Sync after Reread repairs it.
func TestSyncRandomTransitions(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 42))
		f := newFakePolicyMaps()
		p := newPolicy("", f.maps())
		alloc := policy.NewAllocator()
		for step := range 30 {
			w := randomWorld(r)
			res := w.compile(t, alloc)
			f.log = nil
			n, err := p.Sync(res, local, w.host)
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			if n != len(f.log) {
				t.Fatalf("seed %d step %d: Sync says %d writes, the maps saw %d", seed, step, n, len(f.log))
			}
			firstEndpoint := slices.IndexFunc(f.log, func(l string) bool { return strings.HasPrefix(l, "put endpoint") })
			if firstEndpoint >= 0 && slices.ContainsFunc(f.log[firstEndpoint:], func(l string) bool { return strings.HasPrefix(l, "put rule") }) {
				t.Fatalf("seed %d step %d: a rule was written after an endpoint:\n%s", seed, step, strings.Join(f.log, "\n"))
			}
			fresh := newFakePolicyMaps()
			q := newPolicy("", fresh.maps())
			q.names, q.list = p.names, p.list // the same policy numbering, as one agent keeps it
			if _, err := q.Sync(res, local, w.host); err != nil {
				t.Fatal(err)
			}
			want := fresh.render(t, q)
			if got := f.render(t, p); got != want {
				t.Fatalf("seed %d step %d: incremental syncs left\n%s\none sync into empty maps makes\n%s", seed, step, got, want)
			}
			if n, _ := p.Sync(res, local, w.host); n != 0 {
				t.Fatalf("seed %d step %d: the same world again wrote %d entries", seed, step, n)
			}
			if r.IntN(4) == 0 && f.rules.Len()+f.identities.Len() > 0 {
				var k uint32
				if err := f.identities.NextKey(nil, &k); err == nil {
					_ = f.identities.Delete(k) // lost
				}
				_ = f.endpoints.Put(uint32(7), programs.PolicyPolEndpoint{Flags: isolatedIngress}) // stray
				if _, err := p.Sync(res, local, w.host); err != nil {
					t.Fatal(err)
				}
				if f.render(t, p) == want {
					t.Fatalf("seed %d step %d: an incremental Sync repaired drift it cannot see: the test is not testing", seed, step)
				}
				p.Reread()
				if _, err := p.Sync(res, local, w.host); err != nil {
					t.Fatal(err)
				}
				if got := f.render(t, p); got != want {
					t.Fatalf("seed %d step %d: after Reread the maps hold\n%s\nwant\n%s", seed, step, got, want)
				}
			}
		}
	}
}

// failingTable fails its next fails writes, as a full or removed kernel map would.
type failingTable struct {
	*fakemap.Map
	fails int
}

func (f *failingTable) Put(k, v any) error {
	if f.fails > 0 {
		f.fails--
		return fmt.Errorf("put %v: no space left", k)
	}
	return f.Map.Put(k, v)
}

// TestSyncAfterAFailedWrite: a write that fails makes Sync report it and read that map back
// next time, so the following Sync writes what is missing instead of trusting its memory.
func TestSyncAfterAFailedWrite(t *testing.T) {
	f := newFakePolicyMaps()
	rules := &failingTable{Map: f.rules, fails: 1}
	maps := f.maps()
	maps.rules = rules
	p := newPolicy("", maps)
	w := world{pods: []policy.Pod{pod("x", "web", "web", "10.244.0.2"), pod("x", "c", "client", "10.244.0.3")},
		policies: []*networkingv1.NetworkPolicy{allowFrom("x", "web", "client", intstr.FromInt32(80))}}
	res := w.compile(t, policy.NewAllocator())
	if _, err := p.Sync(res, local, nil); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("Sync with a failing rule write: %v, want the failure", err)
	}
	before := f.rules.Len()
	if _, err := p.Sync(res, local, nil); err != nil {
		t.Fatal(err)
	}
	if f.rules.Len() != before+1 {
		t.Fatalf("rules %d after the retry, want %d", f.rules.Len(), before+1)
	}
	fresh := newFakePolicyMaps()
	q := newPolicy("", fresh.maps())
	q.names, q.list = p.names, p.list
	if _, err := q.Sync(res, local, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := f.render(t, p), fresh.render(t, q); got != want {
		t.Fatalf("after the retry\n%s\nwant\n%s", got, want)
	}
}

// TestSetPeerIdentitiesThenSync: identities written alone (a remote pod started) are what
// the next Sync of a world with that pod finds, so it writes nothing more for them.
func TestSetPeerIdentitiesThenSync(t *testing.T) {
	f := newFakePolicyMaps()
	p := newPolicy("", f.maps())
	alloc := policy.NewAllocator()
	w := world{pods: []policy.Pod{pod("x", "web", "web", "10.244.0.2"), pod("y", "a", "client", "10.244.1.2")},
		policies: []*networkingv1.NetworkPolicy{allowFrom("x", "web", "client", intstr.FromInt32(80))}}
	if _, err := p.Sync(w.compile(t, alloc), local, nil); err != nil {
		t.Fatal(err)
	}
	a, b := netip.MustParseAddr("10.244.1.2"), netip.MustParseAddr("10.244.1.9")
	id := w.compile(t, alloc).PodIdentities[a] // b has a's namespace and labels: the same identity
	if err := p.SetPeerIdentities(map[netip.Addr]policy.Identity{b: id, a: Unidentified}); err != nil {
		t.Fatal(err)
	}
	w.pods = []policy.Pod{w.pods[0], pod("y", "b", "client", b.String())}
	res := w.compile(t, alloc)
	if res.PodIdentities[b] != id {
		t.Fatalf("b's identity %d, a's was %d", res.PodIdentities[b], id)
	}
	f.log = nil
	if _, err := p.Sync(res, local, nil); err != nil {
		t.Fatal(err)
	}
	for _, l := range f.log {
		if strings.HasPrefix(l, "put identity") || strings.HasPrefix(l, "delete identity") {
			t.Errorf("Sync rewrote an identity SetPeerIdentities had written: %s", l)
		}
	}
}

// A dual-stack pod's IPv6 address is an endpoint with the isolation of its IPv4 one: the
// program passes its IPv6 where it is not isolated and drops it where it is (rules are IPv4
// so far). A pod no policy selects is an unisolated IPv6 endpoint; remote pods are none.
func TestSyncIPv6Endpoints(t *testing.T) {
	dual := func(ns, name, app, v4, v6 string) policy.Pod {
		p := pod(ns, name, app, v4)
		p.IPs = append(p.IPs, netip.MustParseAddr(v6))
		return p
	}
	local6 := func(a netip.Addr) bool {
		return local(a) || netip.MustParsePrefix("fd00:10:244::/64").Contains(a)
	}
	w := world{pods: []policy.Pod{
		dual("x", "web", "web", "10.244.0.2", "fd00:10:244::2"),
		dual("x", "cli", "cli", "10.244.0.3", "fd00:10:244::3"),
		dual("x", "far", "web", "10.244.1.2", "fd00:10:244:1::2"),
	}, policies: []*networkingv1.NetworkPolicy{denyIngress("x", "web")}}
	res, errs := policy.Compile(policy.NewAllocator(), w.policies, w.pods, []policy.Namespace{{Name: "x"}}, local6)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	f := newFakePolicyMaps()
	p := newPolicy("", f.maps())
	if _, err := p.Sync(res, local6, nil); err != nil {
		t.Fatal(err)
	}
	got, err := readAll[programs.PolicyPolAddr6, programs.PolicyPolEndpoint](f.endpoints6)
	if err != nil {
		t.Fatal(err)
	}
	want := map[programs.PolicyPolAddr6]programs.PolicyPolEndpoint{
		Addr6(netip.MustParseAddr("fd00:10:244::2")): {Flags: isolatedIngress},
		Addr6(netip.MustParseAddr("fd00:10:244::3")): {},
	}
	if !maps.Equal(got, want) {
		t.Errorf("IPv6 endpoints %v, want %v", got, want)
	}
	// The key holds the address's bytes as the kernel's in6_addr does.
	k := Addr6(netip.MustParseAddr("fd00:10:244::2"))
	var b [16]byte
	for i, v := range k.Addr {
		binary.NativeEndian.PutUint32(b[4*i:], v)
	}
	if netip.AddrFrom16(b) != netip.MustParseAddr("fd00:10:244::2") {
		t.Errorf("Addr6 bytes %x", b)
	}
	// The policy goes: the pod's IPv6 is unisolated again.
	w.policies = nil
	res, _ = policy.Compile(policy.NewAllocator(), nil, w.pods, []policy.Namespace{{Name: "x"}}, local6)
	if _, err := p.Sync(res, local6, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := readAll[programs.PolicyPolAddr6, programs.PolicyPolEndpoint](f.endpoints6); got[k].Flags != 0 || len(got) != 2 {
		t.Errorf("after the policy went: %v", got)
	}
}
