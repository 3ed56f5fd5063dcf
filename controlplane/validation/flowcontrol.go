package validation

import (
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// FlowSchema validates a FlowSchema: its precedence, distinguisher and priority level.
func FlowSchema(fs *flowcontrolv1.FlowSchema) field.ErrorList {
	errs := ObjectMeta(&fs.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	s := &fs.Spec
	if s.MatchingPrecedence <= 0 || s.MatchingPrecedence > 10000 {
		errs = append(errs, field.Invalid(specPath.Child("matchingPrecedence"), s.MatchingPrecedence, "must be between 1 and 10000 inclusively"))
	}
	if d := s.DistinguisherMethod; d != nil && d.Type != flowcontrolv1.FlowDistinguisherMethodByUserType && d.Type != flowcontrolv1.FlowDistinguisherMethodByNamespaceType {
		errs = append(errs, field.NotSupported(specPath.Child("distinguisherMethod", "type"), d.Type, []string{string(flowcontrolv1.FlowDistinguisherMethodByUserType), string(flowcontrolv1.FlowDistinguisherMethodByNamespaceType)}))
	}
	if s.PriorityLevelConfiguration.Name == "" {
		errs = append(errs, field.Required(specPath.Child("priorityLevelConfiguration", "name"), "must reference a priority level"))
	}
	for i, r := range s.Rules {
		fld := specPath.Child("rules").Index(i)
		if len(r.Subjects) == 0 {
			errs = append(errs, field.Required(fld.Child("subjects"), "subjects must contain at least one value"))
		}
		if len(r.ResourceRules) == 0 && len(r.NonResourceRules) == 0 {
			errs = append(errs, field.Required(fld, "at least one of resourceRules and nonResourceRules has to be non-empty"))
		}
	}
	return errs
}

// PriorityLevelConfiguration validates a priority level: Exempt or Limited, with a sound
// limit response.
func PriorityLevelConfiguration(plc *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	errs := ObjectMeta(&plc.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	s := &plc.Spec
	switch s.Type {
	case flowcontrolv1.PriorityLevelEnablementExempt:
		if s.Limited != nil {
			errs = append(errs, field.Forbidden(specPath.Child("limited"), "must be nil if the type is not Limited"))
		}
	case flowcontrolv1.PriorityLevelEnablementLimited:
		if s.Limited == nil {
			errs = append(errs, field.Required(specPath.Child("limited"), "must not be empty when type is Limited"))
			break
		}
		lp := specPath.Child("limited")
		if n := s.Limited.NominalConcurrencyShares; n != nil && *n < 0 {
			errs = append(errs, field.Invalid(lp.Child("nominalConcurrencyShares"), *n, "must be a non-negative integer"))
		}
		if p := s.Limited.LendablePercent; p != nil && (*p < 0 || *p > 100) {
			errs = append(errs, field.Invalid(lp.Child("lendablePercent"), *p, "must be between 0 and 100, inclusive"))
		}
		lr := s.Limited.LimitResponse
		switch lr.Type {
		case flowcontrolv1.LimitResponseTypeReject:
			if lr.Queuing != nil {
				errs = append(errs, field.Forbidden(lp.Child("limitResponse", "queuing"), "must be nil if limited.limitResponse.type is not Limited"))
			}
		case flowcontrolv1.LimitResponseTypeQueue:
			q := lr.Queuing
			if q == nil {
				errs = append(errs, field.Required(lp.Child("limitResponse", "queuing"), "must not be empty if limited.limitResponse.type is Limited"))
				break
			}
			qp := lp.Child("limitResponse", "queuing")
			if q.Queues <= 0 {
				errs = append(errs, field.Invalid(qp.Child("queues"), q.Queues, "must be positive"))
			}
			if q.HandSize <= 0 {
				errs = append(errs, field.Invalid(qp.Child("handSize"), q.HandSize, "must be positive"))
			} else if q.HandSize > q.Queues {
				errs = append(errs, field.Invalid(qp.Child("handSize"), q.HandSize, "should not be greater than queues"))
			}
			if q.QueueLengthLimit <= 0 {
				errs = append(errs, field.Invalid(qp.Child("queueLengthLimit"), q.QueueLengthLimit, "must be positive"))
			}
		default:
			errs = append(errs, field.NotSupported(lp.Child("limitResponse", "type"), lr.Type, []string{string(flowcontrolv1.LimitResponseTypeQueue), string(flowcontrolv1.LimitResponseTypeReject)}))
		}
	default:
		errs = append(errs, field.NotSupported(specPath.Child("type"), s.Type, []string{string(flowcontrolv1.PriorityLevelEnablementExempt), string(flowcontrolv1.PriorityLevelEnablementLimited)}))
	}
	return errs
}
