package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	resourcehelper "k8s.io/component-helpers/resource"
)

// PodResizeValidator refuses at the API an in-place resize (the pods/resize subresource) of a
// bound pod whose requests would exceed its node's allocatable, or of a pod on a node that is
// not Linux, as upstream's plugin of that name: such a resize could never be taken on, so the
// client hears so at once (Forbidden, cause NodeCapacity or UnsupportedPlatform) rather than
// from a pod waiting forever. A resize that fits the node but not beside its other pods is
// the node's to defer.
type PodResizeValidator struct {
	Nodes NodeGetter
}

var _ admission.ValidationInterface = PodResizeValidator{}

// Handles implements admission.Interface.
func (PodResizeValidator) Handles(op admission.Operation) bool { return op == admission.Update }

// Validate implements admission.ValidationInterface.
func (v PodResizeValidator) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("pods") || a.GetSubresource() != "resize" {
		return nil
	}
	pod, ok := a.GetObject().(*corev1.Pod)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("expected a pod but got a %T", a.GetObject()))
	}
	old, ok := a.GetOldObject().(*corev1.Pod)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("expected an old pod but got a %T", a.GetOldObject()))
	}
	// An unbound pod has no node to fit; an unchanged spec (the same generation) no resize.
	if pod.Spec.NodeName == "" || old.Generation == pod.Generation {
		return nil
	}
	node, err := v.Nodes(ctx, pod.Spec.NodeName)
	if apierrors.IsNotFound(err) {
		return admission.NewForbidden(a, fmt.Errorf("node %q not found", pod.Spec.NodeName))
	}
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("failed to get node %q: %w", pod.Spec.NodeName, err))
	}
	if os, ok := node.Labels[corev1.LabelOSStable]; ok && os != "linux" {
		return resizeRefused(a, fmt.Errorf("pod resize is only supported on linux nodes, node %q is %q", node.Name, os), "UnsupportedPlatform")
	}
	if err := withinAllocatable(pod, node.Status.Allocatable); err != nil {
		return resizeRefused(a, err, "NodeCapacity")
	}
	return nil
}

// withinAllocatable reports, in upstream's words, the pod's cpu and memory requests beyond
// the node's allocatable.
func withinAllocatable(pod *corev1.Pod, allocatable corev1.ResourceList) error {
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	cpu, memory := requests[corev1.ResourceCPU], requests[corev1.ResourceMemory]
	var over []string
	if cpu.Cmp(*allocatable.Cpu()) > 0 {
		over = append(over, fmt.Sprintf("cpu, requested: %d, allocatable: %d", cpu.MilliValue(), allocatable.Cpu().MilliValue()))
	}
	if memory.Cmp(*allocatable.Memory()) > 0 {
		over = append(over, fmt.Sprintf("memory, requested: %d, allocatable: %d", memory.Value(), allocatable.Memory().Value()))
	}
	if len(over) > 0 {
		return fmt.Errorf("node didn't have enough allocatable resources: %s", strings.Join(over, "; "))
	}
	return nil
}

// resizeRefused is a Forbidden error carrying the cause, as upstream's plugin returns it.
func resizeRefused(a admission.Attributes, err error, cause metav1.CauseType) error {
	forbidden := admission.NewForbidden(a, err)
	var status *apierrors.StatusError
	if errors.As(forbidden, &status) {
		if status.ErrStatus.Details == nil {
			status.ErrStatus.Details = &metav1.StatusDetails{}
		}
		status.ErrStatus.Details.Causes = append(status.ErrStatus.Details.Causes, metav1.StatusCause{Type: cause})
		return status
	}
	return forbidden
}
