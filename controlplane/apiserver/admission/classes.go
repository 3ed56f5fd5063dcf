package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/utils/ptr"
)

// Classes reads the cluster-scoped classes admission resolves. A missing class is a
// NotFound API error.
type Classes struct {
	PriorityClass   func(ctx context.Context, name string) (*schedulingv1.PriorityClass, error)
	PriorityClasses func(ctx context.Context) ([]*schedulingv1.PriorityClass, error)
	RuntimeClass    func(ctx context.Context, name string) (*nodev1.RuntimeClass, error)
	StorageClasses  func(ctx context.Context) ([]*storagev1.StorageClass, error)
}

// Priority is upstream's Priority plugin: a pod's priorityClassName (or else the class
// marked globalDefault) becomes spec.priority and spec.preemptionPolicy; a PriorityClass
// may not become a second global default.
type Priority struct{ Classes Classes }

// Handles implements admission.Interface.
func (Priority) Handles(op admission.Operation) bool {
	return op == admission.Create || op == admission.Update
}

// defaultClass is the globalDefault class, the lowest-valued if several are (as upstream).
func (p Priority) defaultClass(ctx context.Context) (*schedulingv1.PriorityClass, error) {
	if p.Classes.PriorityClasses == nil {
		return nil, nil
	}
	all, err := p.Classes.PriorityClasses(ctx)
	if err != nil {
		return nil, err
	}
	var def *schedulingv1.PriorityClass
	for _, pc := range all {
		if pc.GlobalDefault && (def == nil || pc.Value < def.Value) {
			def = pc
		}
	}
	return def, nil
}

// Admit implements admission.MutationInterface.
func (p Priority) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	pod, ok := isPodCreate(a)
	if !ok {
		return nil
	}
	want, policy := int32(0), corev1.PreemptLowerPriority
	if name := pod.Spec.PriorityClassName; name == "" {
		def, err := p.defaultClass(ctx)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		if def != nil {
			pod.Spec.PriorityClassName, want = def.Name, def.Value
			if def.PreemptionPolicy != nil {
				policy = *def.PreemptionPolicy
			}
		}
	} else {
		var pc *schedulingv1.PriorityClass
		var err error
		if p.Classes.PriorityClass != nil {
			pc, err = p.Classes.PriorityClass(ctx, name)
		} else {
			err = apierrors.NewNotFound(schedulingv1.Resource("priorityclasses"), name)
		}
		if apierrors.IsNotFound(err) {
			return admission.NewForbidden(a, fmt.Errorf("no PriorityClass with name %s was found", name))
		}
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		want = pc.Value
		if pc.PreemptionPolicy != nil {
			policy = *pc.PreemptionPolicy
		}
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority != want {
		return admission.NewForbidden(a, fmt.Errorf("the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *pod.Spec.Priority, want))
	}
	pod.Spec.Priority = &want
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != policy {
		return admission.NewForbidden(a, fmt.Errorf("the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name", *pod.Spec.PreemptionPolicy, policy))
	}
	pod.Spec.PreemptionPolicy = ptr.To(policy)
	return nil
}

// Validate implements admission.ValidationInterface: only one PriorityClass is the
// global default.
func (p Priority) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != schedulingv1.Resource("priorityclasses") || a.GetSubresource() != "" {
		return nil
	}
	pc, ok := a.GetObject().(*schedulingv1.PriorityClass)
	if !ok || !pc.GlobalDefault {
		return nil
	}
	def, err := p.defaultClass(ctx)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if def != nil && def.Name != pc.Name {
		return admission.NewForbidden(a, fmt.Errorf("PriorityClass %v is already marked as default. Only one default can exist", def.Name))
	}
	return nil
}

// RuntimeClass is upstream's RuntimeClass plugin: a pod naming a RuntimeClass must name one
// that exists, gets its pod overhead, and its scheduling constraints.
type RuntimeClass struct{ Classes Classes }

// Handles implements admission.Interface.
func (RuntimeClass) Handles(op admission.Operation) bool { return op == admission.Create }

func (r RuntimeClass) class(ctx context.Context, a admission.Attributes, name string) (*nodev1.RuntimeClass, error) {
	var rc *nodev1.RuntimeClass
	var err error = apierrors.NewNotFound(nodev1.Resource("runtimeclasses"), name)
	if r.Classes.RuntimeClass != nil {
		rc, err = r.Classes.RuntimeClass(ctx, name)
	}
	if apierrors.IsNotFound(err) {
		return nil, admission.NewForbidden(a, fmt.Errorf("pod rejected: RuntimeClass %q not found", name))
	}
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return rc, nil
}

// Admit implements admission.MutationInterface.
func (r RuntimeClass) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	pod, ok := isPodCreate(a)
	if !ok || pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName == "" {
		return nil
	}
	rc, err := r.class(ctx, a, *pod.Spec.RuntimeClassName)
	if err != nil {
		return err
	}
	if rc.Overhead != nil {
		if pod.Spec.Overhead != nil && !apiequality.Semantic.DeepEqual(pod.Spec.Overhead, rc.Overhead.PodFixed) {
			return admission.NewForbidden(a, fmt.Errorf("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"))
		}
		pod.Spec.Overhead = rc.Overhead.PodFixed.DeepCopy()
	}
	if s := rc.Scheduling; s != nil {
		for k, v := range s.NodeSelector {
			if have, set := pod.Spec.NodeSelector[k]; set && have != v {
				return admission.NewForbidden(a, fmt.Errorf("conflict: runtimeClass.scheduling.nodeSelector[%s] = %s; pod.spec.nodeSelector[%s] = %s", k, v, k, have))
			}
			if pod.Spec.NodeSelector == nil {
				pod.Spec.NodeSelector = map[string]string{}
			}
			pod.Spec.NodeSelector[k] = v
		}
		for _, t := range s.Tolerations {
			have := false
			for _, pt := range pod.Spec.Tolerations {
				if apiequality.Semantic.DeepEqual(pt, t) {
					have = true
				}
			}
			if !have {
				pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
			}
		}
	}
	return nil
}

// Validate implements admission.ValidationInterface: the overhead the pod ends with is the
// class's.
func (r RuntimeClass) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	pod, ok := isPodCreate(a)
	if !ok || pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName == "" {
		return nil
	}
	rc, err := r.class(ctx, a, *pod.Spec.RuntimeClassName)
	if err != nil {
		return err
	}
	var want corev1.ResourceList
	if rc.Overhead != nil {
		want = rc.Overhead.PodFixed
	}
	if len(want) == 0 && len(pod.Spec.Overhead) == 0 {
		return nil
	}
	if !apiequality.Semantic.DeepEqual(pod.Spec.Overhead, want) {
		return admission.NewForbidden(a, fmt.Errorf("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"))
	}
	return nil
}

// IsDefaultStorageClassAnnotation marks the default StorageClass.
const IsDefaultStorageClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// DefaultStorageClass is upstream's plugin of that name: a claim that names no class gets
// the default one (the newest, if several are marked).
type DefaultStorageClass struct{ Classes Classes }

// Handles implements admission.Interface.
func (DefaultStorageClass) Handles(op admission.Operation) bool { return op == admission.Create }

// Admit implements admission.MutationInterface.
func (d DefaultStorageClass) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("persistentvolumeclaims") || a.GetSubresource() != "" || d.Classes.StorageClasses == nil {
		return nil
	}
	pvc, ok := a.GetObject().(*corev1.PersistentVolumeClaim)
	if !ok || pvc.Spec.StorageClassName != nil {
		return nil
	}
	classes, err := d.Classes.StorageClasses(ctx)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	var def *storagev1.StorageClass
	for _, sc := range classes {
		if sc.Annotations[IsDefaultStorageClassAnnotation] != "true" && sc.Annotations["storageclass.beta.kubernetes.io/is-default-class"] != "true" {
			continue
		}
		if def == nil || sc.CreationTimestamp.After(def.CreationTimestamp.Time) ||
			(sc.CreationTimestamp.Equal(&def.CreationTimestamp) && sc.Name < def.Name) {
			def = sc
		}
	}
	if def != nil {
		pvc.Spec.StorageClassName = ptr.To(def.Name)
	}
	return nil
}
