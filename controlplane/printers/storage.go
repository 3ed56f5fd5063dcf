package printers

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// IsDefaultClassAnnotation marks the default StorageClass (and IngressClass).
const IsDefaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// StorageClasses prints NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE
// ALLOWVOLUMEEXPANSION AGE; the default class's name says "(default)".
var StorageClasses = Custom(func(o runtime.Object) []any {
	sc := o.(*storagev1.StorageClass)
	name := sc.Name
	if sc.Annotations[IsDefaultClassAnnotation] == "true" || sc.Annotations["storageclass.beta.kubernetes.io/is-default-class"] == "true" {
		name += " (default)"
	}
	reclaim, mode := string(corev1.PersistentVolumeReclaimDelete), string(storagev1.VolumeBindingImmediate)
	if sc.ReclaimPolicy != nil {
		reclaim = string(*sc.ReclaimPolicy)
	}
	if sc.VolumeBindingMode != nil {
		mode = string(*sc.VolumeBindingMode)
	}
	expand := sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion
	return []any{name, sc.Provisioner, reclaim, mode, expand, Age(sc.CreationTimestamp)}
},
	Column{Name: "Name", Format: "name"}, Column{Name: "Provisioner"}, Column{Name: "ReclaimPolicy"},
	Column{Name: "VolumeBindingMode"}, Column{Name: "AllowVolumeExpansion", Type: "boolean"}, AgeColumn,
)

func boolOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

// CSIDrivers prints NAME ATTACHREQUIRED PODINFOONMOUNT STORAGECAPACITY TOKENREQUESTS
// REQUIRESREPUBLISH MODES AGE.
var CSIDrivers = New(func(o runtime.Object) []any {
	d := o.(*storagev1.CSIDriver)
	var modes []string
	for _, m := range d.Spec.VolumeLifecycleModes {
		modes = append(modes, string(m))
	}
	var aud []string
	for _, t := range d.Spec.TokenRequests {
		aud = append(aud, t.Audience)
	}
	tokens := "<unset>"
	if len(aud) > 0 {
		tokens = strings.Join(aud, ",")
	}
	return []any{boolOr(d.Spec.AttachRequired, true), boolOr(d.Spec.PodInfoOnMount, false), boolOr(d.Spec.StorageCapacity, false),
		tokens, boolOr(d.Spec.RequiresRepublish, false), strings.Join(modes, ","), Age(d.CreationTimestamp)}
},
	Column{Name: "AttachRequired", Type: "boolean"}, Column{Name: "PodInfoOnMount", Type: "boolean"},
	Column{Name: "StorageCapacity", Type: "boolean"}, Column{Name: "TokenRequests"},
	Column{Name: "RequiresRepublish", Type: "boolean"}, Column{Name: "Modes"}, AgeColumn,
)

// CSINodes prints NAME DRIVERS AGE.
var CSINodes = New(func(o runtime.Object) []any {
	n := o.(*storagev1.CSINode)
	return []any{int64(len(n.Spec.Drivers)), Age(n.CreationTimestamp)}
}, Column{Name: "Drivers", Type: "integer"}, AgeColumn)

// CSIStorageCapacities prints NAME STORAGECLASSNAME CAPACITY.
var CSIStorageCapacities = New(func(o runtime.Object) []any {
	c := o.(*storagev1.CSIStorageCapacity)
	capacity := "<unset>"
	if c.Capacity != nil {
		capacity = c.Capacity.String()
	}
	return []any{c.StorageClassName, capacity}
}, Column{Name: "StorageClassName"}, Column{Name: "Capacity"})

// VolumeAttachments prints NAME ATTACHER PV NODE ATTACHED AGE.
var VolumeAttachments = New(func(o runtime.Object) []any {
	va := o.(*storagev1.VolumeAttachment)
	pv := ""
	if va.Spec.Source.PersistentVolumeName != nil {
		pv = *va.Spec.Source.PersistentVolumeName
	}
	return []any{va.Spec.Attacher, pv, va.Spec.NodeName, va.Status.Attached, Age(va.CreationTimestamp)}
}, Column{Name: "Attacher"}, Column{Name: "PV"}, Column{Name: "Node"}, Column{Name: "Attached", Type: "boolean"}, AgeColumn)

// VolumeAttributesClasses prints NAME DRIVERNAME AGE.
var VolumeAttributesClasses = New(func(o runtime.Object) []any {
	c := o.(*storagev1.VolumeAttributesClass)
	return []any{c.DriverName, Age(c.CreationTimestamp)}
}, Column{Name: "DriverName"}, AgeColumn)
