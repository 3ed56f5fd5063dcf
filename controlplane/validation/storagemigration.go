package validation

import (
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// StorageVersionMigration validates a migration: it names the resource to migrate.
func StorageVersionMigration(m *storagemigrationv1.StorageVersionMigration) field.ErrorList {
	errs := ObjectMeta(&m.ObjectMeta, false, DNSSubdomain)
	if m.Spec.Resource.Resource == "" {
		errs = append(errs, field.Required(specPath.Child("resource", "resource"), "resource is required"))
	}
	return errs
}

// StorageVersionMigrationUpdate keeps the spec as created, as upstream.
func StorageVersionMigrationUpdate(m, old *storagemigrationv1.StorageVersionMigration) field.ErrorList {
	errs := StorageVersionMigration(m)
	if !apiequality.Semantic.DeepEqual(m.Spec, old.Spec) {
		errs = append(errs, field.Invalid(specPath, m.Spec, "field is immutable"))
	}
	return errs
}
