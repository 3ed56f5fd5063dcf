package statefulset

import (
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/controlplane/controllers/podutil"
)

// Revisions are the set's revisions this sync works with.
type Revisions struct {
	// Current is the revision pods below the partition stay at (status.currentRevision).
	Current string
	// Update is the revision of the set's template, the one pods are rolled to.
	Update string
	// CollisionCount is the hash collision count to record in the status.
	CollisionCount int32
}

// Creation is a pod to create: its ordinal and the revision it runs.
type Creation struct {
	Ordinal  int
	Revision string
}

// Plan is what one sync of a StatefulSet does, decided without I/O. The controller carries
// it out in this order: Claims, Relabel, Delete, Create.
type Plan struct {
	// Create are the pods to create (each after its PVCs).
	Create []Creation
	// Delete are pods to delete: finished ones (to be recreated), condemned ones (scale
	// down) and ones at an old revision (rolling update).
	Delete []*corev1.Pod
	// Relabel are pods whose identity labels are missing or wrong.
	Relabel []*corev1.Pod
	// Claims are pods whose PVCs to bring in line: the missing ones of a pending pod created,
	// and the owner references the retention policy asks for set.
	Claims []*corev1.Pod
	// Status is the set's status after this sync.
	Status appsv1.StatefulSetStatus
	// RequeueAfter, if positive, is when a ready pod becomes available (minReadySeconds).
	RequeueAfter time.Duration
}

// slot is one ordinal in range: its pod, or (pod == nil) a pod yet to create at revision.
type slot struct {
	ordinal  int
	pod      *corev1.Pod
	revision string
}

// withDefaults fills what the API server defaults, so that a set stored without them
// behaves as upstream's would.
func withDefaults(set *appsv1.StatefulSet) *appsv1.StatefulSet {
	s := set.DeepCopy()
	if s.Spec.Replicas == nil {
		s.Spec.Replicas = ptr.To[int32](1)
	}
	if s.Spec.RevisionHistoryLimit == nil {
		s.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
	if s.Spec.PodManagementPolicy == "" {
		s.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if s.Spec.UpdateStrategy.Type == "" {
		s.Spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
	}
	if s.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType {
		if s.Spec.UpdateStrategy.RollingUpdate == nil {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
		if s.Spec.UpdateStrategy.RollingUpdate.Partition == nil {
			s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](0)
		}
	}
	return s
}

func partition(set *appsv1.StatefulSet) int {
	if ru := set.Spec.UpdateStrategy.RollingUpdate; set.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && ru != nil {
		return int(ptr.Deref(ru.Partition, 0))
	}
	return 0
}

// maxUnavailable is the rolling update's budget: an absolute number or a percentage of the
// replicas rounded down, and never below 1.
func maxUnavailable(set *appsv1.StatefulSet) int {
	ru := set.Spec.UpdateStrategy.RollingUpdate
	if ru == nil {
		return 1
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(ru.MaxUnavailable, intstr.FromInt32(1)), replicasOf(set), false)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

func runningAndReady(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && podutil.IsReady(p)
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
}

func terminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

// Decide is the StatefulSet controller's core, upstream's semantics without its I/O: from
// the set, the pods it controls (members by name), the revisions, the ordinals whose PVCs
// still reference a previous pod (staleClaims) and the time, which pods to create, delete,
// relabel and whose claims to fix, and the status that results.
//
// Pods at ordinals [start, start+replicas) are replicas; pods at other ordinals are
// condemned. OrderedReady ("monotonic") makes one change per sync: replicas are created in
// ordinal order, each once its predecessors are Running, Ready and available; condemned pods
// go highest ordinal first, each once the others are healthy; a finished pod is deleted
// (and recreated the next sync). Parallel does every creation and deletion at once. Only then
// does the rolling update delete pods at another revision than the update revision, from the
// highest ordinal down to the partition, within maxUnavailable; OnDelete leaves that to
// the user, recreating deleted pods at the update revision.
func Decide(set *appsv1.StatefulSet, pods []*corev1.Pod, rev Revisions, staleClaims map[int]bool, now time.Time) Plan {
	set = withDefaults(set)
	minReady := set.Spec.MinReadySeconds
	start, n := startOrdinal(set), replicasOf(set)
	monotonic := set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
	onDelete := set.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType
	updateMin := partition(set)

	slots := make([]slot, n)
	for i := range slots {
		slots[i].ordinal = start + i
		// Below the partition, new pods keep the current revision.
		slots[i].revision = rev.Update
		if !onDelete && i < updateMin {
			slots[i].revision = rev.Current
		}
	}
	var condemned []*corev1.Pod
	for _, p := range pods {
		o := ordinalOf(p)
		switch {
		case o < 0 || !isMember(set, p):
		case inRange(set, o):
			slots[o-start].pod = p
		default:
			condemned = append(condemned, p)
		}
	}
	sort.SliceStable(condemned, func(i, j int) bool { return ordinalOf(condemned[i]) > ordinalOf(condemned[j]) })

	unavailable := func(p *corev1.Pod) bool {
		return p == nil || !podutil.IsAvailable(p, minReady, now) || terminating(p)
	}
	// The first unhealthy pod: of the replicas in order, else the lowest condemned one. A
	// condemned pod that is not it waits for it.
	var firstUnhealthy *corev1.Pod
	firstUnhealthyIsReplica := false
	for _, s := range slots {
		if unavailable(s.pod) {
			firstUnhealthyIsReplica = true
			break
		}
	}
	if !firstUnhealthyIsReplica {
		for i := len(condemned) - 1; i >= 0; i-- {
			if unavailable(condemned[i]) {
				firstUnhealthy = condemned[i]
				break
			}
		}
	}

	plan := Plan{}
	deleted := map[string]bool{}
	del := func(p *corev1.Pod) {
		if !deleted[p.Name] {
			deleted[p.Name] = true
			plan.Delete = append(plan.Delete, p)
		}
	}
	claimed := map[string]bool{}
	fixClaims := func(p *corev1.Pod) {
		if len(set.Spec.VolumeClaimTemplates) > 0 && !claimed[p.Name] {
			claimed[p.Name] = true
			plan.Claims = append(plan.Claims, p)
		}
	}
	rollDeleted := 0
	finish := func() Plan {
		plan.Status = status(set, slots, condemned, rev, now)
		plan.Status.CurrentReplicas -= int32(rollDeleted)
		completeUpdate(set, &plan.Status)
		plan.RequeueAfter = nextAvailable(pods, minReady, now)
		return plan
	}
	if set.DeletionTimestamp != nil {
		return finish()
	}

	// Replicas. In monotonic mode the first that cannot go on ends the sync.
	for _, s := range slots {
		p := s.pod
		if p == nil {
			if staleClaims[s.ordinal] {
				if monotonic {
					return finish()
				}
				continue
			}
			plan.Create = append(plan.Create, Creation{Ordinal: s.ordinal, Revision: s.revision})
			if monotonic {
				return finish()
			}
			continue
		}
		// Failed and Succeeded pods alike are replaced: a StatefulSet pod is meant to run.
		if terminal(p) {
			if !terminating(p) {
				del(p)
			}
			if monotonic {
				return finish()
			}
			continue
		}
		if p.Status.Phase == corev1.PodPending {
			fixClaims(p)
		}
		if monotonic && (terminating(p) || !runningAndReady(p) || !podutil.IsAvailable(p, minReady, now)) {
			return finish()
		}
		fixClaims(p)
		if !identityMatches(set, p) {
			plan.Relabel = append(plan.Relabel, p)
		}
	}

	// Condemned pods: their claims take the scale-down retention owner first, then they go,
	// highest ordinal first.
	for _, p := range condemned {
		fixClaims(p)
	}
	for _, p := range condemned {
		if terminating(p) {
			if monotonic {
				return finish()
			}
			continue
		}
		if monotonic && p != firstUnhealthy && (!runningAndReady(p) || !podutil.IsAvailable(p, minReady, now)) {
			return finish()
		}
		del(p)
		if monotonic {
			return finish()
		}
	}

	if onDelete {
		return finish()
	}
	roll(set, slots, rev.Update, unavailable, now, func(p *corev1.Pod) {
		del(p)
		rollDeleted++
	})
	return finish()
}

// roll is the rolling update, as upstream's with maxUnavailable: with fewer than
// maxUnavailable replicas unavailable, delete pods not at the update revision from the
// highest ordinal down to the partition until the budget is spent. Parallel first deletes
// the old pods that are unavailable anyway (they cost no budget: waiting on them could
// leave the update stuck), then spends the rest on available ones.
func roll(set *appsv1.StatefulSet, slots []slot, update string, unavailable func(*corev1.Pod) bool, now time.Time, del func(*corev1.Pod)) {
	budget, updateMin := maxUnavailable(set), partition(set)
	parallel := set.Spec.PodManagementPolicy == appsv1.ParallelPodManagement
	old := func(p *corev1.Pod) bool { return p != nil && revisionOf(p) != update }
	down, oldDown := 0, 0
	for _, s := range slots {
		if unavailable(s.pod) {
			down++
			if parallel && old(s.pod) && !terminating(s.pod) {
				oldDown++
			}
		}
	}
	if down >= budget && oldDown == 0 {
		return
	}
	if parallel {
		for i := len(slots) - 1; i >= updateMin; i-- {
			if p := slots[i].pod; old(p) && !podutil.IsAvailable(p, set.Spec.MinReadySeconds, now) && !terminating(p) {
				del(p)
			}
		}
		left := budget - down
		for i := len(slots) - 1; i >= updateMin && left > 0; i-- {
			if p := slots[i].pod; old(p) && !unavailable(p) {
				del(p)
				left--
			}
		}
		return
	}
	left := budget - down
	for i := len(slots) - 1; i >= updateMin && left > 0; i-- {
		if p := slots[i].pod; old(p) && !terminating(p) {
			del(p)
			left--
		}
	}
}
