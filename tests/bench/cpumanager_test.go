package bench

import (
	"bufio"
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
	"k8s.io/utils/cpuset"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/agent/cgroups"
)

// BenchmarkCPUPinning runs a Guaranteed pod asking for one whole CPU that spins it (a
// network function's poll loop stands in) beside two BestEffort pods that each spin a CPU,
// on an agent with --reserved-cpus 0, under the static CPU manager policy and, as the
// baseline in the same run, under none. It reports, over 5 s, how much of the time the
// worker's threads waited on a run queue while runnable, and how often they were preempted
// and moved between CPUs: with its CPU to itself only the node's own daemons (not pods) ever
// share it.
func BenchmarkCPUPinning(b *testing.B) {
	if online, err := cpuset.Parse(strings.TrimSpace(readFile("/sys/devices/system/cpu/online"))); err != nil || online.Size() < 2 {
		b.Skipf("the static policy needs a CPU to reserve and one to give out; online: %s %v", online, err)
	}
	for _, policy := range []string{"static", "none"} {
		b.Run(policy, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				wait, preempt, migrate := pinning(b, policy)
				b.ReportMetric(wait, "runq-wait-fraction")
				b.ReportMetric(preempt, "preemptions/s")
				b.ReportMetric(migrate, "migrations/s")
			}
		})
	}
}

func pinning(b *testing.B, policy string) (wait, preempt, migrate float64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, _, root, c := startBenchAgent(b, ctx, "--cpu-manager-policy", policy, "--reserved-cpus", "0")
	whole := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	uids := map[string]string{}
	for name, r := range map[string]corev1.ResourceList{"worker": whole, "noisy-1": nil, "noisy-2": nil} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: "bench-node", TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullIfNotPresent,
				Args: []string{"burn", "1000"}, Resources: corev1.ResourceRequirements{Requests: r, Limits: r}}}}}
		created, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		uids[name] = string(created.UID)
	}
	waitRunning(b, ctx, c, "worker", "noisy-1", "noisy-2")
	time.Sleep(2 * time.Second)
	before, t0 := schedStats(b, root, uids["worker"]), time.Now()
	time.Sleep(5 * time.Second)
	after, elapsed := schedStats(b, root, uids["worker"]), time.Since(t0)
	ran := float64(after.runNs - before.runNs)
	waited := float64(after.waitNs - before.waitNs)
	if ran <= 0 {
		b.Fatalf("the worker did not run: %+v %+v", before, after)
	}
	return waited / (ran + waited), float64(after.involuntary-before.involuntary) / elapsed.Seconds(),
		float64(after.migrations-before.migrations) / elapsed.Seconds()
}

// sched is a pod's threads' scheduler statistics, summed.
type sched struct {
	runNs, waitNs, involuntary, migrations int64
}

// schedStats sums /proc/<tid>/schedstat (time on a CPU, time runnable on a run queue) and
// /proc/<tid>/sched (involuntary switches, migrations) over every thread in the pod's cgroup.
func schedStats(b *testing.B, root, uid string) sched {
	var s sched
	seen := map[string]bool{}
	for _, m := range cgroups.Mounts() {
		dir := cgroups.Find(m, root, uid)
		if dir == "" {
			continue
		}
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || (d.Name() != "tasks" && d.Name() != "cgroup.threads") {
				return nil
			}
			for _, tid := range strings.Fields(readFile(p)) {
				if seen[tid] {
					continue
				}
				seen[tid] = true
				if f := strings.Fields(readFile("/proc/" + tid + "/schedstat")); len(f) >= 2 {
					run, _ := strconv.ParseInt(f[0], 10, 64)
					wait, _ := strconv.ParseInt(f[1], 10, 64)
					s.runNs, s.waitNs = s.runNs+run, s.waitNs+wait
				}
				sc := bufio.NewScanner(strings.NewReader(readFile("/proc/" + tid + "/sched")))
				for sc.Scan() {
					k, v, ok := strings.Cut(sc.Text(), ":")
					if !ok {
						continue
					}
					n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					switch strings.TrimSpace(k) {
					case "nr_involuntary_switches":
						s.involuntary += n
					case "se.nr_migrations":
						s.migrations += n
					}
				}
			}
			return nil
		})
	}
	if len(seen) == 0 {
		b.Fatalf("no threads found for pod %s under %s", uid, root)
	}
	return s
}

// readFile is a file's content, "" when it cannot be read (a thread that has just ended).
func readFile(p string) string {
	v, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return string(v)
}
