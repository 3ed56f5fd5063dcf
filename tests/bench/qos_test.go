package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/agent/cgroups"
)

// BenchmarkCPUContention runs two pods that each spin a whole CPU on a node whose pods share
// one CPU (the agent's cgroup root pinned to CPU 0): one requests half a CPU (Burstable),
// the other requests nothing (BestEffort). It reports the requester's share of the CPU over
// 5 s with the kubelet's QoS tiers (skiff's default) and with every pod's cgroup side by
// side (--cgroups-per-qos=false, the baseline, measured in the same run): with the tiers
// the request holds, side by side the two split the CPU evenly.
func BenchmarkCPUContention(b *testing.B) {
	for _, layout := range []struct{ name, flag string }{{"per-qos", "--cgroups-per-qos=true"}, {"flat", "--cgroups-per-qos=false"}} {
		b.Run(layout.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.ReportMetric(contention(b, layout.flag), "requester-cpu-share")
			}
		})
	}
}

func contention(b *testing.B, flag string) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, _, root, c := startBenchAgent(b, ctx, flag)
	pinned := false
	for _, m := range cgroups.Mounts() {
		if _, err := os.Stat(filepath.Join(m, "cpuset.cpus")); err != nil {
			continue
		}
		dir := filepath.Join(m, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f, v := range map[string]string{"cpuset.cpus": "0", "cpuset.mems": "0"} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
				b.Fatalf("pinning %s to CPU 0: %v", dir, err)
			}
		}
		pinned = true
	}
	if !pinned {
		b.Skip("no cpuset controller to pin the pods to one CPU with")
	}
	uids := map[string]string{}
	for name, req := range map[string]corev1.ResourceList{"requester": {corev1.ResourceCPU: resource.MustParse("500m")}, "besteffort": nil} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: "bench-node", TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullIfNotPresent,
				Args: []string{"burn", "1000"}, Resources: corev1.ResourceRequirements{Requests: req}}}}}
		created, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		uids[name] = string(created.UID)
	}
	waitRunning(b, ctx, c, "requester", "besteffort")
	time.Sleep(2 * time.Second)
	before := map[string]int64{}
	for name, uid := range uids {
		before[name] = cpuUsage(b, root, uid)
	}
	time.Sleep(5 * time.Second)
	used := map[string]int64{}
	for name, uid := range uids {
		used[name] = cpuUsage(b, root, uid) - before[name]
	}
	if used["requester"]+used["besteffort"] <= 0 {
		b.Fatalf("no CPU used: %v", used)
	}
	return float64(used["requester"]) / float64(used["requester"]+used["besteffort"])
}

// cpuUsage is the CPU time (ns) a pod's cgroup has used: cgroup v1's cpuacct.usage, else v2's
// cpu.stat usage_usec.
func cpuUsage(b *testing.B, root, uid string) int64 {
	for _, m := range cgroups.Mounts() {
		dir := cgroups.Find(m, root, uid)
		if dir == "" {
			continue
		}
		if v, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage")); err == nil {
			n, _ := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64)
			return n
		}
		if v, err := os.ReadFile(filepath.Join(dir, "cpu.stat")); err == nil {
			for _, l := range strings.Split(string(v), "\n") {
				if f := strings.Fields(l); len(f) == 2 && f[0] == "usage_usec" {
					n, _ := strconv.ParseInt(f[1], 10, 64)
					return n * 1000
				}
			}
		}
	}
	b.Fatalf("no CPU accounting for pod %s under %s", uid, root)
	return 0
}

// waitRunning waits for the default namespace's pods to be Running.
func waitRunning(b *testing.B, ctx context.Context, c kubernetes.Interface, names ...string) {
	deadline := time.Now().Add(2 * time.Minute)
	for _, name := range names {
		for {
			p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err == nil && p.Status.Phase == corev1.PodRunning {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("pod %s not Running: %v", name, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
