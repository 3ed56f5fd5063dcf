package job

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/skiff-sh/skiff/controlplane/controllers/podutil"
)

// Finalizer keeps a Job's finished pod until the controller has counted it, so that no
// success or failure is lost to a pod deleted (or garbage collected) before the count.
const Finalizer = "batch.kubernetes.io/job-tracking"

// CompletionIndex is the annotation (and label) with an Indexed Job pod's index.
const CompletionIndex = "batch.kubernetes.io/job-completion-index"

// IndexFailureCount is the annotation with how many pods of the index failed before this
// one, with backoffLimitPerIndex (upstream's name).
const IndexFailureCount = "batch.kubernetes.io/job-index-failure-count"

// Backoff before a failed pod is replaced: 10 s, doubled per failure, at most 6 min.
const (
	backoffBase = 10 * time.Second
	backoffMax  = 6 * time.Minute
)

// Plan is what one sync of a Job does, decided without I/O.
type Plan struct {
	// Create are the pods to create now: completion indexes for an Indexed Job, -1 each
	// for a NonIndexed one.
	Create []int
	// IndexFailures is, with backoffLimitPerIndex, how many pods of each index to create
	// failed before (the new pod's IndexFailureCount).
	IndexFailures map[int]int32
	// Delete are active pods to delete (suspended, failed or complete job; surplus).
	Delete []*corev1.Pod
	// Uncount are finished pods with the finalizer that this sync records in
	// status.uncountedTerminatedPods before their finalizers go.
	Uncount []*corev1.Pod
	// Release are pods whose finalizer can be removed: counted in status already (or not
	// to be counted: ignored by the pod failure policy).
	Release []*corev1.Pod
	// Status is the Job's status after this sync.
	Status batchv1.JobStatus
	// RequeueAfter, if positive, asks for another sync then (a backoff or a deadline).
	RequeueAfter time.Duration
	// Events are (type, reason, message) to record.
	Events [][3]string
}

// Decide is the Job controller's core: from the Job, the pods it controls and the time,
// what to create, delete and count, and the status that results. It follows upstream's
// Job semantics: completions and parallelism, Indexed completion, backoffLimit with
// exponential backoff, activeDeadlineSeconds, suspend, podFailurePolicy, finalizer-based
// tracking (a finished pod is counted through uncountedTerminatedPods, then released).
func Decide(j *batchv1.Job, pods []*corev1.Pod, now time.Time) Plan {
	st := *j.Status.DeepCopy()
	p := Plan{}
	if finished(&st) {
		// Only release what is left.
		for _, pod := range pods {
			if hasFinalizer(pod) && (isFinished(pod, j) || pod.DeletionTimestamp != nil) {
				p.Release = append(p.Release, pod)
			}
		}
		p.Status = st
		return p
	}
	nowT := metaTime(now)
	if st.UncountedTerminatedPods == nil {
		st.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	uncounted := sets.New(st.UncountedTerminatedPods.Succeeded...).Union(sets.New(st.UncountedTerminatedPods.Failed...))

	// 1. Fold the pods recorded as uncounted whose finalizers are gone into the counts: the
	// second half of the last sync's two-phase count.
	withFinalizer := sets.New[types.UID]()
	for _, pod := range pods {
		if hasFinalizer(pod) {
			withFinalizer.Insert(pod.UID)
		}
	}
	completed := parseIndexes(st.CompletedIndexes)
	perIndex := isIndexed(j) && j.Spec.BackoffLimitPerIndex != nil
	failedIdx := sets.New[int]()
	if perIndex && st.FailedIndexes != nil {
		failedIdx = parseIndexes(*st.FailedIndexes)
	}
	// With backoffLimitPerIndex, each index's failures so far and the last one's time.
	indexFailures, indexLastFailure := map[int]int32{}, map[int]time.Time{}
	if perIndex {
		for _, pod := range pods {
			if i, ok := index(pod); ok && pod.Status.Phase == corev1.PodFailed {
				if n := failureCount(pod) + 1; n > indexFailures[i] {
					indexFailures[i] = n
				}
				if t := finishTime(pod); t.After(indexLastFailure[i]) {
					indexLastFailure[i] = t
				}
			}
		}
	}
	byUID := map[types.UID]*corev1.Pod{}
	for _, pod := range pods {
		byUID[pod.UID] = pod
	}
	var keepS, keepF []types.UID
	for _, uid := range st.UncountedTerminatedPods.Succeeded {
		if withFinalizer.Has(uid) {
			keepS = append(keepS, uid)
			continue
		}
		st.Succeeded++
		if pod := byUID[uid]; pod != nil && isIndexed(j) {
			if i, ok := index(pod); ok {
				completed.Insert(i)
			}
		}
	}
	for _, uid := range st.UncountedTerminatedPods.Failed {
		if withFinalizer.Has(uid) {
			keepF = append(keepF, uid)
			continue
		}
		st.Failed++
	}
	st.UncountedTerminatedPods.Succeeded, st.UncountedTerminatedPods.Failed = keepS, keepF

	// 2. Classify the pods.
	var active []*corev1.Pod
	var terminating int32
	var ready int32
	var lastFailure time.Time
	failJob := ""
	for _, pod := range pods {
		switch {
		case isFinished(pod, j):
			// Every failed pod, counted or not, dates the backoff.
			if pod.Status.Phase != corev1.PodSucceeded {
				if t := finishTime(pod); t.After(lastFailure) {
					lastFailure = t
				}
			}
			if !hasFinalizer(pod) {
				continue // counted long ago (or never tracked)
			}
			if uncounted.Has(pod.UID) {
				p.Release = append(p.Release, pod)
				continue
			}
			if pod.Status.Phase == corev1.PodSucceeded {
				if isIndexed(j) {
					if i, ok := index(pod); !ok || i >= int(completions(j)) || completed.Has(i) {
						// A duplicate or out-of-range index: released, not counted.
						p.Release = append(p.Release, pod)
						continue
					}
				}
				st.UncountedTerminatedPods.Succeeded = append(st.UncountedTerminatedPods.Succeeded, pod.UID)
				p.Uncount = append(p.Uncount, pod)
				continue
			}
			action, rule := failurePolicyAction(j, pod)
			switch action {
			case batchv1.PodFailurePolicyActionIgnore:
				p.Release = append(p.Release, pod)
				continue
			case batchv1.PodFailurePolicyActionFailJob:
				failJob = fmt.Sprintf("Pod %s/%s has condition or exit code matching FailJob rule at index %d", pod.Namespace, pod.Name, rule)
			}
			if i, ok := index(pod); ok && perIndex &&
				(action == batchv1.PodFailurePolicyActionFailIndex || failureCount(pod)+1 > *j.Spec.BackoffLimitPerIndex) {
				// The index is out of retries (or the policy says so): it fails, counted with
				// the pod, in the same status write.
				failedIdx.Insert(i)
			}
			st.UncountedTerminatedPods.Failed = append(st.UncountedTerminatedPods.Failed, pod.UID)
			p.Uncount = append(p.Uncount, pod)
		case pod.DeletionTimestamp != nil:
			terminating++
		default:
			active = append(active, pod)
			if podutil.IsReady(pod) {
				ready++
			}
		}
	}
	succeeded := st.Succeeded + int32(len(st.UncountedTerminatedPods.Succeeded))
	failed := st.Failed + int32(len(st.UncountedTerminatedPods.Failed))
	if isIndexed(j) {
		for _, pod := range p.Uncount {
			if pod.Status.Phase == corev1.PodSucceeded {
				if i, ok := index(pod); ok {
					completed.Insert(i)
				}
			}
		}
	}

	// 3. Suspension.
	suspended := j.Spec.Suspend != nil && *j.Spec.Suspend
	if suspended {
		if !hasCondition(&st, batchv1.JobSuspended) {
			setCondition(&st, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended", now)
			p.Events = append(p.Events, [3]string{corev1.EventTypeNormal, "Suspended", "Job suspended"})
		}
		p.Delete = append(p.Delete, active...)
		st.StartTime = nil
		st.Active, st.Ready, st.Terminating = 0, ptr(int32(0)), ptr(terminating+int32(len(active)))
		finish(&p, &st, j, completed, failedIdx)
		return p
	}
	if hasCondition(&st, batchv1.JobSuspended) {
		setCondition(&st, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed", now)
		p.Events = append(p.Events, [3]string{corev1.EventTypeNormal, "Resumed", "Job resumed"})
	}
	if st.StartTime == nil {
		st.StartTime = &nowT
	}

	// 4. Failure: the pod failure policy, the backoff limit, the deadline.
	reason, message := "", ""
	switch {
	case hasCondition(&st, batchv1.JobSuccessCriteriaMet):
		// Decided: the pods terminated since (the lingering ones) cannot fail it.
	case hasCondition(&st, batchv1.JobFailureTarget):
		c := condition(&st, batchv1.JobFailureTarget)
		reason, message = c.Reason, c.Message
	case failJob != "":
		reason, message = "PodFailurePolicy", failJob
	case perIndex && j.Spec.MaxFailedIndexes != nil && int32(failedIdx.Len()) > *j.Spec.MaxFailedIndexes:
		reason, message = "MaxFailedIndexesExceeded", "Job has exceeded the specified maximal number of failed indexes"
	case j.Spec.BackoffLimit != nil && failed > *j.Spec.BackoffLimit:
		reason, message = "BackoffLimitExceeded", "Job has reached the specified backoff limit"
	case perIndex && failedIdx.Len() > 0 && completed.Union(failedIdx).Len() >= int(completions(j)):
		reason, message = "FailedIndexes", "Job has failed indexes"
	case j.Spec.ActiveDeadlineSeconds != nil && !now.Before(st.StartTime.Add(time.Duration(*j.Spec.ActiveDeadlineSeconds)*time.Second)):
		reason, message = "DeadlineExceeded", "Job was active longer than specified deadline"
	}
	if reason != "" {
		if !hasCondition(&st, batchv1.JobFailureTarget) {
			setCondition(&st, batchv1.JobFailureTarget, corev1.ConditionTrue, reason, message, now)
		}
		p.Delete = append(p.Delete, active...)
		terminating += int32(len(active))
		if terminating == 0 && len(st.UncountedTerminatedPods.Failed)+len(st.UncountedTerminatedPods.Succeeded) == 0 {
			setCondition(&st, batchv1.JobFailed, corev1.ConditionTrue, reason, message, now)
			p.Events = append(p.Events, [3]string{corev1.EventTypeWarning, reason, message})
		}
		st.Active, st.Ready, st.Terminating = 0, ptr(int32(0)), ptr(terminating)
		finish(&p, &st, j, completed, failedIdx)
		return p
	}

	// 5. Success.
	done := false
	if isIndexed(j) {
		done = completed.Len() >= int(completions(j))
	} else if j.Spec.Completions != nil {
		done = succeeded >= *j.Spec.Completions
	} else {
		// A work queue: done once a pod succeeded and none is left running.
		done = succeeded > 0 && len(active) == 0
	}
	successReason, successMessage := "CompletionsReached", "Reached expected number of succeeded pods"
	// A success policy that is met decides first, as upstream, even when every index is done.
	if rule, ok := successPolicyMet(j, completed); ok {
		done, successReason, successMessage = true, "SuccessPolicy", fmt.Sprintf("Matched rules at index %d", rule)
	}
	if done || hasCondition(&st, batchv1.JobSuccessCriteriaMet) {
		if c := condition(&st, batchv1.JobSuccessCriteriaMet); c == nil || c.Status != corev1.ConditionTrue {
			setCondition(&st, batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, successReason, successMessage, now)
		} else {
			successReason, successMessage = c.Reason, c.Message
		}
		p.Delete = append(p.Delete, active...)
		terminating += int32(len(active))
		if terminating == 0 && len(st.UncountedTerminatedPods.Failed)+len(st.UncountedTerminatedPods.Succeeded) == 0 {
			setCondition(&st, batchv1.JobComplete, corev1.ConditionTrue, successReason, successMessage, now)
			st.CompletionTime = &nowT
			p.Events = append(p.Events, [3]string{corev1.EventTypeNormal, "Completed", "Job completed"})
		}
		st.Active, st.Ready, st.Terminating = 0, ptr(int32(0)), ptr(terminating)
		finish(&p, &st, j, completed, failedIdx)
		return p
	}

	// 6. Pods to create or delete, after the backoff of the last failure.
	parallelism := int32(1)
	if j.Spec.Parallelism != nil {
		parallelism = *j.Spec.Parallelism
	}
	wait := time.Duration(0)
	if failed > 0 && !lastFailure.IsZero() && !perIndex {
		b := backoffBase << min(failed-1, 10)
		wait = min(b, backoffMax) - now.Sub(lastFailure)
	}
	if isIndexed(j) {
		running := map[int][]*corev1.Pod{}
		for _, pod := range active {
			i, ok := index(pod)
			if !ok || i >= int(completions(j)) || completed.Has(i) {
				p.Delete = append(p.Delete, pod)
				continue
			}
			running[i] = append(running[i], pod)
		}
		n := 0
		for i := range running {
			sort.Slice(running[i], func(a, b int) bool { return running[i][a].CreationTimestamp.Before(&running[i][b].CreationTimestamp) })
			p.Delete = append(p.Delete, running[i][1:]...) // one pod per index
			n++
		}
		for i := 0; i < int(completions(j)) && n < int(parallelism); i++ {
			if completed.Has(i) || failedIdx.Has(i) || running[i] != nil {
				continue
			}
			if perIndex {
				// Each index backs off on its own failures.
				if c := indexFailures[i]; c > 0 {
					if w := min(backoffBase<<min(c-1, 10), backoffMax) - now.Sub(indexLastFailure[i]); w > 0 {
						if p.RequeueAfter == 0 || w < p.RequeueAfter {
							p.RequeueAfter = w
						}
						continue
					}
					if p.IndexFailures == nil {
						p.IndexFailures = map[int]int32{}
					}
					p.IndexFailures[i] = c
				}
			} else if wait > 0 {
				break
			}
			p.Create = append(p.Create, i)
			n++
		}
		// Surplus beyond parallelism: the highest indexes go.
		if n > int(parallelism) && len(p.Create) == 0 {
			var idx []int
			for i := range running {
				idx = append(idx, i)
			}
			sort.Sort(sort.Reverse(sort.IntSlice(idx)))
			for _, i := range idx[:n-int(parallelism)] {
				p.Delete = append(p.Delete, running[i][0])
			}
		}
	} else {
		want := parallelism
		if j.Spec.Completions != nil {
			want = min(parallelism, *j.Spec.Completions-succeeded)
		} else if succeeded > 0 {
			want = 0 // a work queue creates no more once one succeeded
		}
		switch d := int(want) - len(active); {
		case d > 0 && wait <= 0:
			for i := 0; i < d; i++ {
				p.Create = append(p.Create, -1)
			}
		case d < 0:
			victims := append([]*corev1.Pod(nil), active...)
			podutil.SortForDeletion(victims)
			p.Delete = append(p.Delete, victims[:-d]...)
		}
	}
	if wait > 0 {
		p.RequeueAfter = wait
	}
	if j.Spec.ActiveDeadlineSeconds != nil {
		left := st.StartTime.Add(time.Duration(*j.Spec.ActiveDeadlineSeconds) * time.Second).Sub(now)
		if p.RequeueAfter == 0 || left < p.RequeueAfter {
			p.RequeueAfter = left
		}
	}
	st.Active = int32(len(active) - len(p.Delete) + len(p.Create))
	st.Ready = ptr(ready)
	st.Terminating = ptr(terminating + int32(len(p.Delete)))
	finish(&p, &st, j, completed, failedIdx)
	return p
}

// finish writes what every path shares into the status.
func finish(p *Plan, st *batchv1.JobStatus, j *batchv1.Job, completed, failedIdx sets.Set[int]) {
	if isIndexed(j) {
		st.CompletedIndexes = formatIndexes(completed)
	}
	if isIndexed(j) && j.Spec.BackoffLimitPerIndex != nil {
		st.FailedIndexes = ptr(formatIndexes(failedIdx))
	}
	if st.UncountedTerminatedPods != nil && len(st.UncountedTerminatedPods.Succeeded)+len(st.UncountedTerminatedPods.Failed) == 0 {
		st.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	p.Status = *st
}

// successPolicyMet reports the first successPolicy rule an Indexed Job's succeeded indexes
// satisfy: all of its succeededIndexes, or succeededCount of them (of all indexes when it
// has none).
func successPolicyMet(j *batchv1.Job, completed sets.Set[int]) (int, bool) {
	if j.Spec.SuccessPolicy == nil || !isIndexed(j) {
		return 0, false
	}
	for i, r := range j.Spec.SuccessPolicy.Rules {
		var n int
		if r.SucceededIndexes != nil {
			want := parseIndexes(*r.SucceededIndexes)
			n = want.Intersection(completed).Len()
			if r.SucceededCount == nil {
				if want.Len() > 0 && n == want.Len() {
					return i, true
				}
				continue
			}
		} else {
			n = completed.Len()
		}
		if r.SucceededCount != nil && n >= int(*r.SucceededCount) {
			return i, true
		}
	}
	return 0, false
}

func isIndexed(j *batchv1.Job) bool {
	return j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion
}

func completions(j *batchv1.Job) int32 {
	if j.Spec.Completions == nil {
		return 0
	}
	return *j.Spec.Completions
}

// isFinished: the pod ended, or (with podReplacementPolicy TerminatingOrFailed) it is being
// deleted before it succeeded, which upstream counts as a failure at once.
func isFinished(p *corev1.Pod, j *batchv1.Job) bool {
	switch p.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return true
	}
	replaceTerminating := j.Spec.PodReplacementPolicy == nil || *j.Spec.PodReplacementPolicy == batchv1.TerminatingOrFailed
	return replaceTerminating && j.Spec.PodFailurePolicy == nil && p.DeletionTimestamp != nil
}

func finishTime(p *corev1.Pod) time.Time {
	var t time.Time
	for _, cs := range p.Status.ContainerStatuses {
		if term := cs.State.Terminated; term != nil && term.FinishedAt.Time.After(t) {
			t = term.FinishedAt.Time
		}
	}
	if t.IsZero() && p.DeletionTimestamp != nil {
		t = p.DeletionTimestamp.Time
	}
	if t.IsZero() {
		t = p.CreationTimestamp.Time
	}
	return t
}

func hasFinalizer(p *corev1.Pod) bool {
	for _, f := range p.Finalizers {
		if f == Finalizer {
			return true
		}
	}
	return false
}

// failureCount is how many pods of the index failed before this one (its
// IndexFailureCount annotation).
func failureCount(p *corev1.Pod) int32 {
	n, err := strconv.Atoi(p.Annotations[IndexFailureCount])
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
}

// index is an Indexed Job pod's completion index, from its annotation.
func index(p *corev1.Pod) (int, bool) {
	v, ok := p.Annotations[CompletionIndex]
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(v)
	return i, err == nil && i >= 0
}

// failurePolicyAction is the action of the first podFailurePolicy rule a failed pod matches
// (Count when none does), and the rule's index.
func failurePolicyAction(j *batchv1.Job, p *corev1.Pod) (batchv1.PodFailurePolicyAction, int) {
	if j.Spec.PodFailurePolicy == nil || p.Status.Phase != corev1.PodFailed {
		return batchv1.PodFailurePolicyActionCount, -1
	}
	for i, r := range j.Spec.PodFailurePolicy.Rules {
		if e := r.OnExitCodes; e != nil {
			values := sets.New(e.Values...)
			for _, cs := range p.Status.ContainerStatuses {
				if e.ContainerName != nil && *e.ContainerName != cs.Name {
					continue
				}
				term := cs.State.Terminated
				if term == nil || term.ExitCode == 0 {
					continue
				}
				if values.Has(term.ExitCode) == (e.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn) {
					return r.Action, i
				}
			}
		}
		for _, pc := range r.OnPodConditions {
			for _, c := range p.Status.Conditions {
				if c.Type == pc.Type && c.Status == pc.Status {
					return r.Action, i
				}
			}
		}
	}
	return batchv1.PodFailurePolicyActionCount, -1
}

func finished(st *batchv1.JobStatus) bool {
	return hasCondition(st, batchv1.JobComplete) || hasCondition(st, batchv1.JobFailed)
}

func condition(st *batchv1.JobStatus, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// hasCondition reports a condition of type t with status True.
func hasCondition(st *batchv1.JobStatus, t batchv1.JobConditionType) bool {
	c := condition(st, t)
	return c != nil && c.Status == corev1.ConditionTrue
}

func setCondition(st *batchv1.JobStatus, t batchv1.JobConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) {
	ts := metaTime(now)
	if c := condition(st, t); c != nil {
		if c.Status != status {
			c.LastTransitionTime = ts
		}
		c.Status, c.Reason, c.Message, c.LastProbeTime = status, reason, message, ts
		return
	}
	st.Conditions = append(st.Conditions, batchv1.JobCondition{Type: t, Status: status, Reason: reason, Message: message,
		LastProbeTime: ts, LastTransitionTime: ts})
}

// parseIndexes reads completedIndexes ("1,3-5,7").
func parseIndexes(s string) sets.Set[int] {
	out := sets.New[int]()
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for i := a; i <= b && i-a < 1_000_000; i++ {
			out.Insert(i)
		}
	}
	return out
}

// formatIndexes writes a set of indexes as upstream does: sorted, runs of three or more as
// ranges ("1,3-5,7"), two adjacent ones as a range too ("1-2").
func formatIndexes(s sets.Set[int]) string {
	idx := sets.List(s)
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(idx[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", idx[i], idx[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

func ptr[T any](v T) *T { return &v }

func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t) }
