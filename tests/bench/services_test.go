package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
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

// TestMain turns this binary into BenchmarkServiceConnect's load client when SKIFF_LOAD_TARGET
// is set: it then runs inside a pod's network namespace and the node's pod cgroup instead of
// running tests.
func TestMain(m *testing.M) {
	if target := os.Getenv("SKIFF_LOAD_TARGET"); target != "" {
		loadClient(target)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// loadClient opens one TCP connection per request (GET /hostname, read to EOF) for
// SKIFF_LOAD_SECONDS and prints "<requests> <p50 µs> <p99 µs>".
func loadClient(target string) {
	secs, _ := strconv.Atoi(os.Getenv("SKIFF_LOAD_SECONDS"))
	var lat []time.Duration
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	for time.Now().Before(deadline) {
		start := time.Now()
		c, err := net.DialTimeout("tcp", target, 2*time.Second)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		_, _ = c.Write([]byte("GET /hostname HTTP/1.0\r\n\r\n"))
		_, _ = io.Copy(io.Discard, c)
		c.Close()
		lat = append(lat, time.Since(start))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Println(len(lat), lat[len(lat)/2].Microseconds(), lat[len(lat)*99/100].Microseconds())
}

// BenchmarkServiceConnect measures, in a lab, new connections per second and request latency
// (p50/p99) from a pod on node1 to a backend pod on node2, through a ClusterIP against
// straight to the pod IP, with 1, 1000 and 10,000 Services in the cluster. The direct
// figure, taken in the same run, is the baseline: "no load balancer at all".
func BenchmarkServiceConnect(b *testing.B) {
	framework.AgentArtifacts(b)
	bin := framework.Binary(b)
	const name = "benchsvc"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	b.Cleanup(func() { _ = exec.Command(bin, "lab", "down", "--name", name).Run() })
	if out, err := exec.CommandContext(ctx, bin, "lab", "up", "--name", name, "--nodes", "2").CombinedOutput(); err != nil {
		b.Fatalf("lab up: %v\n%s", err, out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", "/var/lib/skiff/lab/"+name+"/admin.kubeconfig")
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	client := kubernetes.NewForConfigOrDie(cfg)
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
	svc, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "backend"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "backend"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the endpoint reaches every node's maps

	// The helper runs in the client pod's network namespace and under node1's pod cgroup.
	sock := filepath.Join("/var/lib/skiff/lab", name, "node1", "containerd", "containerd.sock")
	id := strings.TrimPrefix(clientPod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	out, err := exec.Command("ctr", "--address", sock, "-n", "k8s.io", "task", "ls").CombinedOutput()
	if err != nil {
		b.Fatal(err)
	}
	pid := ""
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == id {
			pid = f[1]
		}
	}
	cg := filepath.Join("/sys/fs/cgroup/unified/skiff/lab-"+name, "node1", "bench-client")
	if err := os.MkdirAll(cg, 0o755); err != nil {
		b.Fatal(err)
	}
	self, _ := os.Executable()
	load := func(target string) (rate float64, p50, p99 int) {
		cmd := exec.CommandContext(ctx, "sh", "-c", fmt.Sprintf(`echo $$ > %s/cgroup.procs && exec nsenter --net=/proc/%s/ns/net %s`, cg, pid, self))
		cmd.Env = append(os.Environ(), "SKIFF_LOAD_TARGET="+target, "SKIFF_LOAD_SECONDS=5")
		out, err := cmd.CombinedOutput()
		var n int
		if _, perr := fmt.Sscan(strings.TrimSpace(string(out)), &n, &p50, &p99); err != nil || perr != nil {
			b.Fatalf("load helper to %s: %v %v\n%s", target, err, perr, out)
		}
		return float64(n) / 5, p50, p99
	}
	created := 1 // the measured Service
	for _, n := range []int{1, 1000, 10000} {
		for ; created < n; created++ {
			dummy := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("dummy-%d", created)},
				Spec: corev1.ServiceSpec{Selector: map[string]string{"app": fmt.Sprintf("none-%d", created)}, Ports: []corev1.ServicePort{{Port: 80}}}}
			if _, err := client.CoreV1().Services("default").Create(ctx, dummy, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		// Wait until node1's maps hold them all.
		for ctx.Err() == nil {
			out, _ := exec.Command(bin, "bpf", "services", "--node", name+"-node1").CombinedOutput()
			if strings.Count(string(out), "\n") >= n+1 {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		dRate, d50, d99 := load(net.JoinHostPort(backend.Status.PodIP, "8080"))
		sRate, s50, s99 := load(net.JoinHostPort(svc.Spec.ClusterIP, "80"))
		b.ReportMetric(sRate/dRate, fmt.Sprintf("conn-rate-ratio-%d", n))
		b.ReportMetric(float64(s50)/float64(d50), fmt.Sprintf("p50-ratio-%d", n))
		b.Logf("%5d Services: direct %.0f conn/s p50 %d µs p99 %d µs; ClusterIP %.0f conn/s (%.2fx) p50 %d µs (%.2fx) p99 %d µs (%.2fx)",
			n, dRate, d50, d99, sRate, sRate/dRate, s50, float64(s50)/float64(d50), s99, float64(s99)/float64(d99))
	}
}
