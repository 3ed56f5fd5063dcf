package lab

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// startCronJob creates a CronJob that fires every minute; checkCronJob, called later in the
// test (a minute boundary has passed by then), waits for its first Job to complete.
func (l *lab) startCronJob() {
	l.kubectl("create", "cronjob", "tick", "--image=localhost/skiff/netutil:1", "--schedule=* * * * *", "--", "netutil", "env", "HOSTNAME")
}

func (l *lab) checkCronJob() {
	t := l.t
	framework.Eventually(t, 90*time.Second, "the CronJob's first Job complete", func() (bool, string) {
		jobs, err := l.client.BatchV1().Jobs("default").List(l.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, j := range jobs.Items {
			ref := metav1.GetControllerOf(&j)
			if ref != nil && ref.Kind == "CronJob" && ref.Name == "tick" && regexp.MustCompile(`^tick-\d+$`).MatchString(j.Name) && jobComplete(&j) {
				return true, ""
			}
		}
		return false, l.kubectl("get", "cronjobs,jobs")
	})
	cj, err := l.client.BatchV1().CronJobs("default").Get(l.ctx, "tick", metav1.GetOptions{})
	if err != nil || cj.Status.LastScheduleTime == nil {
		t.Errorf("CronJob status %+v, %v: want lastScheduleTime", cj.Status, err)
	}
	if out := l.kubectl("get", "cronjob", "tick"); !regexp.MustCompile(`tick\s+\* \* \* \* \*\s+<none>\s+False\s+\d+\s+\S+\s+\S+`).MatchString(out) {
		t.Errorf("kubectl get cronjob:\n%s", out)
	}
	l.kubectl("delete", "cronjob", "tick")
}

func jobComplete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobs runs, with the real kubectl, a Job made by `kubectl create job`, an Indexed Job whose
// pods each print their completion index and hostname, and a Job that fails: it ends
// Failed for its backoff limit, its pods' finalizers all released.
func (l *lab) jobs() {
	t := l.t
	l.kubectl("create", "job", "hello", "--image=localhost/skiff/netutil:1", "--", "netutil", "env", "HOSTNAME")
	l.apply(`apiVersion: batch/v1
kind: Job
metadata: {name: indexed}
spec:
  completions: 3
  parallelism: 2
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: localhost/skiff/netutil:1
        command: ["netutil", "env", "JOB_COMPLETION_INDEX", "HOSTNAME"]
---
apiVersion: batch/v1
kind: Job
metadata: {name: fails}
spec:
  backoffLimit: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: localhost/skiff/netutil:1
        command: ["netutil", "cat", "/no/such/file"]
`)
	for _, name := range []string{"hello", "indexed"} {
		framework.Eventually(t, 90*time.Second, "job "+name+" complete", func() (bool, string) {
			j, err := l.client.BatchV1().Jobs("default").Get(l.ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return jobComplete(j), l.kubectl("get", "job", name, "-o", "wide")
		})
	}
	j, _ := l.client.BatchV1().Jobs("default").Get(l.ctx, "indexed", metav1.GetOptions{})
	if j.Status.Succeeded != 3 || j.Status.CompletedIndexes != "0-2" || j.Status.CompletionTime == nil {
		t.Errorf("indexed job status %+v", j.Status)
	}
	if out := l.kubectl("get", "job", "indexed"); !regexp.MustCompile(`indexed\s+Complete\s+3/3\s`).MatchString(out) {
		t.Errorf("kubectl get job:\n%s", out)
	}
	// Each pod printed its own index and the hostname <job>-<index>.
	out := l.kubectl("logs", "-l", "batch.kubernetes.io/job-name=indexed", "--prefix")
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if i := strings.Index(line, "] "); i > 0 {
			lines = append(lines, line[i+2:])
		}
	}
	sort.Strings(lines)
	if strings.Join(lines, " ") != "0 1 2 indexed-0 indexed-1 indexed-2" {
		t.Errorf("indexed pods printed %q, want each index and hostname:\n%s", lines, out)
	}

	framework.Eventually(t, 90*time.Second, "job fails Failed (backoff limit)", func() (bool, string) {
		j, err := l.client.BatchV1().Jobs("default").Get(l.ctx, "fails", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				return c.Reason == "BackoffLimitExceeded", c.Reason
			}
		}
		return false, l.kubectl("get", "job,pods")
	})
	j, _ = l.client.BatchV1().Jobs("default").Get(l.ctx, "fails", metav1.GetOptions{})
	if j.Status.Failed != 2 {
		t.Errorf("failed job counted %d failures, want 2 (backoffLimit 1)", j.Status.Failed)
	}
	// These three jobs only: the CronJob's may have a job running (its pods keep the
	// tracking finalizer until they are counted).
	pods, err := l.client.CoreV1().Pods("default").List(l.ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name in (hello,indexed,fails)"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if len(p.Finalizers) > 0 {
			t.Errorf("pod %s of a finished job keeps %v", p.Name, p.Finalizers)
		}
	}
	l.kubectl("delete", "job", "hello", "indexed", "fails")
}

// drain evicts a Deployment's pods from their node with the real `kubectl drain`: refused
// while a PodDisruptionBudget allows no disruption, done once it allows one, the
// evicted pods recreated on the other worker; the node is uncordoned after.
func (l *lab) drain() {
	t := l.t
	l.kubectl("create", "deployment", "drained", "--image=localhost/skiff/netutil:1", "--replicas=2")
	l.kubectl("create", "poddisruptionbudget", "drained", "--selector=app=drained", "--min-available=2")
	var node string
	framework.Eventually(t, 90*time.Second, "the budget sees two healthy pods", func() (bool, string) {
		pdb, err := l.client.PolicyV1().PodDisruptionBudgets("default").Get(l.ctx, "drained", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pods, _ := l.client.CoreV1().Pods("default").List(l.ctx, metav1.ListOptions{LabelSelector: "app=drained"})
		if len(pods.Items) > 0 {
			node = pods.Items[0].Spec.NodeName
		}
		return pdb.Status.CurrentHealthy == 2 && pdb.Status.DesiredHealthy == 2 && pdb.Status.DisruptionsAllowed == 0 &&
			pdb.Status.ObservedGeneration == pdb.Generation, fmt.Sprintf("%+v", pdb.Status)
	})
	if out := l.kubectl("get", "pdb", "drained"); !regexp.MustCompile(`drained\s+2\s+N/A\s+0\s`).MatchString(out) {
		t.Errorf("kubectl get pdb:\n%s", out)
	}
	defer l.kubectl("uncordon", node)
	out, err := l.kubectlErr("drain", node, "--pod-selector=app=drained", "--timeout=12s")
	if err == nil || !strings.Contains(out, "Cannot evict pod as it would violate the pod's disruption budget") {
		t.Fatalf("kubectl drain with a budget that allows nothing: %v\n%s", err, out)
	}
	l.kubectl("patch", "pdb", "drained", "--type=merge", "-p", `{"spec":{"minAvailable":1}}`)
	if out, err := l.kubectlErr("drain", node, "--pod-selector=app=drained", "--timeout=90s"); err != nil {
		t.Fatalf("kubectl drain with a budget of one: %v\n%s", err, out)
	}
	framework.Eventually(t, 60*time.Second, "both replicas running off the drained node", func() (bool, string) {
		pods, _ := l.client.CoreV1().Pods("default").List(l.ctx, metav1.ListOptions{LabelSelector: "app=drained"})
		running := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
				return false, "a pod is still on " + node
			}
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		return running == 2, fmt.Sprint(running, " running")
	})
	l.kubectl("delete", "deployment", "drained")
	l.kubectl("delete", "pdb", "drained")
}
