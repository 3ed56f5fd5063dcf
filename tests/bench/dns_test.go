package bench

import (
	"context"
	"fmt"
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

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// dnsClient sends A queries for SKIFF_DNS_NAME to SKIFF_DNS_TARGET over UDP from
// SKIFF_DNS_CONCURRENCY goroutines (one socket each, one query in flight each) for
// SKIFF_LOAD_SECONDS and prints "<answered> <p50 µs> <p99 µs> <failed>"; a query without a
// NOERROR answer within a second counts as failed.
func dnsClient(target string) {
	secs, _ := strconv.Atoi(os.Getenv("SKIFF_LOAD_SECONDS"))
	workers, _ := strconv.Atoi(os.Getenv("SKIFF_DNS_CONCURRENCY"))
	name := dns.Fqdn(os.Getenv("SKIFF_DNS_NAME"))
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	var mu sync.Mutex
	var lat []time.Duration
	failed := 0
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &dns.Client{Net: "udp", Timeout: time.Second}
			conn, err := c.Dial(target)
			if err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
				return
			}
			defer conn.Close()
			m := new(dns.Msg)
			m.SetQuestion(name, dns.TypeA)
			var mine []time.Duration
			bad := 0
			for time.Now().Before(deadline) {
				m.Id = dns.Id()
				r, rtt, err := c.ExchangeWithConn(m, conn)
				if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
					bad++
					continue
				}
				mine = append(mine, rtt)
			}
			mu.Lock()
			lat = append(lat, mine...)
			failed += bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(lat) == 0 {
		fmt.Println(0, 0, 0, failed)
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Println(len(lat), lat[len(lat)/2].Microseconds(), lat[len(lat)*99/100].Microseconds(), failed)
}

// dnsWaitClient prints "ready", reads "SERVER NAME" lines and for each asks SERVER for NAME
// (A, UDP) every millisecond until it has an answer, then prints the Unix time in
// nanoseconds (at most 30 s; "timeout" then).
func dnsWaitClient() {
	fmt.Println("ready")
	var server, name string
	for {
		if _, err := fmt.Scan(&server, &name); err != nil {
			return
		}
		c := &dns.Client{Net: "udp", Timeout: 50 * time.Millisecond}
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), dns.TypeA)
		done := false
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if r, _, err := c.Exchange(m, server); err == nil && len(r.Answer) > 0 {
				fmt.Println(time.Now().UnixNano())
				done = true
				break
			}
		}
		if !done {
			fmt.Println("timeout")
		}
	}
}

// BenchmarkClusterDNS measures the cluster DNS in a lab of two workers, from a pod on
// node1: queries/s and p50/p99 (8 queries in flight, UDP) for a Service's name through the
// kube-dns ClusterIP (the socket balancer to node1's own resolver), against the same
// resolver asked at the node's address, and against upstream CoreDNS v1.15.0 (its kubernetes
// plugin over the same API, `make coredns`) on the same node, in one run; and the time from
// creating a Service until each resolver answers its name (p50 of 10).
func BenchmarkClusterDNS(b *testing.B) {
	framework.AgentArtifacts(b)
	coredns := coreDNSBinary(b)
	bin := framework.Binary(b)
	name := "bdns"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	b.Cleanup(func() { _ = exec.Command(bin, "lab", "down", "--name", name).Run() })
	if out, err := exec.CommandContext(ctx, bin, "lab", "up", "--name", name, "--nodes", "2", "--tor", "none").CombinedOutput(); err != nil {
		b.Fatalf("lab up: %v\n%s", err, out)
	}
	labDir := filepath.Join("/var/lib/skiff/lab", name)
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(labDir, "admin.kubeconfig"))
	if err != nil {
		b.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	e := &policyLab{b: b, ctx: ctx, name: name, client: client, pods: map[string]*corev1.Pod{}, shells: map[string]*podShell{}}
	e.create("client", "node1", nil)
	e.pods["client"] = e.running("client")
	shell := newPodShell(b, ctx, name, "node1", e.pods["client"])
	newService := func(n string) {
		if _, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: n},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	newService("web")

	// CoreDNS with the node's own credentials (what a node may read is what it needs).
	corefile := filepath.Join(b.TempDir(), "Corefile")
	if err := os.WriteFile(corefile, []byte(fmt.Sprintf(`cluster.local:1053 {
    errors
    kubernetes cluster.local in-addr.arpa {
        kubeconfig %s
        pods verified
    }
}
`, filepath.Join(labDir, "node1", "node.kubeconfig"))), 0o644); err != nil {
		b.Fatal(err)
	}
	logf, _ := os.Create(filepath.Join(labDir, "coredns.log"))
	cd := exec.Command("nsenter", "--net=/run/netns/"+name+"-node1", coredns, "-conf", corefile)
	cd.Stdout, cd.Stderr = logf, logf
	cd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cd.Process.Kill(); _ = cd.Wait(); logf.Close() })

	servers := []struct{ what, addr string }{
		{"skiff via kube-dns ClusterIP", "10.96.0.10:53"},
		{"skiff at the node address", "198.18.0.2:53"},
		{"CoreDNS v1.15.0 at the node", "198.18.0.2:1053"},
	}
	// Every resolver answers first (CoreDNS has synced).
	w := shell.startDNSWait()
	for _, s := range servers {
		w.ask(s.addr, "web.default.svc.cluster.local")
	}
	runs := map[string][]load{}
	for round := 0; round < 3; round++ { // interleaved; the run with the median rate is kept
		for _, s := range servers {
			runs[s.what] = append(runs[s.what], shell.dnsLoad(s.addr, "web.default.svc.cluster.local", 5, 8))
		}
	}
	results := map[string]load{}
	for what, ls := range runs {
		sort.Slice(ls, func(i, j int) bool { return ls[i].rate < ls[j].rate })
		results[what] = ls[1]
	}
	// From a new Service's creation until each resolver answers its name.
	created := map[string][]time.Duration{}
	for i := 0; i < 10; i++ {
		for _, s := range servers[1:] {
			n := fmt.Sprintf("new-%d-%s", i, strings.Split(s.addr, ":")[1])
			start := time.Now()
			newService(n)
			created[s.what] = append(created[s.what], w.ask(s.addr, n+".default.svc.cluster.local").Sub(start))
		}
	}
	w.close()
	base := results[servers[1].what]
	fmt.Printf("\nCluster DNS (A, UDP, 8 in flight, from a pod)   queries/s (x node address)   p50 µs   p99 µs   failed\n")
	for _, s := range servers {
		r := results[s.what]
		fmt.Printf("  %-40s %10.0f (%.2fx) %10d %8d %8d\n", s.what, r.rate, r.rate/base.rate, r.p50, r.p99, r.failed)
	}
	for _, s := range servers[1:] {
		d := created[s.what]
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		fmt.Printf("  a new Service answered by %-28s p50 %s, max %s\n", s.what, d[len(d)/2].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond))
		b.ReportMetric(float64(d[len(d)/2].Milliseconds()), "new-service-ms-"+strings.Split(s.addr, ":")[1])
	}
	sk, co := results[servers[1].what], results[servers[2].what]
	b.ReportMetric(sk.rate/co.rate, "qps-vs-coredns")
	b.ReportMetric(float64(sk.p99)/float64(co.p99), "p99-vs-coredns")
	b.ReportMetric(results[servers[0].what].rate/sk.rate, "qps-clusterip-vs-direct")
}

// coreDNSBinary is upstream CoreDNS built by `make coredns` (tests/bench/coredns) or named
// by SKIFF_COREDNS.
func coreDNSBinary(b *testing.B) string {
	path := os.Getenv("SKIFF_COREDNS")
	if path == "" {
		_, file, _, _ := runtime.Caller(0)
		path = filepath.Join(filepath.Dir(file), "coredns", "coredns")
	}
	if _, err := os.Stat(path); err != nil {
		b.Fatalf("CoreDNS for the side-by-side run: %v (build it with `make coredns`)", err)
	}
	return path
}

// dnsLoad runs the DNS load helper in the pod.
func (s *podShell) dnsLoad(target, name string, secs, concurrency int) load {
	out, err := s.cmd("SKIFF_DNS_TARGET="+target, "SKIFF_DNS_NAME="+name, "SKIFF_LOAD_SECONDS="+strconv.Itoa(secs),
		"SKIFF_DNS_CONCURRENCY="+strconv.Itoa(concurrency)).CombinedOutput()
	var n int
	var l load
	if _, perr := fmt.Sscan(strings.TrimSpace(string(out)), &n, &l.p50, &l.p99, &l.failed); err != nil || perr != nil || n == 0 {
		s.b.Fatalf("DNS load helper to %s: %v %v\n%s", target, err, perr, out)
	}
	l.rate = float64(n) / float64(secs)
	return l
}

// dnsWaiter is a running DNS wait helper in a pod.
type dnsWaiter struct{ w *waiter }

func (s *podShell) startDNSWait() *dnsWaiter {
	return &dnsWaiter{w: s.startWait("dns wait", "dns")}
}

// ask has the helper poll server for name and returns when it was answered.
func (d *dnsWaiter) ask(server, name string) time.Time {
	d.w.dial(server + " " + name)
	if !d.w.lines.Scan() {
		d.w.s.b.Fatalf("dns wait helper ended asking %s for %s", server, name)
	}
	ns, err := strconv.ParseInt(d.w.lines.Text(), 10, 64)
	if err != nil {
		d.w.s.b.Fatalf("%s for %s: %q", server, name, d.w.lines.Text())
	}
	return time.Unix(0, ns)
}

func (d *dnsWaiter) close() { _ = d.w.stdin.Close(); _ = d.w.cmd.Wait() }
