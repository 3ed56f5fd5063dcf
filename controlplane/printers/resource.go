package printers

import (
	"sort"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// DeviceClasses prints NAME AGE.
var DeviceClasses = New(func(o runtime.Object) []any {
	return []any{Age(o.(*resourcev1.DeviceClass).CreationTimestamp)}
}, AgeColumn)

// ResourceClaims prints NAME STATE AGE.
var ResourceClaims = New(func(o runtime.Object) []any {
	c := o.(*resourcev1.ResourceClaim)
	var state []string
	if c.Status.Allocation != nil {
		state = append(state, "allocated")
		if len(c.Status.ReservedFor) > 0 {
			state = append(state, "reserved")
		}
	} else {
		state = append(state, "pending")
	}
	if c.DeletionTimestamp != nil {
		state = append(state, "deleted")
	}
	sort.Strings(state[1:])
	return []any{strings.Join(state, ","), Age(c.CreationTimestamp)}
}, Column{Name: "State"}, AgeColumn)

// ResourceClaimTemplates prints NAME AGE.
var ResourceClaimTemplates = New(func(o runtime.Object) []any {
	return []any{Age(o.(*resourcev1.ResourceClaimTemplate).CreationTimestamp)}
}, AgeColumn)

// ResourceSlices prints NAME NODE DRIVER POOL AGE.
var ResourceSlices = New(func(o runtime.Object) []any {
	s := o.(*resourcev1.ResourceSlice)
	node := "<none>"
	if s.Spec.NodeName != nil {
		node = *s.Spec.NodeName
	}
	return []any{node, s.Spec.Driver, s.Spec.Pool.Name, Age(s.CreationTimestamp)}
}, Column{Name: "Node"}, Column{Name: "Driver"}, Column{Name: "Pool"}, AgeColumn)

// DeviceTaintRules prints NAME EFFECT AGE.
var DeviceTaintRules = New(func(o runtime.Object) []any {
	r := o.(*resourcev1.DeviceTaintRule)
	return []any{string(r.Spec.Taint.Effect), Age(r.CreationTimestamp)}
}, Column{Name: "Effect"}, AgeColumn)
