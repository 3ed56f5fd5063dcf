package printers

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Leases prints NAME HOLDER AGE.
var Leases = New(func(o runtime.Object) []any {
	l := o.(*coordinationv1.Lease)
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	return []any{holder, Age(l.CreationTimestamp)}
},
	Column{Name: "Holder", Description: "The holder of the lease."},
	AgeColumn,
)
