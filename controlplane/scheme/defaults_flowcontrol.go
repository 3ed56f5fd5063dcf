package scheme

import (
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// addFlowControlDefaults registers upstream's flowcontrol/v1 defaults.
func addFlowControlDefaults(s *runtime.Scheme) {
	s.AddTypeDefaultingFunc(&flowcontrolv1.FlowSchema{}, func(o any) {
		if fs := o.(*flowcontrolv1.FlowSchema); fs.Spec.MatchingPrecedence == 0 {
			fs.Spec.MatchingPrecedence = 1000
		}
	})
	s.AddTypeDefaultingFunc(&flowcontrolv1.PriorityLevelConfiguration{}, func(o any) {
		DefaultPriorityLevel(o.(*flowcontrolv1.PriorityLevelConfiguration))
	})
}

// DefaultPriorityLevel applies upstream's defaults: 30 shares and no lending for a Limited
// level, 64 queues with a hand of 8 and 50 requests each when it queues.
func DefaultPriorityLevel(plc *flowcontrolv1.PriorityLevelConfiguration) {
	if e := plc.Spec.Exempt; e != nil {
		if e.NominalConcurrencyShares == nil {
			e.NominalConcurrencyShares = ptr.To[int32](0)
		}
		if e.LendablePercent == nil {
			e.LendablePercent = ptr.To[int32](0)
		}
	}
	l := plc.Spec.Limited
	if l == nil {
		return
	}
	if l.NominalConcurrencyShares == nil {
		l.NominalConcurrencyShares = ptr.To[int32](30)
	}
	if l.LendablePercent == nil {
		l.LendablePercent = ptr.To[int32](0)
	}
	if q := l.LimitResponse.Queuing; q != nil {
		if q.HandSize == 0 {
			q.HandSize = 8
		}
		if q.Queues == 0 {
			q.Queues = 64
		}
		if q.QueueLengthLimit == 0 {
			q.QueueLengthLimit = 50
		}
	}
}
