package printers

import (
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PriorityClasses prints NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY.
var PriorityClasses = New(func(o runtime.Object) []any {
	pc := o.(*schedulingv1.PriorityClass)
	policy := "<unset>"
	if pc.PreemptionPolicy != nil {
		policy = string(*pc.PreemptionPolicy)
	}
	return []any{int64(pc.Value), pc.GlobalDefault, Age(pc.CreationTimestamp), policy}
}, Column{Name: "Value", Type: "integer"}, Column{Name: "Global-Default", Type: "boolean"}, AgeColumn, Column{Name: "PreemptionPolicy"})
