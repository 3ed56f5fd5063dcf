package validation

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Lease validates a Lease.
func Lease(l *coordinationv1.Lease) field.ErrorList {
	errs := ObjectMeta(&l.ObjectMeta, true, DNSSubdomain)
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(specPath.Child("leaseDurationSeconds"), *d, "must be greater than 0"))
	}
	return errs
}
