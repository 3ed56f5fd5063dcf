package validation

import (
	"strings"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestPodDisruptionBudgetValidation(t *testing.T) {
	one, neg, bad := intstr.FromInt32(1), intstr.FromInt32(-1), intstr.FromString("half")
	pdb := func(min, max *intstr.IntOrString) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: min, MaxUnavailable: max, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}}
	}
	if errs := PodDisruptionBudget(pdb(&one, nil)); len(errs) > 0 {
		t.Fatalf("valid: %v", errs)
	}
	for _, tc := range []struct {
		p    *policyv1.PodDisruptionBudget
		want string
	}{
		{pdb(&one, &one), "minAvailable and maxUnavailable cannot be both set"},
		{pdb(&neg, nil), "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"},
		{pdb(nil, &bad), "spec.maxUnavailable: Invalid value: \"half\": a valid percent string"},
	} {
		if errs := PodDisruptionBudget(tc.p); !strings.Contains(errs.ToAggregate().Error(), tc.want) {
			t.Errorf("%v, want %q", errs, tc.want)
		}
	}
}
