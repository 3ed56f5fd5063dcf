package scale

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/dataplane/loader"
	skifflab "github.com/skiff-sh/skiff/lab"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

var (
	agentNodes       = flag.Int("scale.agent-nodes", 20, "simulated nodes around the real agent (TestAgentScale)")
	agentPodsPerNode = flag.Int("scale.agent-pods-per-node", 10, "pods per simulated node in TestAgentScale")
	agentRoutes      = flag.Int("scale.agent-routes", 500, "prefixes the ToR originates to the real agent (TestAgentScale; the goal is 5,000)")
	agentRounds      = flag.Int("scale.agent-rounds", 20, "samples of each latency in TestAgentScale")
)

// AgentResult is what one real agent costs and how fast it follows the cluster.
type AgentResult struct {
	Nodes, Pods, Services, Policies int
	// Idle is the agent before the simulated cluster existed, Loaded after it did (pods
	// Running, Services and policies made), End after the probes ran under churn.
	Idle, Loaded, End Sample
	// CPUPerSecond is the agent's CPU over the probes' window, in cores.
	CPUPerSecond float64
	// Programming is EndpointSlice write → the node's service map; Policy a NetworkPolicy
	// created or deleted → the pod's isolation in the maps; Label a pod label changed →
	// the same; DNS a Service created → the node's cluster DNS answering its name.
	Programming, Policy, Label, DNS Latency
	// Samples are each probe's times in the order taken (for the tail: which round, after what).
	Samples map[string][]time.Duration `json:",omitempty"`
	// ProxySyncs are the agent's service proxy syncs by kind over the whole run (its own
	// metric): what a change waits behind.
	ProxySyncs map[string]SyncStat `json:",omitempty"`
	// Routes prefixes originated by the ToR: all in the node's table (Learn), then none
	// (Withdraw).
	Routes          int
	Learn, Withdraw time.Duration
	ChurnSteps      int
}

// PerRemotePod is the agent's anonymous memory per pod of the cluster it holds, in bytes.
func (r AgentResult) PerRemotePod() float64 {
	if r.Pods == 0 || r.Loaded.Anon < r.Idle.Anon {
		return 0
	}
	return float64(r.Loaded.Anon-r.Idle.Anon) / float64(r.Pods)
}

// Markdown is the result as a table, with the goals of issue 41 beside each figure.
func (r AgentResult) Markdown() string {
	mib := func(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	lat := func(l Latency) string {
		return fmt.Sprintf("%v / %v (%d)", l.P50.Round(100*time.Microsecond), l.P99.Round(100*time.Microsecond), l.Count)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Real agent among %d simulated nodes: %d pods, %d Services, %d NetworkPolicies, %d churn steps during the probes.\n\n",
		r.Nodes, r.Pods, r.Services, r.Policies, r.ChurnSteps)
	fmt.Fprintf(&b, "| reading | value | goal |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| agent RSS idle → loaded → end | %s → %s → %s | < 100 MiB |\n", mib(r.Idle.RSS), mib(r.Loaded.RSS), mib(r.End.RSS))
	fmt.Fprintf(&b, "| agent anonymous idle → loaded → end | %s → %s → %s | |\n", mib(r.Idle.Anon), mib(r.Loaded.Anon), mib(r.End.Anon))
	fmt.Fprintf(&b, "| anonymous memory per remote pod | %.1f KiB | (Cilium ~9 KiB) |\n", r.PerRemotePod()/1024)
	fmt.Fprintf(&b, "| agent CPU during the probes and churn | %.2f cores | |\n", r.CPUPerSecond)
	fmt.Fprintf(&b, "| EndpointSlice → service map, p50 / p99 (n) | %s | p99 < 100 ms |\n", lat(r.Programming))
	for _, kind := range []string{"changes", "whole", "resync"} {
		if s, ok := r.ProxySyncs[kind]; ok {
			fmt.Fprintf(&b, "| … the proxy's syncs of kind %s: count, mean | %d, %v | |\n", kind, s.Count, s.Mean().Round(10*time.Microsecond))
		}
	}
	fmt.Fprintf(&b, "| NetworkPolicy created/deleted → enforced, p50 / p99 (n) | %s | p99 < 500 ms |\n", lat(r.Policy))
	fmt.Fprintf(&b, "| pod label changed → enforced, p50 / p99 (n) | %s | p99 < 500 ms |\n", lat(r.Label))
	fmt.Fprintf(&b, "| Service created → DNS answer, p50 / p99 (n) | %s | |\n", lat(r.DNS))
	fmt.Fprintf(&b, "| %d BGP routes from the ToR → node's kernel table | %v | < 2 s |\n", r.Routes, r.Learn.Round(time.Millisecond))
	fmt.Fprintf(&b, "| … withdrawn → gone from the table | %v | |\n", r.Withdraw.Round(time.Millisecond))
	return b.String()
}

// TestAgentScale puts a real agent (a lab node: its own netns, containerd, BGP to an FRR
// ToR, eBPF Services and policy) in a cluster whose other nodes kwok simulates, with the
// scale load's pods, Services and NetworkPolicies, and measures what the agent costs and
// how fast it follows changes (see agent.go). Like TestScale it asserts what holds at any
// size — every reading taken, every probe seen through — never a timing.
func TestAgentScale(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root, a lab, kwok (`make kwok`) and minutes")
	}
	framework.AgentArtifacts(t)
	bin := framework.Binary(t)
	const name = "scaleag"
	timeout := 15*time.Minute + time.Duration(*agentNodes**agentPodsPerNode)*40*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	labCmd := func(args ...string) {
		t.Helper()
		if out, err := exec.CommandContext(ctx, bin, append([]string{"lab", "--name", name}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("skiff lab %v: %v\n%s", args, err, tailLines(string(out), 30))
		}
	}
	t.Cleanup(func() { _ = exec.Command(bin, "lab", "down", "--name", name).Run() })
	// A /9 of pod blocks for the simulated nodes; kwok gives its pods addresses from the
	// upper half, which the node IPAM reaches only after 16,384 nodes.
	labCmd("up", "--nodes", "1", "--tor", "frr", "--cluster-cidr", "10.128.0.0/9", "--log-level", "warn")
	cfg, err := clientcmd.BuildConfigFromFlags("", skifflab.Kubeconfig(name))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	c := kubernetes.NewForConfigOrDie(cfg)
	nodeName, netnsName := name+"-node1", name+"-node1"
	pid, err := skifflab.PID(name, "node1")
	if err != nil || pid == 0 {
		t.Fatalf("node1's agent: pid %d, %v", pid, err)
	}
	pinDir := loader.PinDir(nodeName)
	node, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodeIP, err := nodeInternalIP(node)
	if err != nil {
		t.Fatal(err)
	}

	var r AgentResult
	r.Nodes, r.Routes = *agentNodes, *agentRoutes
	// The local endpoint the policy probes act on: a real pod on the real node.
	probe := startProbePod(t, ctx, c, nodeName)
	probeIP := netip.MustParseAddr(probe.Status.PodIP)
	time.Sleep(10 * time.Second) // the agent settles after its first pod
	sampler := SampleProcesses(ctx, []int{pid}, time.Second)
	r.Idle = sampler.Last()

	kwok, err := startKwok(ctx, Options{Kwok: "kwok/kwok", KwokStages: "kwok/stages.yaml", KwokCIDR: "10.192.0.0/10", Dir: t.TempDir()}, skifflab.Kubeconfig(name))
	if err != nil {
		t.Fatal(err)
	}
	defer kwok.stop()
	if err := CreateNodes(ctx, c, r.Nodes); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, timeout, func() (bool, string, error) {
		ready, err := readyNodes(ctx, c)
		return ready >= r.Nodes, fmt.Sprintf("%d/%d simulated nodes Ready", ready, r.Nodes), err
	}, t.Logf, kwok); err != nil {
		t.Fatal(err)
	}
	plan := PlanFor(r.Nodes, *agentPodsPerNode)
	r.Pods, r.Services = plan.Pods(), plan.Services()
	pods, err := TrackPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := CreateLoad(ctx, c, plan, 8); err != nil {
		t.Fatal(err)
	}
	// A policy per five nodes (1,000 at 5,000 nodes, the figure), at least ten.
	policies := Policies(plan, max(r.Nodes/5, 10))
	r.Policies = len(policies)
	if err := CreatePolicies(ctx, c, policies, 8); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, timeout, func() (bool, string, error) {
		n := pods.Running()
		s := sampler.Last()
		return n >= r.Pods, fmt.Sprintf("%d/%d pods Running; agent RSS %d MiB, CPU %s", n, r.Pods, s.RSS>>20, s.CPU.Round(time.Second)), nil
	}, t.Logf, kwok); err != nil {
		t.Fatal(err)
	}
	time.Sleep(15 * time.Second) // the agent's informers and maps catch up
	r.Loaded = sampler.Last()
	t.Logf("agent loaded: RSS %d MiB, anonymous %d MiB (idle %d MiB): %.1f KiB per remote pod",
		r.Loaded.RSS>>20, r.Loaded.Anon>>20, r.Idle.Anon>>20, r.PerRemotePod()/1024)

	// The probes run under the scale load's churn, as the SLIs are defined.
	stop := make(chan struct{})
	churned := make(chan error, 1)
	ch := &Churner{Client: c, Plan: plan}
	go func() {
		var err error
		r.ChurnSteps, err = ch.Run(ctx, stop, Churn(plan, 100000, 41), 5)
		churned <- err
	}()
	probeStart := time.Now()
	svc, err := NewProbeService(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	d, err := svc.ProgrammingLatency(ctx, pinDir, *agentRounds)
	if err != nil {
		t.Fatal(err)
	}
	r.Programming = latencyOf(d)
	r.Samples = map[string][]time.Duration{"programming": d}
	create, label, err := PolicyLatency(ctx, c, pinDir, probe, probeIP, *agentRounds/2)
	if err != nil {
		t.Fatal(err)
	}
	r.Policy, r.Label = latencyOf(create), latencyOf(label)
	r.Samples["policy"], r.Samples["label"] = create, label
	d, err = DNSLatency(ctx, c, net.JoinHostPort(nodeIP, "53"), *agentRounds)
	if err != nil {
		t.Fatal(err)
	}
	r.DNS = latencyOf(d)
	r.Samples["dns"] = d
	r.Learn, r.Withdraw, err = RouteProbe{Tor: name + "-tor", Node: netnsName, ASN: skifflab.ASN, N: r.Routes}.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	close(stop)
	if err := <-churned; err != nil {
		t.Fatal(err)
	}
	r.End = sampler.Last()
	netutil := filepath.Join(filepath.Dir(bin), "netutil") // make build puts it beside skiff
	if _, err := os.Stat(netutil); err != nil {
		netutil, _ = filepath.Abs(filepath.Join("..", "..", "bin", "netutil"))
	}
	if out, err := exec.CommandContext(ctx, "ip", "netns", "exec", netnsName, netutil, "fetch", "http://127.0.0.1:10248/metrics").Output(); err != nil {
		t.Errorf("the agent's metrics: %v", err)
	} else if r.ProxySyncs, err = ProxySyncs(string(out)); err != nil {
		t.Error(err)
	}
	if wall := time.Since(probeStart).Seconds(); wall > 0 {
		r.CPUPerSecond = (r.End.CPU - r.Loaded.CPU).Seconds() / wall
	}
	t.Logf("\n%s", r.Markdown())

	// What holds at any size: every reading was taken over the load that ran.
	if r.Idle.RSS == 0 || r.Loaded.Anon == 0 || r.End.CPU <= r.Idle.CPU {
		t.Errorf("an agent reading is missing: idle %+v, loaded %+v, end %+v", r.Idle, r.Loaded, r.End)
	}
	for what, l := range map[string]Latency{"programming": r.Programming, "policy": r.Policy, "label": r.Label, "dns": r.DNS} {
		if l.Count == 0 || l.P99 <= 0 {
			t.Errorf("%s latency: no samples (%+v)", what, l)
		}
	}
	if r.ChurnSteps == 0 {
		t.Error("no churn ran during the probes")
	}
	if *outDir != "" {
		if err := os.MkdirAll(*outDir, 0o755); err != nil {
			t.Fatal(err)
		}
		js, _ := json.MarshalIndent(r, "", "  ")
		base := filepath.Join(*outDir, fmt.Sprintf("agent-%d", r.Nodes))
		if err := os.WriteFile(base+".json", js, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(base+".md", []byte(r.Markdown()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// startProbePod runs one pod on the real node (bound there directly) and waits until it
// runs with an address.
func startProbePod(t *testing.T, ctx context.Context, c kubernetes.Interface, node string) *corev1.Pod {
	t.Helper()
	if err := ensureNamespace(ctx, c, ProbeNamespace); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ProbeNamespace, Name: "probe", Labels: map[string]string{ProbeLabel: "pod"}},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullIfNotPresent}}}}
	// The default ServiceAccount comes a moment after the namespace.
	var err error
	if _, err = poll(ctx, time.Minute, 100*time.Millisecond, "the probe pod created", func() (bool, error) {
		_, err := c.CoreV1().Pods(ProbeNamespace).Create(ctx, pod, metav1.CreateOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err = poll(ctx, 2*time.Minute, 100*time.Millisecond, "the probe pod Running", func() (bool, error) {
		pod, err = c.CoreV1().Pods(ProbeNamespace).Get(ctx, "probe", metav1.GetOptions{})
		return err == nil && pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "", nil
	}); err != nil {
		t.Fatal(err)
	}
	return pod
}

func TestProxySyncs(t *testing.T) {
	got, err := ProxySyncs(`# HELP skiff_service_proxy_sync_seconds Time a sync took.
# TYPE skiff_service_proxy_sync_seconds histogram
skiff_service_proxy_sync_seconds_bucket{kind="changes",le="0.001"} 400
skiff_service_proxy_sync_seconds_bucket{kind="changes",le="+Inf"} 400
skiff_service_proxy_sync_seconds_sum{kind="changes"} 0.08
skiff_service_proxy_sync_seconds_count{kind="changes"} 400
skiff_service_proxy_sync_seconds_bucket{kind="resync",le="+Inf"} 10
skiff_service_proxy_sync_seconds_sum{kind="resync"} 1.5
skiff_service_proxy_sync_seconds_count{kind="resync"} 10
# TYPE skiff_service_sockets gauge
skiff_service_sockets 3
`)
	if err != nil {
		t.Fatal(err)
	}
	if c := got["changes"]; c.Count != 400 || c.Mean() != 200*time.Microsecond {
		t.Errorf("changes %+v (mean %v)", c, c.Mean())
	}
	if r := got["resync"]; r.Count != 10 || r.Mean() != 150*time.Millisecond {
		t.Errorf("resync %+v (mean %v)", r, r.Mean())
	}
	if _, err := ProxySyncs("skiff_service_sockets 3\n"); err == nil {
		t.Error("no proxy metrics: no error")
	}
}
