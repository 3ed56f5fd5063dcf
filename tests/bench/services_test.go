package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/dataplane/loader"
	"github.com/skiff-sh/skiff/dataplane/services"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestMain turns this binary into a benchmark's helper when SKIFF_LOAD_TARGET,
// SKIFF_DNS_TARGET or SKIFF_WAIT is set: it then runs inside a pod's network namespace
// instead of running tests.
func TestMain(m *testing.M) {
	if target := os.Getenv("SKIFF_LOAD_TARGET"); target != "" {
		loadClient(target)
		os.Exit(0)
	}
	if target := os.Getenv("SKIFF_DNS_TARGET"); target != "" {
		dnsClient(target)
		os.Exit(0)
	}
	if until := os.Getenv("SKIFF_WAIT"); until == "dns" {
		dnsWaitClient()
		os.Exit(0)
	} else if until != "" {
		waitClient(until)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// loadClient opens one TCP connection per request (GET /hostname, read to EOF) for
// SKIFF_LOAD_SECONDS and prints "<requests answered> <p50 µs> <p99 µs> <failed>"; a request
// that fails (2 s to connect) counts as failed, and its time goes into no percentile.
func loadClient(target string) {
	secs, _ := strconv.Atoi(os.Getenv("SKIFF_LOAD_SECONDS"))
	var lat []time.Duration
	failed := 0
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	for time.Now().Before(deadline) {
		start := time.Now()
		c, err := net.DialTimeout("tcp", target, 2*time.Second)
		if err != nil {
			failed++
			continue
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = c.Write([]byte("GET /hostname HTTP/1.0\r\n\r\n"))
		n, err := io.Copy(io.Discard, c)
		c.Close()
		if err != nil || n == 0 {
			failed++
			continue
		}
		lat = append(lat, time.Since(start))
	}
	if len(lat) == 0 {
		fmt.Println(0, 0, 0, failed)
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Println(len(lat), lat[len(lat)/2].Microseconds(), lat[len(lat)*99/100].Microseconds(), failed)
}

// The Service proxies compared, each in a lab of its own: skiff's eBPF programs, and
// upstream kube-proxy in its nftables and iptables modes watching skiff's API server.
const (
	proxySkiff    = "skiff"
	proxyNFTables = "nftables"
	proxyIPTables = "iptables"
)

// serviceSizes are the cluster sizes measured, in Services of 10 endpoints each.
var serviceSizes = []int{1, 1000, 10000}

// sizeResult is what one proxy achieved with n Services present.
type sizeResult struct {
	n int
	// program is the time from creating a Service (of the running backend) right after the
	// burst of n until a pod's connection through it is answered — the proxy's lag behind the
	// API; change the same for one more Service once all n are programmed.
	program, change time.Duration
	// Connections per second and p50/p99 of a request, straight to the pod and through the ClusterIP.
	direct, cluster load
}

type load struct {
	rate     float64
	p50, p99 int
	// failed counts requests not answered (2 s to connect, or no reply).
	failed int
}

// BenchmarkServiceConnect compares Service proxies in a lab (two nodes and a ToR), with 1,
// 1000 and 10,000 Services of 10 endpoints each: how long the node takes to program them,
// how long one new Service takes to answer, and the connections/s and request latency
// (p50/p99) from a pod on node1 to a backend pod on node2 through the ClusterIP against
// straight to the pod IP — the baseline "no load balancer at all", measured in the same lab.
// Each proxy gets a lab of its own, one after another, in this one run: skiff's eBPF, then
// kube-proxy v1.37.2 in nftables and in iptables mode (built by `make kube-proxy`).
func BenchmarkServiceConnect(b *testing.B) {
	framework.AgentArtifacts(b)
	kubeProxy := kubeProxyBinary(b)
	results := map[string][]sizeResult{}
	proxies := []string{proxySkiff, proxyNFTables, proxyIPTables}
	for i, proxy := range proxies {
		b.Run(proxy, func(b *testing.B) {
			results[proxy] = benchProxy(b, fmt.Sprintf("bsvc%d", i), proxy, kubeProxy)
			for j, r := range results[proxy] {
				n := r.n
				b.ReportMetric(r.cluster.rate/r.direct.rate, fmt.Sprintf("conn-rate-vs-direct-%d", n))
				b.ReportMetric(float64(r.cluster.p50)/float64(r.direct.p50), fmt.Sprintf("p50-vs-direct-%d", n))
				b.ReportMetric(float64(r.cluster.failed), fmt.Sprintf("failed-requests-%d", n))
				sk, ok := results[proxySkiff]
				if proxy == proxySkiff || !ok {
					continue
				}
				// How many times longer kube-proxy takes than skiff (above 1: skiff is ahead).
				b.ReportMetric(r.program.Seconds()/sk[j].program.Seconds(), fmt.Sprintf("program-vs-skiff-%d", n))
				b.ReportMetric(r.change.Seconds()/sk[j].change.Seconds(), fmt.Sprintf("change-vs-skiff-%d", n))
				b.ReportMetric(float64(r.cluster.p99)/float64(sk[j].cluster.p99), fmt.Sprintf("p99-vs-skiff-%d", n))
			}
		})
	}
	if len(results) < len(proxies) {
		return // a sub-benchmark alone (-bench ServiceConnect/skiff): no side-by-side table
	}
	// A parent benchmark's log is not printed: the table goes to stdout.
	fmt.Printf("\nServices proxy     after-burst     change   conn/s (x direct, x skiff)  p50 µs (x direct, x skiff)  p99 µs (x direct, x skiff)  failed\n")
	for i, n := range serviceSizes {
		sk := results[proxySkiff][i]
		for _, proxy := range proxies {
			r := results[proxy][i]
			fmt.Printf("%8d %-9s %11s %10s %8.0f (%.2fx, %.2fx) %11d (%.2fx, %.2fx) %8d (%.2fx, %.2fx) %7d\n", n, proxy,
				r.program.Round(time.Millisecond), r.change.Round(time.Millisecond),
				r.cluster.rate, r.cluster.rate/r.direct.rate, r.cluster.rate/sk.cluster.rate,
				r.cluster.p50, float64(r.cluster.p50)/float64(r.direct.p50), float64(r.cluster.p50)/float64(sk.cluster.p50),
				r.cluster.p99, float64(r.cluster.p99)/float64(r.direct.p99), float64(r.cluster.p99)/float64(sk.cluster.p99), r.cluster.failed)
		}
	}
}

// kubeProxyBinary is upstream kube-proxy, built outside skiff's module by `make kube-proxy`
// (tests/bench/kubeproxy) or named by SKIFF_KUBE_PROXY.
func kubeProxyBinary(b *testing.B) string {
	path := os.Getenv("SKIFF_KUBE_PROXY")
	if path == "" {
		_, file, _, _ := runtime.Caller(0)
		path = filepath.Join(filepath.Dir(file), "kubeproxy", "kube-proxy")
	}
	if _, err := os.Stat(path); err != nil {
		b.Fatalf("kube-proxy for the side-by-side run: %v (build it with `make kube-proxy`)", err)
	}
	return path
}

// benchProxy brings up a lab whose Services the given proxy serves and measures it at every size.
func benchProxy(b *testing.B, name, proxy, kubeProxy string) []sizeResult {
	bin := framework.Binary(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	labDir := filepath.Join("/var/lib/skiff/lab", name)
	// Down when this proxy's run ends (not only at the end of all three: labs run one at a time).
	down := func() { _ = exec.Command(bin, "lab", "down", "--name", name).Run() }
	defer down()
	up := []string{"lab", "up", "--name", name, "--nodes", "2"}
	if proxy != proxySkiff {
		up = append(up, "--service-proxy=false")
	}
	if out, err := exec.CommandContext(ctx, bin, up...).CombinedOutput(); err != nil {
		b.Fatalf("lab up: %v\n%s", err, out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(labDir, "admin.kubeconfig"))
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 2000, 4000
	client := kubernetes.NewForConfigOrDie(cfg)
	node1 := name + "-node1"

	if proxy != proxySkiff {
		for _, role := range []string{"node1", "node2"} {
			stop := startKubeProxy(b, kubeProxy, proxy, labDir, name, role)
			defer stop()
		}
	}
	programmed := programmedCheck(b, proxy, node1)

	pod := func(podName, node string, labels map[string]string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podName, Labels: labels}, Spec: corev1.PodSpec{NodeName: name + "-" + node,
			Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullIfNotPresent}}}}
		if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		for ctx.Err() == nil {
			got, err := client.CoreV1().Pods("default").Get(ctx, podName, metav1.GetOptions{})
			if err == nil && got.Status.Phase == corev1.PodRunning && got.Status.PodIP != "" {
				return got
			}
			time.Sleep(200 * time.Millisecond)
		}
		b.Fatal("pod not running")
		return nil
	}
	backend := pod("backend", "node2", map[string]string{"app": "backend"})
	clientPod := pod("client", "node1", nil)
	svc := serviceOf(b, ctx, client, "backend")
	waitFor(b, ctx, "the measured Service programmed on node1", func() bool { return programmed(svc.Spec.ClusterIP, 1) })

	// The load helpers run in the client pod's network namespace and under node1's pod cgroup
	// (where skiff's socket hooks see them; kube-proxy sees their packets at the node).
	shell := newPodShell(b, ctx, name, "node1", clientPod)
	answered := shell.answered
	measure := func(target string) load { return shell.measure(target, 5) }
	newService := func(name string) func() string {
		return func() string { return net.JoinHostPort(serviceOf(b, ctx, client, name).Spec.ClusterIP, "80") }
	}
	// Pod to pod across the nodes must work first (the nodes' BGP routes are in), so the
	// figures below are the proxy's alone.
	answered("pod to pod", func() string { return net.JoinHostPort(backend.Status.PodIP, "8080") })

	var results []sizeResult
	created := 0
	for _, n := range serviceSizes {
		r := sizeResult{n: n}
		createDummies(b, ctx, client, created, n)
		created = n
		// A Service of the running backend created as the burst ends answers once the proxy
		// has caught up with the burst.
		r.program = answered("a Service after the burst", newService(fmt.Sprintf("after-burst-%d", n)))
		last, err := client.CoreV1().Services("default").Get(ctx, dummyName(n-1), metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		waitFor(b, ctx, fmt.Sprintf("%d Services programmed on node1", n), func() bool { return programmed(last.Spec.ClusterIP, 10) })
		// One more, with everything settled: the cost of one change at this size.
		r.change = answered("a new Service", newService(fmt.Sprintf("probe-%d", n)))

		r.direct = measure(net.JoinHostPort(backend.Status.PodIP, "8080"))
		r.cluster = measure(net.JoinHostPort(svc.Spec.ClusterIP, "80"))
		b.Logf("%s, %5d Services: a Service created as they were answered after %s; one more, after they were programmed, after %s; direct %.0f conn/s p50 %d µs p99 %d µs; ClusterIP %.0f conn/s (%.2fx) p50 %d µs (%.2fx) p99 %d µs (%.2fx); failed requests: direct %d, ClusterIP %d",
			proxy, n, r.program.Round(time.Millisecond), r.change.Round(time.Millisecond),
			r.direct.rate, r.direct.p50, r.direct.p99, r.cluster.rate, r.cluster.rate/r.direct.rate,
			r.cluster.p50, float64(r.cluster.p50)/float64(r.direct.p50), r.cluster.p99, float64(r.cluster.p99)/float64(r.direct.p99),
			r.direct.failed, r.cluster.failed)
		results = append(results, r)
	}
	return results
}

// serviceOf makes a ClusterIP Service of the backend pod (port 80 to 8080).
func serviceOf(b *testing.B, ctx context.Context, client kubernetes.Interface, name string) *corev1.Service {
	svc, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "backend"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatalf("service %s: %v", name, err)
	}
	return svc
}

func dummyName(i int) string { return fmt.Sprintf("dummy-%d", i) }

// createDummies creates Services from..to-1, each without a selector and with an
// EndpointSlice of 10 ready endpoints in 10.248.0.0/14 — addresses nothing dials.
func createDummies(b *testing.B, ctx context.Context, client kubernetes.Interface, from, to int) {
	next := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var failure error
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := createDummy(ctx, client, i); err != nil {
					once.Do(func() { failure = err })
				}
			}
		}()
	}
	for i := from; i < to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if failure != nil {
		b.Fatal(failure)
	}
}

func createDummy(ctx context.Context, client kubernetes.Interface, i int) error {
	name := dummyName(i)
	if _, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("service %s: %w", name, err)
	}
	base := netip.MustParseAddr("10.248.0.0").As4()
	first := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(i*10)
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To(int32(8080)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for k := uint32(0); k < 10; k++ {
		a := first + k
		ip := netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip.String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("endpointslice of %s: %w", name, err)
	}
	return nil
}

// waitFor polls cond every 10 ms (the figures it bounds are hundreds of ms and more).
func waitFor(b *testing.B, ctx context.Context, what string, cond func() bool) {
	for !cond() {
		if ctx.Err() != nil {
			b.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// programmedCheck answers whether node's data plane serves clusterIP:80/TCP with at least
// backends endpoints — read from skiff's pinned maps, or from kube-proxy's nftables map or
// iptables chains in the node's namespace.
func programmedCheck(b *testing.B, proxy, node string) func(clusterIP string, backends int) bool {
	netns := "--net=/run/netns/" + node
	switch proxy {
	case proxySkiff:
		// The maps are opened once (the agent pins them at start) and kept for the run.
		var m *services.Maps
		return func(clusterIP string, backends int) bool {
			if m == nil {
				opened, closeMaps, err := loader.OpenPinned(loader.PinDir(node))
				if err != nil {
					return false
				}
				b.Cleanup(closeMaps)
				m = &opened
			}
			e, ok, err := m.Lookup(netip.AddrPortFrom(netip.MustParseAddr(clusterIP), 80), corev1.ProtocolTCP)
			return err == nil && ok && len(e.Backends) >= backends
		}
	case proxyNFTables:
		// A Service with endpoints is an element of the service-ips map (one without is in
		// no-endpoint-services); its endpoints are written in the same transaction.
		return func(clusterIP string, _ int) bool {
			return exec.Command("nsenter", netns, "nft", "get", "element", "ip", "kube-proxy", "service-ips",
				"{ "+clusterIP+" . tcp . 80 }").Run() == nil
		}
	case proxyIPTables:
		// A Service with endpoints jumps from KUBE-SERVICES to its KUBE-SVC- chain, written
		// with its endpoints in one iptables-restore.
		return func(clusterIP string, _ int) bool {
			out, err := exec.Command("nsenter", netns, "iptables", "-w", "-t", "nat", "-S", "KUBE-SERVICES").Output()
			if err != nil {
				return false
			}
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, "-d "+clusterIP+"/32 ") && strings.Contains(line, "-j KUBE-SVC-") {
					return true
				}
			}
			return false
		}
	}
	b.Fatalf("unknown proxy %q", proxy)
	return nil
}

// startKubeProxy runs upstream kube-proxy in a lab node's namespace with the node's
// credentials, as a kube-proxy DaemonSet would (defaults otherwise), and returns its stop.
func startKubeProxy(b *testing.B, kubeProxy, mode, labDir, lab, role string) func() {
	logFile, err := os.Create(filepath.Join(labDir, "kube-proxy-"+role+".log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("nsenter", "--net=/run/netns/"+lab+"-"+role, kubeProxy,
		"--kubeconfig", filepath.Join(labDir, role, "node.kubeconfig"),
		"--hostname-override", lab+"-"+role, "--proxy-mode", mode, "--cluster-cidr", "10.244.0.0/16",
		// Leave the machine-wide conntrack table size alone; bind in the node's namespace only.
		"--conntrack-max-per-core", "0", "--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			logFile.Close()
		})
	}
	b.Cleanup(stop)
	return stop
}
