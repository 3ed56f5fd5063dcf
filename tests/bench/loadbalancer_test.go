package bench

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// BenchmarkLoadBalancer measures, in a lab of two workers and an FRR ToR, the time from
// creating a LoadBalancer Service (of a running pod on node2) until its address is written to
// its status, until the ToR's kernel has a route to it, and until a connection from the ToR
// to it is answered — p50 and max of 10, each Service taking the pool's next address.
func BenchmarkLoadBalancer(b *testing.B) {
	framework.AgentArtifacts(b)
	bin := framework.Binary(b)
	name := "blb"
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	b.Cleanup(func() { _ = exec.Command(bin, "lab", "down", "--name", name).Run() })
	if out, err := exec.CommandContext(ctx, bin, "lab", "up", "--name", name, "--nodes", "2", "--tor", "frr").CombinedOutput(); err != nil {
		b.Fatalf("lab up: %v\n%s", err, out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join("/var/lib/skiff/lab", name, "admin.kubeconfig"))
	if err != nil {
		b.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	e := &policyLab{b: b, ctx: ctx, name: name, client: client, pods: map[string]*corev1.Pod{}, shells: map[string]*podShell{}}
	e.create("web", "node2", map[string]string{"app": "web"})
	e.pods["web"] = e.running("web")
	netutil := filepath.Join(filepath.Dir(bin), "netutil")
	var status, route, reach []time.Duration
	for i := 0; i < 10; i++ {
		addr := fmt.Sprintf("198.18.200.%d", i+1)
		// The ToR watches for the route and dials the address from before the Service exists.
		probe := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+name+"-tor", "--", netutil, "probe", addr+"/32", "--port", "80", "--for", "30s")
		out := &strings.Builder{}
		probe.Stdout, probe.Stderr = out, out
		if err := probe.Start(); err != nil {
			b.Fatal(err)
		}
		routed := make(chan time.Time, 1)
		go func() {
			for ctx.Err() == nil {
				if o, _ := exec.Command("ip", "-n", name+"-tor", "route", "show", addr+"/32").Output(); len(strings.TrimSpace(string(o))) > 0 {
					routed <- time.Now()
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		time.Sleep(300 * time.Millisecond) // the probe's dialer runs
		start := time.Now()
		svcName := fmt.Sprintf("lb-%d", i)
		if _, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svcName},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		for ctx.Err() == nil {
			s, err := client.CoreV1().Services("default").Get(ctx, svcName, metav1.GetOptions{})
			if err == nil && len(s.Status.LoadBalancer.Ingress) > 0 {
				if got := s.Status.LoadBalancer.Ingress[0].IP; got != addr {
					b.Fatalf("%s got %s, want %s", svcName, got, addr)
				}
				status = append(status, time.Since(start))
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		route = append(route, (<-routed).Sub(start))
		if err := probe.Wait(); err != nil {
			b.Fatalf("probe: %v", err)
		}
		f := strings.Fields(out.String())
		if len(f) != 2 {
			o, _ := exec.Command("ip", "-n", name+"-tor", "route", "show", addr+"/32").CombinedOutput()
			b.Fatalf("the ToR never reached %s: %q (its route: %s)", addr, out.String(), o)
		}
		ns, _ := strconv.ParseInt(f[1], 10, 64)
		reach = append(reach, time.Unix(0, ns).Sub(start))
	}
	for _, d := range [][]time.Duration{status, route, reach} {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	}
	fmt.Printf("\nLoadBalancer Service created → (p50 / max of 10)\n  address in its status   %8s / %s\n  route at the ToR        %8s / %s\n  ToR's connection answered %6s / %s\n",
		status[5].Round(time.Millisecond), status[9].Round(time.Millisecond), route[5].Round(time.Millisecond), route[9].Round(time.Millisecond),
		reach[5].Round(time.Millisecond), reach[9].Round(time.Millisecond))
	b.ReportMetric(float64(status[5].Milliseconds()), "status-p50-ms")
	b.ReportMetric(float64(route[5].Milliseconds()), "tor-route-p50-ms")
	b.ReportMetric(float64(reach[5].Milliseconds()), "tor-reach-p50-ms")
}
