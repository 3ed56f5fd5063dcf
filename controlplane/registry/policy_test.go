package registry

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDecideEviction(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	readyPod := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "a"}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	budget := func(allowed int32) policyv1.PodDisruptionBudget {
		return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "b", Generation: 1},
			Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}},
			Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: allowed, CurrentHealthy: 2, DesiredHealthy: 2}}
	}
	other := budget(0)
	other.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}

	if v := DecideEviction(readyPod(), []policyv1.PodDisruptionBudget{other}, now); !v.Allow || v.Budget != nil {
		t.Errorf("no covering budget: %+v", v)
	}
	v := DecideEviction(readyPod(), []policyv1.PodDisruptionBudget{budget(1)}, now)
	if !v.Allow || v.Budget == nil || v.Budget.Status.DisruptionsAllowed != 0 || v.Budget.Status.DisruptedPods["p"].Time != now {
		t.Errorf("one disruption to spare: %+v", v)
	}
	v = DecideEviction(readyPod(), []policyv1.PodDisruptionBudget{budget(0)}, now)
	if v.Allow || !apierrors.IsTooManyRequests(v.Refusal) {
		t.Fatalf("none to spare: %+v", v)
	}
	st := v.Refusal.(apierrors.APIStatus).Status()
	if st.Message != "Cannot evict pod as it would violate the pod's disruption budget." || len(st.Details.Causes) != 1 ||
		st.Details.Causes[0].Type != policyv1.DisruptionBudgetCause || !strings.Contains(st.Details.Causes[0].Message, "needs 2 healthy pods and has 2 currently") {
		t.Errorf("refusal %+v", st)
	}
	stale := budget(1)
	stale.Generation = 2
	if v := DecideEviction(readyPod(), []policyv1.PodDisruptionBudget{stale}, now); v.Allow || !strings.Contains(v.Refusal.Error(), "Cannot evict") {
		t.Errorf("unobserved budget: %+v", v)
	}
	if v := DecideEviction(readyPod(), []policyv1.PodDisruptionBudget{budget(1), budget(1)}, now); v.Allow || !apierrors.IsInternalError(v.Refusal) {
		t.Errorf("two budgets: %+v", v)
	}
	// Pods that are not running go regardless of the budget.
	for _, ph := range []corev1.PodPhase{corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed} {
		p := readyPod()
		p.Status.Phase = ph
		if v := DecideEviction(p, []policyv1.PodDisruptionBudget{budget(0)}, now); !v.Allow || v.Budget != nil {
			t.Errorf("%s pod: %+v", ph, v)
		}
	}
	// An unready pod goes while the budget is met (IfHealthyBudget), or always (AlwaysAllow).
	unready := readyPod()
	unready.Status.Conditions[0].Status = corev1.ConditionFalse
	if v := DecideEviction(unready, []policyv1.PodDisruptionBudget{budget(0)}, now); !v.Allow {
		t.Errorf("unready pod, healthy budget: %+v", v)
	}
	unmet := budget(0)
	unmet.Status.CurrentHealthy = 1
	if v := DecideEviction(unready, []policyv1.PodDisruptionBudget{unmet}, now); v.Allow {
		t.Errorf("unready pod, unmet budget: allowed")
	}
	always := policyv1.AlwaysAllow
	unmet.Spec.UnhealthyPodEvictionPolicy = &always
	if v := DecideEviction(unready, []policyv1.PodDisruptionBudget{unmet}, now); !v.Allow {
		t.Errorf("unready pod, AlwaysAllow: refused")
	}
}
