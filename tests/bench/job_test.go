package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// BenchmarkJobController runs a Job of 1000 completions (parallelism 100) through skiff's
// Job controller, with the benchmark as the kubelet: every pod it creates is marked
// Succeeded as soon as it is seen, so the figure is the controller's own pace (create,
// count through the tracking finalizer, release, create the next). The baseline, in the
// same run and server, is the ReplicaSet controller creating 1000 pods. Both in pods/s.
func BenchmarkJobController(b *testing.B) {
	const pods = 1000
	s := framework.StartServer(b, "--disable-scheduler")
	c := protobufClient(b, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var jobRate, rsRate []float64
	for i := 0; i < b.N; i++ {
		ns := fmt.Sprintf("bench-%d", i)
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		// Baseline: a ReplicaSet of 1000, until its 1000th pod is seen.
		w, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app=rs"})
		if err != nil {
			b.Fatal(err)
		}
		replicas := int32(pods)
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs"}, Spec: appsv1.ReplicaSetSpec{Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rs"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rs"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/pause:1"}}}}}}
		start := time.Now()
		if _, err := c.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		seen := 0
		for seen < pods {
			select {
			case ev := <-w.ResultChan():
				if ev.Type == watch.Added {
					seen++
				}
			case <-ctx.Done():
				b.Fatalf("ReplicaSet: %d of %d pods", seen, pods)
			}
		}
		w.Stop()
		rsRate = append(rsRate, pods/time.Since(start).Seconds())
		if err := c.AppsV1().ReplicaSets(ns).Delete(ctx, "rs", metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}

		// The Job, with the benchmark succeeding every pod at once.
		completions, parallelism := int32(pods), int32(100)
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "job"}, Spec: batchv1.JobSpec{Completions: &completions, Parallelism: &parallelism,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/pause:1"}}}}}}
		kctx, stopKubelet := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); succeedPods(kctx, c, ns, "batch.kubernetes.io/job-name=job") }()
		time.Sleep(200 * time.Millisecond) // the watch is open
		start = time.Now()
		if _, err := c.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		for {
			j, err := c.BatchV1().Jobs(ns).Get(ctx, "job", metav1.GetOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if done(j) {
				break
			}
			if ctx.Err() != nil {
				b.Fatalf("job: %+v", j.Status)
			}
			time.Sleep(20 * time.Millisecond)
		}
		jobRate = append(jobRate, pods/time.Since(start).Seconds())
		stopKubelet()
		wg.Wait()
	}
	mean := func(v []float64) float64 {
		t := 0.0
		for _, x := range v {
			t += x
		}
		return t / float64(len(v))
	}
	b.ReportMetric(mean(jobRate), "job-pods/s")
	b.ReportMetric(mean(rsRate), "replicaset-pods/s")
	b.ReportMetric(mean(jobRate)/mean(rsRate), "job/replicaset")
	b.Logf("Job of %d completions (parallelism 100), pods succeeded at once: %.0f pods/s; ReplicaSet creating %d: %.0f pods/s (%.2fx)",
		pods, mean(jobRate), pods, mean(rsRate), mean(jobRate)/mean(rsRate))
}

func done(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// succeedPods plays the kubelet for the pods the selector matches: each new one is marked
// Succeeded, its container terminated with exit code 0, by 16 workers.
func succeedPods(ctx context.Context, c kubernetes.Interface, ns, selector string) {
	w, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return
	}
	defer w.Stop()
	work := make(chan *corev1.Pod, 4096)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				now := metav1.Now()
				p.Status.Phase = corev1.PodSucceeded
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "localhost/skiff/pause:1",
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}}}}
				_, _ = c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			}
		}()
	}
	defer func() { close(work); wg.Wait() }()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			if p, isPod := ev.Object.(*corev1.Pod); isPod && ev.Type == watch.Added && p.Status.Phase != corev1.PodSucceeded {
				work <- p.DeepCopy()
			}
		}
	}
}
