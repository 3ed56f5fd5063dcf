package printers

import (
	"fmt"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// FlowSchemas prints NAME PRIORITYLEVEL MATCHINGPRECEDENCE DISTINGUISHERMETHOD AGE MISSINGPL.
var FlowSchemas = New(func(o runtime.Object) []any {
	fs := o.(*flowcontrolv1.FlowSchema)
	d := "<none>"
	if fs.Spec.DistinguisherMethod != nil {
		d = string(fs.Spec.DistinguisherMethod.Type)
	}
	missing := "?"
	for _, c := range fs.Status.Conditions {
		if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
			missing = string(c.Status)
		}
	}
	return []any{fs.Spec.PriorityLevelConfiguration.Name, int64(fs.Spec.MatchingPrecedence), d, Age(fs.CreationTimestamp), missing}
}, Column{Name: "PriorityLevel"}, Column{Name: "MatchingPrecedence", Type: "integer"}, Column{Name: "DistinguisherMethod"}, AgeColumn, Column{Name: "MissingPL"})

// PriorityLevelConfigurations prints NAME TYPE NOMINALCONCURRENCYSHARES QUEUES HANDSIZE
// QUEUELENGTHLIMIT AGE.
var PriorityLevelConfigurations = New(func(o runtime.Object) []any {
	plc := o.(*flowcontrolv1.PriorityLevelConfiguration)
	shares, queues, hand, limit := "<none>", "<none>", "<none>", "<none>"
	if l := plc.Spec.Limited; l != nil {
		if l.NominalConcurrencyShares != nil {
			shares = fmt.Sprint(*l.NominalConcurrencyShares)
		}
		if q := l.LimitResponse.Queuing; q != nil {
			queues, hand, limit = fmt.Sprint(q.Queues), fmt.Sprint(q.HandSize), fmt.Sprint(q.QueueLengthLimit)
		}
	}
	return []any{string(plc.Spec.Type), shares, queues, hand, limit, Age(plc.CreationTimestamp)}
}, Column{Name: "Type"}, Column{Name: "NominalConcurrencyShares"}, Column{Name: "Queues"}, Column{Name: "HandSize"}, Column{Name: "QueueLengthLimit"}, AgeColumn)
