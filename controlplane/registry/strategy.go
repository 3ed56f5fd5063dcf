package registry

import (
	"context"
	"reflect"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/skiff-sh/skiff/controlplane/scheme"
)

// strategy implements the create, update and delete strategies of one resource from a few
// functions. Resources with a Spec and a Status field get upstream's rules: the main resource
// ignores status changes, metadata.generation counts spec changes, and the status
// subresource (see statusStrategy) ignores everything but status.
type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator

	namespaced bool
	// hasStatus is true when the resource has a status subresource.
	hasStatus bool
	// prepareForCreate clears or sets fields on create, after generic handling.
	prepareForCreate func(obj runtime.Object)
	// prepareForUpdate adjusts obj from old on update, after generic handling.
	prepareForUpdate func(obj, old runtime.Object)
	// validate checks a new object.
	validate func(ctx context.Context, obj runtime.Object) field.ErrorList
	// validateUpdate checks an update beyond validate (immutable fields).
	validateUpdate func(obj, old runtime.Object) field.ErrorList
	// allowCreateOnUpdate lets PUT create (Leases, Endpoints, as upstream).
	allowCreateOnUpdate bool
}

func newStrategy(namespaced, hasStatus bool) *strategy {
	return &strategy{
		ObjectTyper:   scheme.Scheme,
		NameGenerator: names.SimpleNameGenerator,
		namespaced:    namespaced,
		hasStatus:     hasStatus,
	}
}

func (s *strategy) NamespaceScoped() bool { return s.namespaced }

func (s *strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	if m, err := meta.Accessor(obj); err == nil && hasField(obj, "Spec") {
		m.SetGeneration(1)
	}
	if s.prepareForCreate != nil {
		s.prepareForCreate(obj)
	}
}

func (s *strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	if s.hasStatus {
		copyField(obj, old, "Status")
	}
	bumpGeneration(obj, old)
	if s.prepareForUpdate != nil {
		s.prepareForUpdate(obj, old)
	}
}

func (s *strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	if s.validate == nil {
		return nil
	}
	return s.validate(ctx, obj)
}

func (s *strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	errs := s.Validate(ctx, obj)
	if s.validateUpdate != nil {
		errs = append(errs, s.validateUpdate(obj, old)...)
	}
	return errs
}

func (s *strategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string { return nil }
func (s *strategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}
func (s *strategy) Canonicalize(obj runtime.Object)                   {}
func (s *strategy) AllowCreateOnUpdate(ctx context.Context) bool      { return s.allowCreateOnUpdate }
func (s *strategy) AllowUnconditionalUpdate(ctx context.Context) bool { return true }

// statusStrategy is the strategy of a status subresource: only status changes persist.
type statusStrategy struct {
	*strategy
	// validateStatus checks the new status, if set.
	validateStatus func(obj, old runtime.Object) field.ErrorList
}

func (s statusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	copyField(obj, old, "Spec")
	// Labels and annotations travel with status updates as upstream allows; nothing else
	// in metadata may change here.
	nm, _ := meta.Accessor(obj)
	om, _ := meta.Accessor(old)
	nm.SetGeneration(om.GetGeneration())
	nm.SetOwnerReferences(om.GetOwnerReferences())
	nm.SetFinalizers(om.GetFinalizers())
}

func (s statusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	if s.validateStatus != nil {
		return s.validateStatus(obj, old)
	}
	return nil
}

func (s statusStrategy) AllowCreateOnUpdate(ctx context.Context) bool { return false }

func hasField(obj runtime.Object, name string) bool {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return false
	}
	return v.Elem().FieldByName(name).IsValid()
}

// copyField sets dst.<name> to src.<name> for two objects of the same struct type.
func copyField(dst, src runtime.Object, name string) {
	d := reflect.ValueOf(dst).Elem().FieldByName(name)
	s := reflect.ValueOf(src).Elem().FieldByName(name)
	if d.IsValid() && s.IsValid() && d.CanSet() {
		d.Set(s)
	}
}

// bumpGeneration increments metadata.generation when the spec changed, as upstream does for
// every resource with a spec.
func bumpGeneration(obj, old runtime.Object) {
	if !hasField(obj, "Spec") {
		return
	}
	ns := reflect.ValueOf(obj).Elem().FieldByName("Spec").Interface()
	os := reflect.ValueOf(old).Elem().FieldByName("Spec").Interface()
	nm, _ := meta.Accessor(obj)
	om, _ := meta.Accessor(old)
	gen := om.GetGeneration()
	if !apiequality.Semantic.DeepEqual(ns, os) {
		gen++
	}
	nm.SetGeneration(gen)
}
