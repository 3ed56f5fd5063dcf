package scale

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/dataplane/loader"
	"github.com/skiff-sh/skiff/dataplane/netpol"
)

// What a real agent does in a cluster of simulated nodes: the probes below change one object
// through the API and time it until the node's kernel state (its eBPF maps, its routing
// table) or its DNS answer shows the change — end to end, as a user would see it, read
// straight from the maps the datapath uses (the same pinned maps `skiff bpf` reads).

// ProbeNamespace holds the harness's own probe objects.
const ProbeNamespace = "scale-probe"

// ProbeLabel marks the policies the harness makes (and the pods they select).
const ProbeLabel = "scale.skiff.sh/probe"

// Policies is n NetworkPolicies over the plan's workloads, shaped as a team's would be: each
// selects one workload's pods and admits, on port 8080, the next workload of its namespace
// and, from any namespace, a workload seven on. They select only simulated pods, so they cost
// a real node their peers' identities, never rules of its own.
func Policies(p Plan, n int) []*networkingv1.NetworkPolicy {
	if len(p.Workloads) == 0 {
		return nil
	}
	tcp := corev1.ProtocolTCP
	out := make([]*networkingv1.NetworkPolicy, 0, n)
	for i := 0; i < n; i++ {
		w := p.Workloads[i%len(p.Workloads)]
		next := p.Workloads[(i+1)%len(p.Workloads)].Name
		far := p.Workloads[(i+7)%len(p.Workloads)].Name
		out = append(out, &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: fmt.Sprintf("policy-%05d", i), Labels: map[string]string{LoadLabel: "true"}},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": w.Name}},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{
						{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": next}}},
						{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": far}}},
					},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(8080))}},
				}},
			},
		})
	}
	return out
}

// CreatePolicies creates the policies, workers at a time.
func CreatePolicies(ctx context.Context, c kubernetes.Interface, nps []*networkingv1.NetworkPolicy, workers int) error {
	return Parallel(len(nps), workers, func(i int) error {
		_, err := c.NetworkingV1().NetworkPolicies(nps[i].Namespace).Create(ctx, nps[i], metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
		return err
	})
}

// poll calls done every interval until it reports true, and returns when it did.
func poll(ctx context.Context, timeout, interval time.Duration, what string, done func() (bool, error)) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := done()
		if err != nil {
			return time.Time{}, fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%s: not within %v", what, timeout)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(interval):
		}
	}
}

// ProbeService is a selectorless Service whose one EndpointSlice the harness writes.
type ProbeService struct {
	c         kubernetes.Interface
	ClusterIP netip.Addr
	slice     *discoveryv1.EndpointSlice
}

// NewProbeService makes the probe namespace (if needed), the Service and its empty slice.
func NewProbeService(ctx context.Context, c kubernetes.Interface) (*ProbeService, error) {
	if err := ensureNamespace(ctx, c, ProbeNamespace); err != nil {
		return nil, err
	}
	svc, err := c.CoreV1().Services(ProbeNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "programming"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return nil, fmt.Errorf("the probe Service's ClusterIP %q: %w", svc.Spec.ClusterIP, err)
	}
	slice, err := c.DiscoveryV1().EndpointSlices(ProbeNamespace).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "programming-1", Labels: map[string]string{
			discoveryv1.LabelServiceName: "programming", discoveryv1.LabelManagedBy: "scale.skiff.sh"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return &ProbeService{c: c, ClusterIP: ip, slice: slice}, nil
}

func ensureNamespace(ctx context.Context, c kubernetes.Interface, name string) error {
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// ProgrammingLatency is upstream's network programming latency SLI, end to end: rounds
// times, the slice is written with a new set of ready endpoints (1 to 10 addresses of
// TEST-NET-2, never dialled), and timed from the write's return to the node's service map
// (pinned under pinDir) holding exactly those backends.
func (p *ProbeService) ProgrammingLatency(ctx context.Context, pinDir string, rounds int) ([]time.Duration, error) {
	var out []time.Duration
	frontend := netip.AddrPortFrom(p.ClusterIP, 80)
	for r := 0; r < rounds; r++ {
		n := r%10 + 1
		var eps []discoveryv1.Endpoint
		var want []string
		for i := 0; i < n; i++ {
			a := fmt.Sprintf("198.51.100.%d", (r*10+i)%250+1)
			eps = append(eps, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
			want = append(want, a+":8080")
		}
		s := p.slice.DeepCopy()
		s.Endpoints = eps
		updated, err := p.c.DiscoveryV1().EndpointSlices(ProbeNamespace).Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			return out, err
		}
		p.slice = updated
		start := time.Now()
		at, err := poll(ctx, time.Minute, time.Millisecond, fmt.Sprintf("backends %v in the map", want), func() (bool, error) {
			return backendsAre(pinDir, frontend, want)
		})
		if err != nil {
			return out, err
		}
		out = append(out, at.Sub(start))
	}
	return out, nil
}

// backendsAre reads frontend's backends from the pinned service maps.
func backendsAre(pinDir string, frontend netip.AddrPort, want []string) (bool, error) {
	m, closeMaps, err := loader.OpenPinned(pinDir)
	if err != nil {
		return false, err
	}
	defer closeMaps()
	e, ok, err := m.Lookup(frontend, corev1.ProtocolTCP)
	if err != nil || !ok || len(e.Backends) != len(want) {
		return false, err
	}
	have := map[string]bool{}
	for _, b := range e.Backends {
		have[b] = true
	}
	for _, w := range want {
		if !have[w] {
			return false, nil
		}
	}
	return true, nil
}

// PolicyLatency times, on a real pod of the node (pod, with address ip), the two ways a
// policy comes to apply: a NetworkPolicy created that selects it, then deleted; and a policy
// that selects a label, then the pod labelled and unlabelled. Each is timed from the API
// call's return to the pod's entry in the node's policy maps saying ingress isolated (or
// open again).
func PolicyLatency(ctx context.Context, c kubernetes.Interface, pinDir string, pod *corev1.Pod, ip netip.Addr, rounds int) (create, label []time.Duration, err error) {
	isolated := func(want bool) func() (bool, error) {
		return func() (bool, error) {
			v, err := netpol.OpenPolicyPinned(pinDir)
			if err != nil {
				return false, err
			}
			defer v.Close()
			iso, ok := v.Isolation(ip)
			return ok && iso.Ingress == want, nil
		}
	}
	timed := func(what string, want bool, change func() error) (time.Duration, error) {
		if err := change(); err != nil {
			return 0, err
		}
		start := time.Now()
		at, err := poll(ctx, time.Minute, time.Millisecond, what, isolated(want))
		return at.Sub(start), err
	}
	deny := func(name string, selector map[string]string) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: name},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: selector},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	}
	nps := c.NetworkingV1().NetworkPolicies(pod.Namespace)
	for r := 0; r < rounds; r++ {
		name := fmt.Sprintf("probe-create-%d", r)
		d, err := timed("isolated by a new policy", true, func() error {
			_, err := nps.Create(ctx, deny(name, map[string]string{ProbeLabel: pod.Labels[ProbeLabel]}), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return create, label, err
		}
		create = append(create, d)
		if d, err = timed("open once the policy is deleted", false, func() error { return nps.Delete(ctx, name, metav1.DeleteOptions{}) }); err != nil {
			return create, label, err
		}
		create = append(create, d)
	}
	if _, err := nps.Create(ctx, deny("probe-by-label", map[string]string{"scale.skiff.sh/isolate": "yes"}), metav1.CreateOptions{}); err != nil {
		return create, label, err
	}
	setLabel := func(v string) func() error {
		return func() error {
			value := "null"
			if v != "" {
				value = strconv.Quote(v)
			}
			patch := `{"metadata":{"labels":{"scale.skiff.sh/isolate":` + value + `}}}`
			_, err := c.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		}
	}
	for r := 0; r < rounds; r++ {
		d, err := timed("isolated once labelled", true, setLabel("yes"))
		if err != nil {
			return create, label, err
		}
		label = append(label, d)
		if d, err = timed("open once unlabelled", false, setLabel("")); err != nil {
			return create, label, err
		}
		label = append(label, d)
	}
	return create, label, nps.Delete(ctx, "probe-by-label", metav1.DeleteOptions{})
}

// DNSLatency times, rounds times, a new Service from its creation to the node's cluster DNS
// (at server, "ip:53") answering its name with its ClusterIP.
func DNSLatency(ctx context.Context, c kubernetes.Interface, server string, rounds int) ([]time.Duration, error) {
	var out []time.Duration
	client := &dns.Client{Timeout: 200 * time.Millisecond}
	for r := 0; r < rounds; r++ {
		name := fmt.Sprintf("dns-%d", r)
		svc, err := c.CoreV1().Services(ProbeNamespace).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
		if err != nil {
			return out, err
		}
		start := time.Now()
		q := new(dns.Msg)
		q.SetQuestion(name+"."+ProbeNamespace+".svc.cluster.local.", dns.TypeA)
		at, err := poll(ctx, time.Minute, 2*time.Millisecond, "the new Service's name answered", func() (bool, error) {
			m, _, err := client.ExchangeContext(ctx, q, server)
			if err != nil {
				return false, nil // a lost datagram: ask again
			}
			for _, rr := range m.Answer {
				if a, ok := rr.(*dns.A); ok && a.A.String() == svc.Spec.ClusterIP {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return out, err
		}
		out = append(out, at.Sub(start))
	}
	return out, nil
}

// RouteProbe makes a top-of-rack FRR (bgpd in netns tor, AS asn) originate n /24s of
// 100.64.0.0/10 and withdraw them again, timed until a node's routing table (netns node)
// holds all of them, then none. The ToR originates them as BGP would learn a data centre's
// other racks: blackhole routes in its kernel, redistributed into BGP by one command.
type RouteProbe struct {
	Tor, Node string
	ASN       int
	N         int
}

// probePrefix is the i'th /24 of 100.64.0.0/10 (16,384 of them).
func probePrefix(i int) string { return fmt.Sprintf("100.%d.%d.0/24", 64+i/256, i%256) }

var probeRange = netip.MustParsePrefix("100.64.0.0/10")

// Run returns the time from the redistribute command to all n routes in the node's table,
// and from its removal to none.
func (p RouteProbe) Run(ctx context.Context) (learn, withdraw time.Duration, err error) {
	if p.N > 16384 {
		return 0, 0, fmt.Errorf("%d prefixes: 100.64.0.0/10 holds 16,384 /24s", p.N)
	}
	var batch bytes.Buffer
	for i := 0; i < p.N; i++ {
		fmt.Fprintf(&batch, "route replace blackhole %s\n", probePrefix(i))
	}
	ipCmd := exec.CommandContext(ctx, "ip", "-n", p.Tor, "-batch", "-")
	ipCmd.Stdin = &batch
	if out, err := ipCmd.CombinedOutput(); err != nil {
		return 0, 0, fmt.Errorf("blackholes in %s: %v %s", p.Tor, err, out)
	}
	defer exec.Command("ip", "-n", p.Tor, "route", "flush", "root", probeRange.String(), "type", "blackhole").Run()
	vtysh := func(cmds ...string) error {
		args := []string{"--net=/run/netns/" + p.Tor, "--", "vtysh", "-N", p.Tor, "-c", "configure terminal",
			"-c", fmt.Sprintf("router bgp %d", p.ASN), "-c", "address-family ipv4 unicast"}
		for _, c := range cmds {
			args = append(args, "-c", c)
		}
		if out, err := exec.CommandContext(ctx, "nsenter", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("vtysh %v: %v %s", cmds, err, out)
		}
		return nil
	}
	h, closeHandle, err := netnsHandle(p.Node)
	if err != nil {
		return 0, 0, err
	}
	defer closeHandle()
	count := func(want int) func() (bool, error) {
		return func() (bool, error) {
			routes, err := h.RouteList(nil, netlink.FAMILY_V4)
			if err != nil {
				return false, err
			}
			n := 0
			for _, r := range routes {
				if r.Dst == nil {
					continue
				}
				if a, ok := netip.AddrFromSlice(r.Dst.IP); ok && probeRange.Contains(a.Unmap()) {
					n++
				}
			}
			return n == want, nil
		}
	}
	if ok, err := count(0)(); err != nil || !ok {
		return 0, 0, fmt.Errorf("the node's table holds probe routes before the probe (%v)", err)
	}
	start := time.Now()
	if err := vtysh("redistribute kernel"); err != nil {
		return 0, 0, err
	}
	at, err := poll(ctx, 5*time.Minute, 10*time.Millisecond, fmt.Sprintf("%d routes in %s", p.N, p.Node), count(p.N))
	if err != nil {
		_ = vtysh("no redistribute kernel")
		return 0, 0, err
	}
	learn = at.Sub(start)
	start = time.Now()
	if err := vtysh("no redistribute kernel"); err != nil {
		return learn, 0, err
	}
	at, err = poll(ctx, 5*time.Minute, 10*time.Millisecond, fmt.Sprintf("no probe routes left in %s", p.Node), count(0))
	if err != nil {
		return learn, 0, err
	}
	return learn, at.Sub(start), nil
}

// netnsHandle is a netlink handle in the named network namespace.
func netnsHandle(name string) (*netlink.Handle, func(), error) {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return nil, nil, fmt.Errorf("netns %s: %w", name, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return nil, nil, err
	}
	return h, func() { h.Close(); ns.Close() }, nil
}

// nodeInternalIP is a node's InternalIP address.
func nodeInternalIP(n *corev1.Node) (string, error) {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && net.ParseIP(a.Address) != nil {
			return a.Address, nil
		}
	}
	return "", fmt.Errorf("node %s has no InternalIP (%v)", n.Name, n.Status.Addresses)
}

// SyncStat is how many syncs of one kind the agent's service proxy ran and how long they took
// in all (its skiff_service_proxy_sync_seconds histogram's count and sum).
type SyncStat struct {
	Count int
	Total time.Duration
}

// Mean is the mean sync time.
func (s SyncStat) Mean() time.Duration {
	if s.Count == 0 {
		return 0
	}
	return s.Total / time.Duration(s.Count)
}

// ProxySyncs reads the agent's service proxy syncs by kind from its metrics (the Prometheus
// text format, served on 127.0.0.1:10248 in the node's namespace).
func ProxySyncs(metrics string) (map[string]SyncStat, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(metrics))
	if err != nil {
		return nil, fmt.Errorf("parsing the agent's metrics: %w", err)
	}
	f := families["skiff_service_proxy_sync_seconds"]
	if f == nil {
		return nil, fmt.Errorf("the agent's metrics have no skiff_service_proxy_sync_seconds")
	}
	out := map[string]SyncStat{}
	for _, m := range f.GetMetric() {
		h := m.GetHistogram()
		out[labels(m)["kind"]] = SyncStat{Count: int(h.GetSampleCount()), Total: time.Duration(h.GetSampleSum() * float64(time.Second))}
	}
	return out, nil
}
