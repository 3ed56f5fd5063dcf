package job

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/skiff-sh/skiff/controlplane/scheme"
)

var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func newJob(mut ...func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "job-uid"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "i"}}}}}}
	for _, m := range mut {
		m(j)
	}
	scheme.DefaultJob(j)
	return j
}

func completionsParallelism(c, p int32) func(*batchv1.Job) {
	return func(j *batchv1.Job) { j.Spec.Completions, j.Spec.Parallelism = &c, &p }
}

func indexed(j *batchv1.Job) { j.Spec.CompletionMode = ptr(batchv1.IndexedCompletion) }

type podOpt func(*corev1.Pod)

func mkPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"), Finalizers: []string{Finalizer},
		CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func succeededPod(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }
func failedAt(t time.Time) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodFailed
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 1, FinishedAt: metav1.NewTime(t)}}}}
	}
}
func exitCode(code int32) podOpt {
	return func(p *corev1.Pod) { p.Status.ContainerStatuses[0].State.Terminated.ExitCode = code }
}
func noFinalizer(p *corev1.Pod) { p.Finalizers = nil }
func withIndex(i int) podOpt {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{CompletionIndex: fmt.Sprint(i)} }
}

func condTrue(st batchv1.JobStatus, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t && st.Conditions[i].Status == corev1.ConditionTrue {
			return &st.Conditions[i]
		}
	}
	return nil
}

func TestNewJobStartsParallelismPods(t *testing.T) {
	p := Decide(newJob(completionsParallelism(3, 2)), nil, now)
	if len(p.Create) != 2 || p.Create[0] != -1 {
		t.Fatalf("create %v, want two NonIndexed pods", p.Create)
	}
	if p.Status.StartTime == nil || !p.Status.StartTime.Time.Equal(now) || p.Status.Active != 2 {
		t.Errorf("status %+v, want started now with 2 active", p.Status)
	}
}

// TestTwoPhaseCount: a finished pod is first recorded in uncountedTerminatedPods (and its
// finalizer released), then counted once the finalizer is gone — never twice.
func TestTwoPhaseCount(t *testing.T) {
	j := newJob(completionsParallelism(3, 2))
	done := mkPod("a", succeededPod)
	p := Decide(j, []*corev1.Pod{done, mkPod("b")}, now)
	if len(p.Uncount) != 1 || p.Uncount[0] != done || p.Status.Succeeded != 0 ||
		len(p.Status.UncountedTerminatedPods.Succeeded) != 1 {
		t.Fatalf("phase 1: uncount %v, status %+v", p.Uncount, p.Status)
	}
	// Two pods are wanted (3 completions, 1 in hand, parallelism 2); b runs, so one more.
	if len(p.Create) != 1 {
		t.Errorf("create %v, want 1", p.Create)
	}
	// The same sync again, before the release landed: recorded, so only released.
	j.Status = p.Status
	p2 := Decide(j, []*corev1.Pod{done, mkPod("b")}, now)
	if len(p2.Uncount) != 0 || len(p2.Release) != 1 || p2.Status.Succeeded != 0 {
		t.Fatalf("repeat: uncount %v release %v succeeded %d", p2.Uncount, p2.Release, p2.Status.Succeeded)
	}
	// The finalizer is gone: counted.
	released := done.DeepCopy()
	released.Finalizers = nil
	p3 := Decide(j, []*corev1.Pod{released, mkPod("b")}, now)
	if p3.Status.Succeeded != 1 || len(p3.Status.UncountedTerminatedPods.Succeeded) != 0 {
		t.Fatalf("phase 2: %+v", p3.Status)
	}
	// And never again.
	j.Status = p3.Status
	if p4 := Decide(j, []*corev1.Pod{released, mkPod("b")}, now); p4.Status.Succeeded != 1 {
		t.Errorf("counted twice: %d", p4.Status.Succeeded)
	}
}

func TestCompletes(t *testing.T) {
	j := newJob(completionsParallelism(2, 2))
	j.Status.Succeeded = 1
	j.Status.StartTime = &metav1.Time{Time: now.Add(-time.Minute)}
	pods := []*corev1.Pod{mkPod("a", succeededPod, noFinalizer), mkPod("b", succeededPod)}
	p := Decide(j, pods, now)
	if condTrue(p.Status, batchv1.JobSuccessCriteriaMet) == nil || condTrue(p.Status, batchv1.JobComplete) != nil {
		t.Fatalf("with b uncounted: conditions %+v, want SuccessCriteriaMet only", p.Status.Conditions)
	}
	j.Status = p.Status
	pods[1].Finalizers = nil
	p = Decide(j, pods, now)
	if condTrue(p.Status, batchv1.JobComplete) == nil || p.Status.CompletionTime == nil || p.Status.Succeeded != 2 {
		t.Fatalf("counted: %+v", p.Status)
	}
	if len(p.Create)+len(p.Delete) != 0 {
		t.Errorf("a complete job creates %v, deletes %v", p.Create, p.Delete)
	}
}

func TestBackoffLimitFailsTheJob(t *testing.T) {
	j := newJob(func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr(int32(1)) })
	j.Status.StartTime = &metav1.Time{Time: now.Add(-time.Minute)}
	j.Status.Failed = 1
	pods := []*corev1.Pod{mkPod("a", failedAt(now.Add(-30*time.Second)), noFinalizer), mkPod("b", failedAt(now.Add(-time.Second)))}
	p := Decide(j, pods, now)
	c := condTrue(p.Status, batchv1.JobFailureTarget)
	if c == nil || c.Reason != "BackoffLimitExceeded" {
		t.Fatalf("conditions %+v, want FailureTarget BackoffLimitExceeded", p.Status.Conditions)
	}
	j.Status = p.Status
	pods[1].Finalizers = nil
	p = Decide(j, pods, now)
	if c := condTrue(p.Status, batchv1.JobFailed); c == nil || c.Reason != "BackoffLimitExceeded" || c.Message != "Job has reached the specified backoff limit" {
		t.Fatalf("conditions %+v, want Failed BackoffLimitExceeded", p.Status.Conditions)
	}
	if len(p.Create) != 0 {
		t.Errorf("a failed job creates %v", p.Create)
	}
}

func TestBackoffDelaysReplacement(t *testing.T) {
	for _, tc := range []struct {
		failed int32
		ago    time.Duration
		wait   time.Duration
	}{
		{1, 3 * time.Second, 7 * time.Second},
		{2, 3 * time.Second, 17 * time.Second},
		{3, 50 * time.Second, 0},
		{10, time.Minute, 5 * time.Minute},
	} {
		j := newJob(func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr(int32(100)) })
		j.Status.StartTime = &metav1.Time{Time: now.Add(-time.Hour)}
		j.Status.Failed = tc.failed
		p := Decide(j, []*corev1.Pod{mkPod("a", failedAt(now.Add(-tc.ago)), noFinalizer)}, now)
		if tc.wait == 0 {
			if len(p.Create) != 1 {
				t.Errorf("%d failures %v ago: create %v, want 1", tc.failed, tc.ago, p.Create)
			}
			continue
		}
		if len(p.Create) != 0 || p.RequeueAfter != tc.wait {
			t.Errorf("%d failures %v ago: create %v requeue %v, want none until %v", tc.failed, tc.ago, p.Create, p.RequeueAfter, tc.wait)
		}
	}
}

func TestActiveDeadline(t *testing.T) {
	j := newJob(func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptr(int64(10)) })
	j.Status.StartTime = &metav1.Time{Time: now.Add(-4 * time.Second)}
	running := mkPod("a")
	if p := Decide(j, []*corev1.Pod{running}, now); p.RequeueAfter != 6*time.Second || len(p.Delete) != 0 {
		t.Fatalf("before the deadline: requeue %v delete %v", p.RequeueAfter, p.Delete)
	}
	p := Decide(j, []*corev1.Pod{running}, now.Add(6*time.Second))
	if c := condTrue(p.Status, batchv1.JobFailureTarget); c == nil || c.Reason != "DeadlineExceeded" {
		t.Fatalf("conditions %+v", p.Status.Conditions)
	}
	if len(p.Delete) != 1 || p.Delete[0] != running {
		t.Errorf("delete %v, want the running pod", p.Delete)
	}
}

func TestSuspendAndResume(t *testing.T) {
	j := newJob(func(j *batchv1.Job) { j.Spec.Suspend = ptr(true) })
	j.Status.StartTime = &metav1.Time{Time: now.Add(-time.Minute)}
	p := Decide(j, []*corev1.Pod{mkPod("a")}, now)
	if condTrue(p.Status, batchv1.JobSuspended) == nil || len(p.Delete) != 1 || p.Status.StartTime != nil || len(p.Create) != 0 {
		t.Fatalf("suspended: %+v delete %v", p.Status, p.Delete)
	}
	j.Status = p.Status
	j.Spec.Suspend = ptr(false)
	p = Decide(j, nil, now.Add(time.Minute))
	if condTrue(p.Status, batchv1.JobSuspended) != nil || len(p.Create) != 1 || !p.Status.StartTime.Time.Equal(now.Add(time.Minute)) {
		t.Fatalf("resumed: %+v create %v", p.Status, p.Create)
	}
	if c := p.Status.Conditions[0]; c.Reason != "JobResumed" || c.Status != corev1.ConditionFalse {
		t.Errorf("resume condition %+v", c)
	}
}

func TestIndexed(t *testing.T) {
	j := newJob(completionsParallelism(4, 2), indexed)
	j.Status.StartTime = &metav1.Time{Time: now.Add(-time.Minute)}
	pods := []*corev1.Pod{mkPod("p0", withIndex(0), succeededPod), mkPod("p1", withIndex(1)), mkPod("p1b", withIndex(1))}
	p := Decide(j, pods, now)
	// Index 0 done (uncounted), 1 runs twice (one goes), so one new: the lowest free, 2.
	if len(p.Create) != 1 || p.Create[0] != 2 {
		t.Errorf("create %v, want [2]", p.Create)
	}
	if len(p.Delete) != 1 || p.Delete[0].Name != "p1b" && p.Delete[0].Name != "p1" {
		t.Errorf("delete %v, want one of index 1's two pods", p.Delete)
	}
	if p.Status.CompletedIndexes != "0" {
		t.Errorf("completedIndexes %q, want 0", p.Status.CompletedIndexes)
	}
	// All indexes done.
	j.Status = batchv1.JobStatus{StartTime: j.Status.StartTime, Succeeded: 4, CompletedIndexes: "0-3"}
	if p := Decide(j, nil, now); condTrue(p.Status, batchv1.JobComplete) == nil {
		t.Errorf("all indexes done: %+v", p.Status.Conditions)
	}
}

func TestWorkQueue(t *testing.T) {
	j := newJob(func(j *batchv1.Job) { j.Spec.Parallelism = ptr(int32(2)) })
	if j.Spec.Completions != nil {
		t.Fatal("defaulting set completions for a work queue")
	}
	j.Status.StartTime = &metav1.Time{Time: now.Add(-time.Minute)}
	j.Status.Succeeded = 1
	p := Decide(j, []*corev1.Pod{mkPod("a", succeededPod, noFinalizer), mkPod("b")}, now)
	if len(p.Create) != 0 || condTrue(p.Status, batchv1.JobComplete) != nil {
		t.Fatalf("one succeeded, one running: create %v, %+v", p.Create, p.Status.Conditions)
	}
	p = Decide(j, []*corev1.Pod{mkPod("a", succeededPod, noFinalizer), mkPod("b", succeededPod, noFinalizer)}, now)
	if condTrue(p.Status, batchv1.JobSuccessCriteriaMet) == nil {
		t.Errorf("all done: %+v", p.Status.Conditions)
	}
}

func TestPodFailurePolicy(t *testing.T) {
	policy := func(j *batchv1.Job) {
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
			{Action: batchv1.PodFailurePolicyActionIgnore, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}},
			{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{7}}},
		}}
	}
	j := newJob(policy)
	j.Status.StartTime = &metav1.Time{Time: now.Add(-time.Minute)}
	ignored := mkPod("a", failedAt(now.Add(-time.Minute)), exitCode(42))
	p := Decide(j, []*corev1.Pod{ignored}, now)
	if len(p.Release) != 1 || len(p.Uncount) != 0 || len(p.Status.UncountedTerminatedPods.Failed) != 0 {
		t.Fatalf("ignored failure: release %v uncount %v", p.Release, p.Uncount)
	}
	fatal := mkPod("b", failedAt(now.Add(-time.Minute)), exitCode(7))
	p = Decide(j, []*corev1.Pod{fatal}, now)
	if c := condTrue(p.Status, batchv1.JobFailureTarget); c == nil || c.Reason != "PodFailurePolicy" {
		t.Fatalf("FailJob rule: %+v", p.Status.Conditions)
	}
}

func TestFinishedJobOnlyReleases(t *testing.T) {
	j := newJob()
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	p := Decide(j, []*corev1.Pod{mkPod("a", succeededPod), mkPod("b")}, now)
	if len(p.Release) != 1 || len(p.Create)+len(p.Delete)+len(p.Uncount) != 0 {
		t.Errorf("finished job: %+v", p)
	}
}

func TestIndexesRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{nil, ""}, {[]int{0}, "0"}, {[]int{0, 1}, "0-1"}, {[]int{1, 3, 4, 5, 7}, "1,3-5,7"}, {[]int{9, 2, 3}, "2-3,9"},
	} {
		got := formatIndexes(sets.New(tc.in...))
		if got != tc.want {
			t.Errorf("format %v: %q, want %q", tc.in, got, tc.want)
		}
		if back := parseIndexes(got); !back.Equal(sets.New(tc.in...)) {
			t.Errorf("parse %q: %v", got, sets.List(back))
		}
	}
	if got := parseIndexes("x,3-,1"); !got.Equal(sets.New(1)) {
		t.Errorf("parse of garbage: %v", sets.List(got))
	}
}

func TestSuccessPolicy(t *testing.T) {
	three := int32(3)
	indexes := "0,2"
	for _, tc := range []struct {
		name      string
		rule      batchv1.SuccessPolicyRule
		completed string
		met       bool
	}{
		{"count of all indexes, met", batchv1.SuccessPolicyRule{SucceededCount: &three}, "0,2,4", true},
		{"count of all indexes, not yet", batchv1.SuccessPolicyRule{SucceededCount: &three}, "0,2", false},
		{"listed indexes, all done", batchv1.SuccessPolicyRule{SucceededIndexes: &indexes}, "0-2", true},
		{"listed indexes, one missing", batchv1.SuccessPolicyRule{SucceededIndexes: &indexes}, "0-1", false},
		{"count within listed indexes", batchv1.SuccessPolicyRule{SucceededIndexes: &indexes, SucceededCount: ptr(int32(1))}, "2,3", true},
		{"count within listed indexes, others do not count", batchv1.SuccessPolicyRule{SucceededIndexes: &indexes, SucceededCount: ptr(int32(1))}, "1,3", false},
	} {
		j := newJob(completionsParallelism(5, 5), indexed)
		j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{tc.rule}}
		j.Status.StartTime = &metav1.Time{Time: now.Add(-time.Minute)}
		j.Status.CompletedIndexes = tc.completed
		j.Status.Succeeded = int32(parseIndexes(tc.completed).Len())
		running := mkPod("r", withIndex(4))
		if tc.completed == "0,2,4" {
			running = mkPod("r", withIndex(1))
		}
		p := Decide(j, []*corev1.Pod{running}, now)
		c := condTrue(p.Status, batchv1.JobSuccessCriteriaMet)
		if got := c != nil; got != tc.met {
			t.Errorf("%s: met %v, want %v (%+v)", tc.name, got, tc.met, p.Status.Conditions)
			continue
		}
		if !tc.met {
			continue
		}
		if c.Reason != "SuccessPolicy" || c.Message != "Matched rules at index 0" {
			t.Errorf("%s: condition %+v", tc.name, c)
		}
		// The lingering pod is terminated; once it is gone the Job is Complete, same reason.
		if len(p.Delete) != 1 || condTrue(p.Status, batchv1.JobComplete) != nil {
			t.Errorf("%s: delete %v, complete before the pod went", tc.name, p.Delete)
		}
		j.Status = p.Status
		p = Decide(j, nil, now)
		if c := condTrue(p.Status, batchv1.JobComplete); c == nil || c.Reason != "SuccessPolicy" {
			t.Errorf("%s: after the pod went: %+v", tc.name, p.Status.Conditions)
		}
	}
}

// TestSucceededJobCannotFail: pods terminated after SuccessCriteriaMet count as failures,
// and must not turn the Job to Failed past its backoff limit.
func TestSucceededJobCannotFail(t *testing.T) {
	j := newJob(completionsParallelism(1, 3), func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr(int32(0)) })
	j.Status.StartTime = &metav1.Time{Time: now.Add(-time.Minute)}
	j.Status.Succeeded, j.Status.Failed = 1, 2
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached"}}
	p := Decide(j, nil, now)
	if condTrue(p.Status, batchv1.JobFailed) != nil || condTrue(p.Status, batchv1.JobComplete) == nil {
		t.Errorf("conditions %+v, want Complete", p.Status.Conditions)
	}
}

// simulate runs Decide to the end as the controller and a node would: created pods start,
// fail or succeed as outcome says for their index, finalizers go when the plan says so;
// time moves a minute per round so backoffs pass.
func simulate(t *testing.T, j *batchv1.Job, outcome func(index int) (succeed bool, exit int32)) (*batchv1.Job, map[string]*corev1.Pod) {
	t.Helper()
	pods := map[string]*corev1.Pod{}
	clock := now
	j.Status.StartTime = &metav1.Time{Time: clock}
	for round := 0; round < 100; round++ {
		var list []*corev1.Pod
		for _, p := range pods {
			list = append(list, p)
		}
		p := Decide(j, list, clock)
		j.Status = p.Status
		// The controller writes the status, then takes the finalizers off (see job.go).
		for _, pod := range append(p.Uncount, p.Release...) {
			pods[pod.Name].Finalizers = nil
		}
		for k, i := range p.Create {
			name := fmt.Sprintf("p%d-%d-%d", i, round, k)
			pod := NewPod(j, i)
			pod.Name, pod.UID = name, types.UID(name)
			if n, ok := p.IndexFailures[i]; ok {
				pod.Annotations[IndexFailureCount] = fmt.Sprint(n)
			}
			ok, code := outcome(i)
			if ok {
				pod.Status.Phase = corev1.PodSucceeded
			} else {
				failedAt(clock)(pod)
				exitCode(code)(pod)
			}
			pods[name] = pod
		}
		if finished(&j.Status) {
			return j, pods
		}
		clock = clock.Add(time.Minute)
	}
	t.Fatalf("the Job never finished: %+v", j.Status)
	return nil, nil
}

func TestBackoffLimitPerIndex(t *testing.T) {
	perIndex := func(limit int32) func(*batchv1.Job) {
		return func(j *batchv1.Job) { j.Spec.BackoffLimitPerIndex = &limit }
	}
	failOdd := func(i int) (bool, int32) { return i%2 == 0, 1 }

	// Upstream's conformance case: odd indexes fail twice each (one retry), even succeed.
	j, pods := simulate(t, newJob(completionsParallelism(4, 2), indexed, perIndex(1)), failOdd)
	st := j.Status
	if c := condTrue(st, batchv1.JobFailed); c == nil || c.Reason != "FailedIndexes" || c.Message != "Job has failed indexes" {
		t.Errorf("conditions %+v", st.Conditions)
	}
	if st.FailedIndexes == nil || *st.FailedIndexes != "1,3" || st.CompletedIndexes != "0,2" || st.Failed != 4 || st.Succeeded != 2 {
		t.Errorf("failedIndexes %v completed %q failed %d succeeded %d", st.FailedIndexes, st.CompletedIndexes, st.Failed, st.Succeeded)
	}
	retried := 0
	for _, p := range pods {
		if p.Annotations[IndexFailureCount] == "1" {
			retried++
		}
	}
	if retried != 2 {
		t.Errorf("%d pods carry failure count 1, want the retries of indexes 1 and 3", retried)
	}

	// maxFailedIndexes 0: the first failed index fails the Job, nothing else runs.
	j, pods = simulate(t, newJob(completionsParallelism(4, 1), indexed, perIndex(0), func(j *batchv1.Job) { j.Spec.MaxFailedIndexes = ptr(int32(0)) }),
		func(int) (bool, int32) { return false, 1 })
	st = j.Status
	if c := condTrue(st, batchv1.JobFailed); c == nil || c.Reason != "MaxFailedIndexesExceeded" {
		t.Errorf("conditions %+v", st.Conditions)
	}
	if *st.FailedIndexes != "0" || st.Failed != 1 || len(pods) != 1 {
		t.Errorf("failedIndexes %q failed %d, %d pods", *st.FailedIndexes, st.Failed, len(pods))
	}

	// FailIndex: a matching failure fails its index at once, despite retries left.
	failIndex := func(j *batchv1.Job) {
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailIndex,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{1}}}}}
	}
	j, _ = simulate(t, newJob(completionsParallelism(2, 2), indexed, perIndex(1), failIndex), failOdd)
	st = j.Status
	if *st.FailedIndexes != "1" || st.CompletedIndexes != "0" || st.Failed != 1 || st.Succeeded != 1 || condTrue(st, batchv1.JobFailed) == nil {
		t.Errorf("failedIndexes %q completed %q failed %d succeeded %d %+v", *st.FailedIndexes, st.CompletedIndexes, st.Failed, st.Succeeded, st.Conditions)
	}

	// An index retried within its limit backs off on its own failure, not the Job's.
	j = newJob(completionsParallelism(2, 2), indexed, perIndex(3))
	j.Status.StartTime = &metav1.Time{Time: now.Add(-time.Hour)}
	j.Status.Failed = 5
	j.Status.FailedIndexes = ptr("")
	recent := mkPod("p1", withIndex(1), failedAt(now.Add(-time.Second)), noFinalizer)
	p := Decide(j, []*corev1.Pod{recent}, now)
	if len(p.Create) != 1 || p.Create[0] != 0 || p.RequeueAfter <= 0 || p.RequeueAfter > 10*time.Second {
		t.Errorf("create %v requeue %v: index 0 now, index 1 after its 10 s backoff", p.Create, p.RequeueAfter)
	}
}

// A success policy that is met names the reason even when every index also completed.
func TestSuccessPolicyReasonWhenAllIndexesDone(t *testing.T) {
	two := int32(2)
	j := newJob(completionsParallelism(2, 2), indexed, func(j *batchv1.Job) {
		j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: &two}}}
	})
	j.Status = batchv1.JobStatus{StartTime: &metav1.Time{Time: now.Add(-time.Minute)}, Succeeded: 2, CompletedIndexes: "0,1"}
	p := Decide(j, nil, now)
	if c := condTrue(p.Status, batchv1.JobSuccessCriteriaMet); c == nil || c.Reason != "SuccessPolicy" {
		t.Errorf("SuccessCriteriaMet %+v, want reason SuccessPolicy", c)
	}
	if c := condTrue(p.Status, batchv1.JobComplete); c == nil || c.Reason != "SuccessPolicy" {
		t.Errorf("Complete %+v, want reason SuccessPolicy", c)
	}
}
