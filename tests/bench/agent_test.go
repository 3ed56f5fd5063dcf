package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/agent/cgroups"
	"github.com/skiff-sh/skiff/lab"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// BenchmarkPodStartup measures seconds from create to Running (observed through a watch, the
// image already present) for one pod at a time and for 30 pods at once, on a standalone
// `skiff agent` with real containerd and runc, and the RSS of the agent and of its containerd
// (the baseline: the runtime every node needs anyway).
//
// It runs with pods in QoS-tier cgroups that the agent makes with their limits (skiff's
// default) and, as the baseline in the same run, with the runtime making every pod's cgroup
// side by side (--cgroups-per-qos=false): what placing and limiting each pod costs its start.
func BenchmarkPodStartup(b *testing.B) {
	for _, layout := range []struct{ name, flag string }{{"per-qos", "--cgroups-per-qos=true"}, {"flat", "--cgroups-per-qos=false"}} {
		b.Run(layout.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				podStartup(b, layout.flag)
			}
		})
	}
}

func podStartup(b *testing.B, flags ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	agent, dir, _, c := startBenchAgent(b, ctx, flags...)
	// Warm up: the first pod pays for loading the image's snapshot.
	startPods(b, ctx, c, "warm", 1)

	var single []time.Duration
	for i := 0; i < 5; i++ {
		single = append(single, startPods(b, ctx, c, fmt.Sprintf("one-%d", i), 1)...)
	}
	burst := startPods(b, ctx, c, "burst", 30)
	sort.Slice(single, func(i, j int) bool { return single[i] < single[j] })
	sort.Slice(burst, func(i, j int) bool { return burst[i] < burst[j] })
	b.ReportMetric(single[len(single)/2].Seconds(), "s-one-pod-p50")
	b.ReportMetric(burst[len(burst)/2].Seconds(), "s-30-pods-p50")
	b.ReportMetric(burst[len(burst)-1].Seconds(), "s-30-pods-max")
	agentRSS, _ := rssKiB(agent.Process.Pid, "VmRSS")
	ctrRSS := 0
	if pid := pidOf(dir, "containerd --config"); pid > 0 {
		ctrRSS, _ = rssKiB(pid, "VmRSS")
	}
	// The agent is the one skiff binary (API server and etcd included): most of its RSS is
	// file-backed pages of that binary, shared and reclaimable; its private memory is RssAnon.
	agentAnon, _ := rssKiB(agent.Process.Pid, "RssAnon")
	b.ReportMetric(float64(agentRSS)/1024, "agent-MiB-rss")
	b.ReportMetric(float64(agentAnon)/1024, "agent-MiB-anon")
	b.ReportMetric(float64(ctrRSS)/1024, "containerd-MiB-rss")
	if ctrRSS > 0 {
		b.ReportMetric(float64(agentRSS)/float64(ctrRSS), "agent/containerd-rss")
	}
}

// BenchmarkAgentIdle reports a standalone `skiff agent`'s RSS and its anonymous part a minute
// after ten pods started and nothing else happened, with the idle garbage collector target
// (skiff's default, internal/gctune) and, in the same run, with Go's default kept
// (`--idle-gc-percent 0`), and against its containerd (the runtime every node runs anyway).
func BenchmarkAgentIdle(b *testing.B) {
	for i := 0; i < b.N; i++ {
		tuned := agentIdle(b)
		plain := agentIdle(b, "--idle-gc-percent", "0")
		for _, name := range []string{"agent-MiB-rss", "agent-MiB-anon"} {
			b.ReportMetric(tuned[name], name)
			b.ReportMetric(tuned[name]/plain[name], name+"/go-default")
		}
		b.ReportMetric(tuned["containerd-MiB-rss"], "containerd-MiB-rss")
		b.ReportMetric(tuned["agent-MiB-rss"]/tuned["containerd-MiB-rss"], "agent/containerd-rss")
	}
}

// agentIdle starts an agent with extra flags, runs ten pods on it, samples it a minute later
// and stops it (and its server).
func agentIdle(b *testing.B, extra ...string) map[string]float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	agent, dir, _, c := startBenchAgent(b, ctx, extra...)
	w, err := c.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	for i := 0; i < 10; i++ {
		if _, err := c.CoreV1().Pods("default").Create(ctx, benchPod(fmt.Sprintf("idle-%d", i), "idle"), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	running := map[string]bool{}
	for len(running) < 10 {
		select {
		case ev := <-w.ResultChan():
			if p, ok := ev.Object.(*corev1.Pod); ok && p.Status.Phase == corev1.PodRunning {
				running[p.Name] = true
			}
		case <-ctx.Done():
			b.Fatalf("%d of 10 pods Running", len(running))
		}
	}
	time.Sleep(time.Minute)
	m := map[string]float64{}
	for name, v := range map[string]struct {
		pid   int
		field string
	}{"agent-MiB-rss": {agent.Process.Pid, "VmRSS"}, "agent-MiB-anon": {agent.Process.Pid, "RssAnon"},
		"containerd-MiB-rss": {pidOf(dir, "containerd --config"), "VmRSS"}} {
		kib, err := rssKiB(v.pid, v.field)
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		m[name] = float64(kib) / 1024
	}
	return m
}

// startBenchAgent starts an API server and a standalone `skiff agent` (node bench-node, in
// a namespace of its own, with its own cgroup root, extra flags appended) and waits until the
// node is Ready; it returns the agent's process, data directory and cgroup root, and a client.
func startBenchAgent(b *testing.B, ctx context.Context, extra ...string) (*exec.Cmd, string, string, kubernetes.Interface) {
	_, nsPath := framework.Netns(b)
	s := framework.StartServer(b)
	cni, images := framework.AgentArtifacts(b)
	dir := b.TempDir()
	root := fmt.Sprintf("/skiff/bench-%d-%d", os.Getpid(), framework.FreePort(b))
	b.Cleanup(func() {
		framework.KillUnder(dir)
		_ = cgroups.KillAll(cgroups.Mounts(), root)
	})
	args := []string{"agent", "--kubeconfig", s.Kubeconfig, "--data-dir", dir, "--netns", nsPath,
		"--node-name", "bench-node", "--node-ip", "127.0.0.1", "--port", strconv.Itoa(framework.FreePort(b)),
		"--healthz-address", "127.0.0.1:" + strconv.Itoa(framework.FreePort(b)),
		"--cni-plugin", cni, "--images-dir", images, "--pod-log-dir", filepath.Join(dir, "logs"), "--log-level", "warn", "--eviction-hard", lab.EvictionHard, "--image-gc-high-threshold=100",
		// As in the e2e tests: the agent process is in the host's namespace, so no BGP or
		// service proxy, and its own cgroup root, removed afterwards.
		"--bgp=false", "--service-proxy=false", "--dns=false", "--cgroup-root", root}
	agent := exec.Command(framework.Binary(b), append(args, extra...)...)
	agent.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := agent.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = agent.Process.Signal(syscall.SIGTERM); _ = agent.Wait() })
	c := s.Client(b)
	deadline := time.Now().Add(90 * time.Second)
	for {
		n, err := c.CoreV1().Nodes().Get(ctx, "bench-node", metav1.GetOptions{})
		if err == nil && n.Spec.PodCIDR != "" && ready(n) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("agent's node not ready: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return agent, dir, root, c
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// startPods creates n pods at once and returns each one's create-to-Running time as seen by
// a watch; then it deletes them and waits until they are gone.
func startPods(b *testing.B, ctx context.Context, c kubernetes.Interface, prefix string, n int) []time.Duration {
	w, err := c.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", "bench-node").String()})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	start := map[string]time.Time{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := benchPod(name, prefix)
			mu.Lock()
			start[name] = time.Now()
			mu.Unlock()
			if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	var out []time.Duration
	seen := map[string]bool{}
	timeout := time.After(5 * time.Minute)
	for len(out) < n {
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted || seen[p.Name] || !strings.HasPrefix(p.Name, prefix+"-") {
				continue
			}
			if p.Status.Phase == corev1.PodRunning {
				seen[p.Name] = true
				mu.Lock()
				out = append(out, time.Since(start[p.Name]))
				mu.Unlock()
			}
		case <-timeout:
			b.Fatalf("%d of %d pods Running", len(out), n)
		}
	}
	if err := c.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "bench=" + prefix}); err != nil {
		b.Fatal(err)
	}
	for {
		l, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "bench=" + prefix})
		if err == nil && len(l.Items) == 0 {
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// benchPod is a netutil pod on bench-node, labelled bench=group.
func benchPod(name, group string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench": group}},
		Spec: corev1.PodSpec{NodeName: "bench-node", TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullIfNotPresent}}}}
}

// pidOf finds a process whose command line mentions dir and contains what.
func pidOf(dir, what string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, dir) && strings.Contains(cmd, what) {
			return pid
		}
	}
	return 0
}
