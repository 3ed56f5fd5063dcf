package statefulset

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/controlplane/controllers/podutil"
)

// status counts the set's pods as upstream: replicas are the pods that exist, ready ones are
// Running and Ready, available ones ready for minReadySeconds; current and updated ones are
// those (not being deleted) at the current and update revisions.
func status(set *appsv1.StatefulSet, slots []slot, condemned []*corev1.Pod, rev Revisions, now time.Time) appsv1.StatefulSetStatus {
	cc := rev.CollisionCount
	st := appsv1.StatefulSetStatus{
		ObservedGeneration: set.Generation,
		CurrentRevision:    rev.Current,
		UpdateRevision:     rev.Update,
		CollisionCount:     &cc,
		Conditions:         set.Status.Conditions,
	}
	count := func(p *corev1.Pod) {
		st.Replicas++
		if runningAndReady(p) {
			st.ReadyReplicas++
			if podutil.IsAvailable(p, set.Spec.MinReadySeconds, now) {
				st.AvailableReplicas++
			}
		}
		if !terminating(p) {
			if revisionOf(p) == rev.Current {
				st.CurrentReplicas++
			}
			if revisionOf(p) == rev.Update {
				st.UpdatedReplicas++
			}
		}
	}
	for _, s := range slots {
		if s.pod != nil {
			count(s.pod)
		}
	}
	for _, p := range condemned {
		count(p)
	}
	return st
}

// completeUpdate ends a rollout: once every replica exists, is ready and runs the update
// revision, that revision becomes the current one.
func completeUpdate(set *appsv1.StatefulSet, st *appsv1.StatefulSetStatus) {
	n := int32(replicasOf(set))
	if st.UpdatedReplicas == n && st.ReadyReplicas == n && st.Replicas == n {
		st.CurrentReplicas = st.UpdatedReplicas
		st.CurrentRevision = st.UpdateRevision
	}
}

// nextAvailable is how long until the first ready pod that is not yet available becomes
// so (0 if none is waiting), so the sync that counts it, and lets an ordered rollout move
// on, is not left to chance.
func nextAvailable(pods []*corev1.Pod, minReady int32, now time.Time) time.Duration {
	if minReady <= 0 {
		return 0
	}
	var next time.Duration
	for _, p := range pods {
		if !podutil.IsReady(p) || podutil.IsAvailable(p, minReady, now) || terminating(p) {
			continue
		}
		d := time.Duration(minReady) * time.Second
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && !c.LastTransitionTime.IsZero() {
				d = c.LastTransitionTime.Add(time.Duration(minReady) * time.Second).Sub(now)
			}
		}
		if d <= 0 {
			d = time.Second
		}
		if next == 0 || d < next {
			next = d
		}
	}
	return next
}
