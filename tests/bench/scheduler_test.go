package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
	"github.com/skiff-sh/skiff/tests/scale"
)

// upstreamThreshold is scheduler_perf's required throughput for 5000 nodes and 10,000 pods
// (SchedulingBasic), the figure skiff's goal is stated against.
const upstreamThreshold = 680.0

// BenchmarkSchedulerThroughAPI measures pods/s bound by `skiff scheduler` through skiff's API
// server, as upstream's scheduler_perf does: N Node objects and 10,000 pending pods exist
// before the scheduler starts; the clock runs from the scheduler's start (its informer sync
// included) until every pod is bound, and separately from the first bind to the last.
func BenchmarkSchedulerThroughAPI(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				schedulerRun(b, nodes, 10000)
			}
		})
	}
}

func schedulerRun(b *testing.B, nodes, pods int) {
	s := framework.StartServer(b, "--disable-scheduler", "--disable-controller-manager")
	c := protobufClient(b, s)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	err := scale.Parallel(nodes, 16, func(i int) error {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%05d", i),
			Labels: map[string]string{"kubernetes.io/hostname": fmt.Sprintf("node-%05d", i), "topology.kubernetes.io/zone": fmt.Sprint("zone-", i%3)}}}
		created, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		created.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"),
			corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")}
		created.Status.Capacity = created.Status.Allocatable
		created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		_, err = c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	err = scale.Parallel(pods, 32, func(i int) error {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%05d", i)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/pause:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}}}}
		_, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}

	var bound atomic.Int64
	var first, last atomic.Int64
	factory := informers.NewSharedInformerFactory(c.(*kubernetes.Clientset), 0)
	inf := factory.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(old, obj any) {
		if old.(*corev1.Pod).Spec.NodeName == "" && obj.(*corev1.Pod).Spec.NodeName != "" {
			now := time.Now().UnixNano()
			first.CompareAndSwap(0, now)
			last.Store(now)
			bound.Add(1)
		}
	}})
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }() // Shutdown waits for the informers, which need ctx to end
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)

	start := time.Now()
	sched := exec.Command(framework.Binary(b), "scheduler", "--kubeconfig", filepath.Join(s.Dir, "scheduler.kubeconfig"),
		"--scheduler-address", "127.0.0.1:"+strconv.Itoa(framework.FreePort(b)), "--log-level", "warn")
	sched.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	sched.Stdout, sched.Stderr = os.Stderr, os.Stderr
	if err := sched.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sched.Process.Kill(); _ = sched.Wait() }()
	for bound.Load() < int64(pods) {
		if ctx.Err() != nil {
			b.Fatalf("only %d of %d pods bound", bound.Load(), pods)
		}
		time.Sleep(50 * time.Millisecond)
	}
	total := time.Since(start)
	binding := time.Duration(last.Load() - first.Load())
	b.ReportMetric(float64(pods)/total.Seconds(), "pods/s")
	b.ReportMetric(float64(pods)/binding.Seconds(), "pods/s-binding")
	b.ReportMetric(float64(pods)/total.Seconds()/upstreamThreshold, "x-upstream-threshold")
	s.Stop()
}
