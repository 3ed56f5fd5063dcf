package deployment

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
)

// Annotations and labels upstream's deployment controller and kubectl share.
const (
	RevisionAnnotation        = "deployment.kubernetes.io/revision"
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	MaxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"
	ChangeCauseAnnotation     = "kubernetes.io/change-cause"
)

// TemplateHash is the pod-template-hash of a template: stable for equal templates, changed
// by collisionCount when two templates collide.
func TemplateHash(t *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	b, _ := json.Marshal(t)
	h.Write(b)
	if collisionCount != nil {
		h.Write([]byte(strconv.Itoa(int(*collisionCount))))
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// EqualIgnoreHash compares two templates without their pod-template-hash label.
func EqualIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	if len(a.Labels) == 0 {
		a.Labels = nil
	}
	if len(b.Labels) == 0 {
		b.Labels = nil
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

// Revision reads a ReplicaSet's revision annotation (0 if none).
func Revision(rs *appsv1.ReplicaSet) int64 {
	n, _ := strconv.ParseInt(rs.Annotations[RevisionAnnotation], 10, 64)
	return n
}

// ResolveFenceposts turns maxSurge (rounded up) and maxUnavailable (rounded down) into
// counts for the desired replicas; both zero would deadlock, so unavailable becomes 1.
func ResolveFenceposts(d *appsv1.Deployment) (surge, unavailable int32) {
	replicas := replicasOf(d)
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || d.Spec.Strategy.RollingUpdate == nil {
		return 0, 0
	}
	ru := d.Spec.Strategy.RollingUpdate
	s, _ := intstr.GetScaledValueFromIntOrPercent(intstrOr(ru.MaxSurge, "25%"), int(replicas), true)
	u, _ := intstr.GetScaledValueFromIntOrPercent(intstrOr(ru.MaxUnavailable, "25%"), int(replicas), false)
	surge, unavailable = int32(s), int32(u)
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	if unavailable > replicas {
		unavailable = replicas
	}
	return surge, unavailable
}

func intstrOr(v *intstr.IntOrString, def string) *intstr.IntOrString {
	if v == nil {
		x := intstr.FromString(def)
		return &x
	}
	return v
}

func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func rsReplicas(rs *appsv1.ReplicaSet) int32 {
	if rs == nil || rs.Spec.Replicas == nil {
		return 0
	}
	return *rs.Spec.Replicas
}

// sortOldestFirst orders ReplicaSets by creation time, then name.
func sortOldestFirst(list []*appsv1.ReplicaSet) {
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

// Plan is the rolling-update decision for one sync: the replica count each ReplicaSet should
// have. It is computed without I/O from the deployment and its ReplicaSets' current state.
type Plan map[string]int32

// PlanRollingUpdate applies upstream's rolling-update rules: scale the new ReplicaSet up
// within maxSurge, then scale old ones down (unhealthy replicas first) while keeping
// replicas-maxUnavailable available.
func PlanRollingUpdate(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) Plan {
	plan := Plan{}
	want := replicasOf(d)
	surge, unavailable := ResolveFenceposts(d)
	total := rsReplicas(newRS)
	for _, rs := range old {
		total += rsReplicas(rs)
	}
	// Scale up the new ReplicaSet.
	newReplicas := rsReplicas(newRS)
	if newReplicas < want {
		if room := want + surge - total; room > 0 {
			newReplicas += min(room, want-newReplicas)
		}
	} else if newReplicas > want {
		newReplicas = want
	}
	plan[newRS.Name] = newReplicas
	total += newReplicas - rsReplicas(newRS)

	// Scale down old ReplicaSets.
	olds := append([]*appsv1.ReplicaSet(nil), old...)
	sortOldestFirst(olds)
	minAvailable := want - unavailable
	newUnavailable := newReplicas - newRS.Status.AvailableReplicas
	if newUnavailable < 0 {
		newUnavailable = 0
	}
	maxScaledDown := total - minAvailable - newUnavailable
	cur := map[string]int32{}
	for _, rs := range olds {
		cur[rs.Name] = rsReplicas(rs)
	}
	if maxScaledDown > 0 {
		// First the replicas that are not available anyway.
		for _, rs := range olds {
			if maxScaledDown <= 0 {
				break
			}
			unhealthy := cur[rs.Name] - rs.Status.AvailableReplicas
			if unhealthy <= 0 {
				continue
			}
			n := min(unhealthy, maxScaledDown)
			cur[rs.Name] -= n
			maxScaledDown -= n
			total -= n
		}
		// Then available ones, as far as availability allows.
		available := newRS.Status.AvailableReplicas
		for _, rs := range olds {
			available += min(rs.Status.AvailableReplicas, cur[rs.Name])
		}
		budget := min(available-minAvailable, maxScaledDown)
		for _, rs := range olds {
			if budget <= 0 {
				break
			}
			n := min(cur[rs.Name], budget)
			cur[rs.Name] -= n
			budget -= n
		}
	}
	for name, n := range cur {
		plan[name] = n
	}
	return plan
}

// replicaAnnotations are the desired- and max-replicas annotations of a ReplicaSet sized for
// d: its replicas, and its replicas plus maxSurge.
func replicaAnnotations(d *appsv1.Deployment) (desired, maxReplicas string) {
	surge, _ := ResolveFenceposts(d)
	return strconv.Itoa(int(replicasOf(d))), strconv.Itoa(int(replicasOf(d) + surge))
}

// IsScalingEvent tells whether d was resized since its active ReplicaSets were last sized for
// it: one of them carries a desired-replicas annotation other than d's replicas. Upstream
// resizes proportionally then (PlanScale) instead of taking a rollout step.
func IsScalingEvent(d *appsv1.Deployment, all []*appsv1.ReplicaSet) bool {
	want, _ := replicaAnnotations(d)
	for _, rs := range all {
		if rsReplicas(rs) == 0 {
			continue
		}
		if desired, ok := rs.Annotations[DesiredReplicasAnnotation]; ok && desired != want {
			return true
		}
	}
	return false
}

// PlanScale is upstream's resize of a Deployment (pkg/controller/deployment/sync.go, scale):
// one active ReplicaSet (or, with none, the newest) takes every replica; a saturated new one
// leaves the old ones none; otherwise, in a rolling update, the replicas added or removed are
// shared among the active ReplicaSets in proportion to their size, measured against the
// deployment's size (plus maxSurge) each was last given (its max-replicas annotation). newRS
// is the ReplicaSet of d's current template. ReplicaSets the plan leaves out keep their size.
func PlanScale(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) Plan {
	plan := Plan{}
	want := replicasOf(d)
	var active []*appsv1.ReplicaSet
	for _, rs := range append(append([]*appsv1.ReplicaSet(nil), old...), newRS) {
		if rsReplicas(rs) > 0 {
			active = append(active, rs)
		}
	}
	switch len(active) {
	case 0:
		plan[newRS.Name] = want
		return plan
	case 1:
		plan[active[0].Name] = want
		return plan
	}
	desired, _ := replicaAnnotations(d)
	if rsReplicas(newRS) == want && newRS.Annotations[DesiredReplicasAnnotation] == desired && newRS.Status.AvailableReplicas == want {
		for _, rs := range active {
			if rs != newRS {
				plan[rs.Name] = 0
			}
		}
		return plan
	}
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return plan
	}
	surge, _ := ResolveFenceposts(d)
	allowed := int32(0)
	if want > 0 {
		allowed = want + surge
	}
	total := int32(0)
	for _, rs := range active {
		total += rsReplicas(rs)
	}
	toAdd := allowed - total
	// Larger ReplicaSets first; among equals, newer first when growing and older first when
	// shrinking, so the leftover of rounding goes where upstream puts it.
	sort.SliceStable(active, func(i, j int) bool {
		a, b := active[i], active[j]
		if rsReplicas(a) != rsReplicas(b) {
			return rsReplicas(a) > rsReplicas(b)
		}
		older := a.CreationTimestamp.Before(&b.CreationTimestamp) ||
			(a.CreationTimestamp.Equal(&b.CreationTimestamp) && a.Name < b.Name)
		if toAdd > 0 {
			return !older
		}
		return older
	})
	added := int32(0)
	for _, rs := range active {
		plan[rs.Name] = rsReplicas(rs)
		if toAdd == 0 {
			continue
		}
		p := proportion(d, rs, allowed, toAdd, added)
		plan[rs.Name] += p
		added += p
	}
	if toAdd != 0 {
		// What rounding left goes to (or comes from) the largest.
		first := active[0].Name
		plan[first] = max(plan[first]+toAdd-added, 0)
	}
	return plan
}

// proportion is rs's share of toAdd replicas when its deployment grows (or shrinks) to
// allowed (replicas + maxSurge), never more than what is left to add (or remove).
func proportion(d *appsv1.Deployment, rs *appsv1.ReplicaSet, allowed, toAdd, added int32) int32 {
	size := rsReplicas(rs)
	if size == 0 || toAdd == added {
		return 0
	}
	var fraction int32
	if replicasOf(d) == 0 {
		fraction = -size
	} else {
		before, err := strconv.Atoi(rs.Annotations[MaxReplicasAnnotation])
		if err != nil || before <= 0 {
			// The annotation was tampered with: measure against the pods the deployment has.
			before = int(d.Status.Replicas)
		}
		if before <= 0 {
			return 0
		}
		fraction = int32(math.Floor(float64(size)*float64(allowed)/float64(before)+0.5)) - size
	}
	left := toAdd - added
	if toAdd > 0 {
		return min(fraction, left)
	}
	return max(fraction, left)
}
