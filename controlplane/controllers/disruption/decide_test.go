package disruption

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func pods(ready, unready int) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; i < ready+unready; i++ {
		st := corev1.ConditionTrue
		if i >= ready {
			st = corev1.ConditionFalse
		}
		out = append(out, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i)},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}})
	}
	return out
}

func TestCompute(t *testing.T) {
	i := func(v int) *intstr.IntOrString { x := intstr.FromInt32(int32(v)); return &x }
	pct := func(v string) *intstr.IntOrString { x := intstr.FromString(v); return &x }
	for _, tc := range []struct {
		name                      string
		min, maxU                 *intstr.IntOrString
		ready, unready            int
		expected                  int32
		wantExpected, wantDesired int32
		wantHealthy, wantAllowed  int32
		wantReason                string
	}{
		{"minAvailable 2 of 3 ready", i(2), nil, 3, 0, -1, 3, 2, 3, 1, policyv1.SufficientPodsReason},
		{"minAvailable 3 of 3 ready", i(3), nil, 3, 0, -1, 3, 3, 3, 0, policyv1.InsufficientPodsReason},
		{"minAvailable 2, one unready", i(2), nil, 2, 1, -1, 3, 2, 2, 0, policyv1.InsufficientPodsReason},
		{"maxUnavailable 1 of 3", nil, i(1), 3, 0, 3, 3, 2, 3, 1, policyv1.SufficientPodsReason},
		{"maxUnavailable 1, scale 5 but 3 pods", nil, i(1), 3, 0, 5, 5, 4, 3, 0, policyv1.InsufficientPodsReason},
		{"minAvailable 50% of 3 rounds up", pct("50%"), nil, 3, 0, 3, 3, 2, 3, 1, policyv1.SufficientPodsReason},
		{"maxUnavailable 50% of 3 rounds up", nil, pct("50%"), 3, 0, 3, 3, 1, 3, 2, policyv1.SufficientPodsReason},
		{"maxUnavailable without controllers", nil, i(1), 3, 0, -1, 0, 0, 3, 0, policyv1.SyncFailedReason},
	} {
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "b", Generation: 4}, Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: tc.min, MaxUnavailable: tc.maxU}}
		st, _ := Compute(pdb, pods(tc.ready, tc.unready), tc.expected, now)
		if st.ExpectedPods != tc.wantExpected || st.DesiredHealthy != tc.wantDesired || st.CurrentHealthy != tc.wantHealthy || st.DisruptionsAllowed != tc.wantAllowed {
			t.Errorf("%s: expected %d desired %d healthy %d allowed %d, want %d %d %d %d", tc.name,
				st.ExpectedPods, st.DesiredHealthy, st.CurrentHealthy, st.DisruptionsAllowed, tc.wantExpected, tc.wantDesired, tc.wantHealthy, tc.wantAllowed)
		}
		if len(st.Conditions) != 1 || st.Conditions[0].Reason != tc.wantReason || st.ObservedGeneration != 4 {
			t.Errorf("%s: conditions %+v observed %d", tc.name, st.Conditions, st.ObservedGeneration)
		}
	}
}

// TestDisruptedPodsAreNotHealthy: a pod evicted moments ago (in disruptedPods) is not
// counted healthy until it is gone, and the entry expires after DeletionTimeout.
func TestDisruptedPodsAreNotHealthy(t *testing.T) {
	two := intstr.FromInt32(2)
	pdb := &policyv1.PodDisruptionBudget{Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &two},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptedPods: map[string]metav1.Time{"p0": metav1.NewTime(now.Add(-time.Second)), "gone": metav1.NewTime(now)}}}
	st, _ := Compute(pdb, pods(3, 0), -1, now)
	if st.CurrentHealthy != 2 || st.DisruptionsAllowed != 0 || len(st.DisruptedPods) != 1 {
		t.Fatalf("healthy %d allowed %d disrupted %v", st.CurrentHealthy, st.DisruptionsAllowed, st.DisruptedPods)
	}
	st, _ = Compute(pdb, pods(3, 0), -1, now.Add(DeletionTimeout+2*time.Second))
	if st.CurrentHealthy != 3 || len(st.DisruptedPods) != 0 {
		t.Errorf("after the timeout: healthy %d disrupted %v", st.CurrentHealthy, st.DisruptedPods)
	}
}
