// Package podutil holds the small pod predicates the controllers share: readiness,
// availability, activity, ownership, and upstream's order for choosing pods to delete.
package podutil

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// IsReady reports the pod's Ready condition.
func IsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readySince returns when the pod became ready.
func readySince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// IsAvailable reports whether the pod has been ready for at least minReadySeconds.
func IsAvailable(p *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	if !IsReady(p) {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	since := readySince(p)
	return !since.IsZero() && since.Add(time.Duration(minReadySeconds)*time.Second).Before(now)
}

// IsActive is true for pods that count towards a workload's replicas: not finished and not
// being deleted.
func IsActive(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// IsControlledBy reports whether uid is the pod's controller.
func IsControlledBy(o metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOf(o)
	return ref != nil && ref.UID == uid
}

// SortForDeletion orders pods the way upstream picks victims first: unassigned before
// assigned, pending before unknown before running, not ready before ready, recently ready
// before long ready, more restarts first, newer before older.
func SortForDeletion(pods []*corev1.Pod) {
	phase := map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}
	restarts := func(p *corev1.Pod) int32 {
		var n int32
		for _, cs := range p.Status.ContainerStatuses {
			n = max(n, cs.RestartCount)
		}
		return n
	}
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
			return a.Spec.NodeName == ""
		}
		if phase[a.Status.Phase] != phase[b.Status.Phase] {
			return phase[a.Status.Phase] < phase[b.Status.Phase]
		}
		if IsReady(a) != IsReady(b) {
			return !IsReady(a)
		}
		if ra, rb := readySince(a), readySince(b); IsReady(a) && !ra.Equal(rb) {
			return ra.After(rb)
		}
		if restarts(a) != restarts(b) {
			return restarts(a) > restarts(b)
		}
		return a.CreationTimestamp.After(b.CreationTimestamp.Time)
	})
}
