// Package disruption keeps every PodDisruptionBudget's status, as upstream's disruption
// controller: how many of its pods are expected and healthy, how many must stay healthy,
// and so how many the eviction subresource may disrupt now. Compute is the decision,
// without I/O.
package disruption

import (
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-sh/skiff/controlplane/controllers/podutil"
)

// DeletionTimeout is how long an eviction's entry in disruptedPods counts the pod as
// disrupted without the pod being seen going away (upstream's 2 minutes).
const DeletionTimeout = 2 * time.Minute

// Compute is a budget's status from its pods (those its selector matches in its
// namespace) and, for maxUnavailable and percentages, expected: the pods its pods'
// controllers want (their replicas), or -1 if some pod has no controller that says.
// It returns the status and, when the budget cannot be computed, why.
func Compute(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod, expected int32, now time.Time) (policyv1.PodDisruptionBudgetStatus, string) {
	st := policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, Conditions: pdb.Status.Conditions}
	// Evictions not yet seen through: the pod still exists and is not being deleted.
	disrupted := map[string]metav1.Time{}
	byName := map[string]*corev1.Pod{}
	for _, p := range pods {
		byName[p.Name] = p
	}
	for name, at := range pdb.Status.DisruptedPods {
		p := byName[name]
		if p == nil || p.DeletionTimestamp != nil || now.Sub(at.Time) > DeletionTimeout {
			continue
		}
		disrupted[name] = at
	}
	if len(disrupted) > 0 {
		st.DisruptedPods = disrupted
	}
	var healthy int32
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if _, ok := disrupted[p.Name]; ok {
			continue
		}
		if podutil.IsReady(p) {
			healthy++
		}
	}
	st.CurrentHealthy = healthy
	problem := ""
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		if expected < 0 {
			problem = "found no controller for some pod: maxUnavailable needs the controllers' scale"
			break
		}
		n, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(expected), true)
		if err != nil {
			problem = err.Error()
			break
		}
		st.ExpectedPods = expected
		st.DesiredHealthy = max(0, expected-int32(n))
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int:
		st.ExpectedPods = int32(len(pods))
		st.DesiredHealthy = pdb.Spec.MinAvailable.IntVal
	case pdb.Spec.MinAvailable != nil:
		if expected < 0 {
			problem = "found no controller for some pod: a percentage needs the controllers' scale"
			break
		}
		n, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(expected), true)
		if err != nil {
			problem = err.Error()
			break
		}
		st.ExpectedPods = expected
		st.DesiredHealthy = int32(min(n, math.MaxInt32))
	default:
		// Neither set: as maxUnavailable 0 on the pods there are.
		st.ExpectedPods = int32(len(pods))
		st.DesiredHealthy = st.ExpectedPods
	}
	if problem == "" {
		st.DisruptionsAllowed = max(0, st.CurrentHealthy-st.DesiredHealthy)
	}
	cond := metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue, Reason: policyv1.SufficientPodsReason,
		ObservedGeneration: pdb.Generation}
	switch {
	case problem != "":
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, policyv1.SyncFailedReason, problem
	case st.DisruptionsAllowed == 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, policyv1.InsufficientPodsReason
	}
	st.Conditions = setCondition(st.Conditions, cond, now)
	return st, problem
}

func setCondition(conds []metav1.Condition, c metav1.Condition, now time.Time) []metav1.Condition {
	out := append([]metav1.Condition(nil), conds...)
	for i := range out {
		if out[i].Type != c.Type {
			continue
		}
		if out[i].Status != c.Status {
			c.LastTransitionTime = metav1.NewTime(now)
		} else {
			c.LastTransitionTime = out[i].LastTransitionTime
		}
		out[i] = c
		return out
	}
	c.LastTransitionTime = metav1.NewTime(now)
	return append(out, c)
}
