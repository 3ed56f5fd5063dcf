package deployment

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
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
