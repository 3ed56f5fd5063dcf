package registry

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
)

// NamespaceREST adds upstream's two-phase namespace deletion to the namespace store: while
// spec.finalizers is non-empty, DELETE only marks the namespace Terminating; the namespace
// controller empties it, removes its finalizer through namespaces/finalize, and deletes again.
type NamespaceREST struct {
	*REST
}

// Delete implements rest.GracefulDeleter.
func (r *NamespaceREST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	obj, err := r.Store.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	ns := obj.(*corev1.Namespace)
	if len(ns.Spec.Finalizers) == 0 {
		return r.Store.Delete(ctx, name, deleteValidation, options)
	}
	if deleteValidation != nil {
		if err := deleteValidation(ctx, obj); err != nil {
			return nil, false, err
		}
	}
	if ns.DeletionTimestamp != nil {
		return ns, false, nil
	}
	if options == nil {
		options = &metav1.DeleteOptions{}
	}
	var pre *storage.Preconditions
	if p := options.Preconditions; p != nil {
		pre = &storage.Preconditions{UID: p.UID, ResourceVersion: p.ResourceVersion}
	}
	key, err := r.Store.KeyFunc(ctx, name)
	if err != nil {
		return nil, false, err
	}
	out := r.Store.NewFunc()
	err = r.Store.Storage.GuaranteedUpdate(ctx, key, out, false, pre, storage.SimpleUpdate(func(existing runtime.Object) (runtime.Object, error) {
		n := existing.(*corev1.Namespace).DeepCopy()
		if n.DeletionTimestamp == nil {
			now := metav1.Now()
			n.DeletionTimestamp = &now
			n.DeletionGracePeriodSeconds = new(int64)
		}
		n.Status.Phase = corev1.NamespaceTerminating
		// The garbage collector honours these on the namespace's own dependents, as upstream.
		switch {
		case options.PropagationPolicy != nil && *options.PropagationPolicy == metav1.DeletePropagationOrphan:
			n.Finalizers = addOnce(n.Finalizers, metav1.FinalizerOrphanDependents)
		case options.PropagationPolicy != nil && *options.PropagationPolicy == metav1.DeletePropagationForeground:
			n.Finalizers = addOnce(n.Finalizers, metav1.FinalizerDeleteDependents)
		}
		return n, nil
	}), len(options.DryRun) > 0, nil)
	if err != nil {
		return nil, false, err
	}
	return out, false, nil
}

func addOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// finalizeStrategy lets namespaces/finalize change spec.finalizers and nothing else.
type finalizeStrategy struct{ *strategy }

func (finalizeStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	n, o := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	finalizers := n.Spec.Finalizers
	*n = *o.DeepCopy()
	n.Spec.Finalizers = finalizers
}

func (finalizeStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	var errs field.ErrorList
	for i, f := range obj.(*corev1.Namespace).Spec.Finalizers {
		if f == "" {
			errs = append(errs, field.Required(field.NewPath("spec", "finalizers").Index(i), ""))
		}
	}
	return errs
}

func (finalizeStrategy) AllowCreateOnUpdate(ctx context.Context) bool { return false }
