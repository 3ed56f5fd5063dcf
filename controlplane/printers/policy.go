package printers

import (
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PodDisruptionBudgets prints NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE.
var PodDisruptionBudgets = New(func(o runtime.Object) []any {
	pdb := o.(*policyv1.PodDisruptionBudget)
	min, max := "N/A", "N/A"
	if v := pdb.Spec.MinAvailable; v != nil {
		min = v.String()
	}
	if v := pdb.Spec.MaxUnavailable; v != nil {
		max = v.String()
	}
	return []any{min, max, int64(pdb.Status.DisruptionsAllowed), Age(pdb.CreationTimestamp)}
},
	Column{Name: "Min Available", Description: "The minimum number of pods that must be available."},
	Column{Name: "Max Unavailable", Description: "The maximum number of pods that may be unavailable."},
	Column{Name: "Allowed Disruptions", Type: "integer", Description: "Calculated number of pods that may be disrupted at this time."},
	AgeColumn,
)
