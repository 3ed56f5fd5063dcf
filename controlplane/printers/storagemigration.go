package printers

import (
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// StorageVersionMigrations prints NAME RESOURCE AGE.
var StorageVersionMigrations = New(func(o runtime.Object) []any {
	m := o.(*storagemigrationv1.StorageVersionMigration)
	return []any{m.Spec.Resource.String(), Age(m.CreationTimestamp)}
}, Column{Name: "Resource"}, AgeColumn)
