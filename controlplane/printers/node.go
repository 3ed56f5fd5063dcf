package printers

import (
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// RuntimeClasses prints NAME HANDLER AGE.
var RuntimeClasses = New(func(o runtime.Object) []any {
	rc := o.(*nodev1.RuntimeClass)
	return []any{rc.Handler, Age(rc.CreationTimestamp)}
}, Column{Name: "Handler"}, AgeColumn)
