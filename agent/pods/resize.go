package pods

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/podqos"
)

// resizeStaticCPUs is upstream's message for a CPU resize of a Guaranteed pod under the static
// CPU manager policy, which would have to move its containers between exclusive CPUs.
const resizeStaticCPUs = `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`

// AdmitResize decides an in-place resize as the kubelet's allocation manager does: pod has
// its resized spec, others the node's other pods with the resources they were allocated.
// Under the static CPU manager policy (staticCPUs) a Guaranteed pod's CPU cannot change:
// Infeasible, for good. A pod that does not fit beside the others waits: Deferred, with the
// node's admission message, and is tried again as pods come and go (the scheduler, not the
// node, decides whether to preempt for it). nil: the resize goes ahead. It does no I/O.
func AdmitResize(pod *corev1.Pod, allocated func(c corev1.Container) corev1.ResourceRequirements, others []*corev1.Pod,
	allocatable corev1.ResourceList, staticCPUs bool) *Rejection {
	if staticCPUs && podqos.Of(pod) == corev1.PodQOSGuaranteed {
		for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
			if !sameQuantity(c.Resources.Requests, allocated(c).Requests, corev1.ResourceCPU) {
				return &Rejection{Reason: corev1.PodReasonInfeasible, Message: resizeStaticCPUs}
			}
		}
	}
	if r := Admit(pod, others, allocatable); r != nil {
		return &Rejection{Reason: corev1.PodReasonDeferred, Message: r.Message}
	}
	return nil
}

// admitResize decides the pod's pending resize against the node's other active pods as
// allocated (a pod whose own resize waits counts with what it runs with), records the
// outcome for the pod's status (a PodResizePending condition while it waits) and, when it
// changes, reports it as the kubelet's ResizeDeferred or ResizeInfeasible event.
func (m *Manager) admitResize(pod *corev1.Pod) bool {
	var others []*corev1.Pod
	for _, p := range m.ActivePods() {
		if p.UID != pod.UID {
			others = append(others, m.allocatedPod(p))
		}
	}
	rej := AdmitResize(pod, func(c corev1.Container) corev1.ResourceRequirements { return m.appliedTo(pod, c) },
		others, m.opts.Allocatable, m.opts.CPUs != nil)
	m.mu.Lock()
	prev, had := m.resizePending[pod.UID]
	if rej == nil {
		delete(m.resizePending, pod.UID)
	} else {
		m.resizePending[pod.UID] = pendingResize{Rejection: *rej, generation: pod.Generation}
	}
	m.mu.Unlock()
	if rej != nil && (!had || prev.Rejection != *rej || prev.generation != pod.Generation) {
		event := "ResizeDeferred"
		if rej.Reason == corev1.PodReasonInfeasible {
			event = "ResizeInfeasible"
		}
		m.recorder.Eventf(pod, corev1.EventTypeWarning, event, "Pod resize %s: %s", rej.Reason, rej.Message)
	}
	return rej == nil
}

// pendingResize is a resize the node has not taken on, and the pod generation it is for.
type pendingResize struct {
	Rejection
	generation int64
}

// clearResize forgets a pod's pending resize: its spec is back to what it runs with.
func (m *Manager) clearResize(uid types.UID) {
	m.mu.Lock()
	delete(m.resizePending, uid)
	m.mu.Unlock()
}

// resizeCondition is the pod's PodResizePending condition while its resize waits.
func (m *Manager) resizeCondition(uid types.UID) *corev1.PodCondition {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.resizePending[uid]
	if !ok {
		return nil
	}
	return &corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: p.Reason,
		Message: p.Message, ObservedGeneration: p.generation}
}

// allocatedPod is the pod with the resources its running containers were given in place of
// its spec's.
func (m *Manager) allocatedPod(p *corev1.Pod) *corev1.Pod {
	out := p.DeepCopy()
	for i := range out.Spec.Containers {
		out.Spec.Containers[i].Resources = m.appliedTo(p, p.Spec.Containers[i])
	}
	return out
}

// setResizeCondition puts the pod's PodResizePending condition in s, or takes it out.
func setResizeCondition(s *corev1.PodStatus, cond *corev1.PodCondition) {
	for i := range s.Conditions {
		if s.Conditions[i].Type != corev1.PodResizePending {
			continue
		}
		if cond == nil {
			s.Conditions = append(s.Conditions[:i], s.Conditions[i+1:]...)
			return
		}
		setCondReason(s, corev1.PodResizePending, true, cond.Reason, cond.Message)
		s.Conditions[i].ObservedGeneration = cond.ObservedGeneration
		return
	}
	if cond != nil {
		setCondReason(s, corev1.PodResizePending, true, cond.Reason, cond.Message)
		s.Conditions[len(s.Conditions)-1].ObservedGeneration = cond.ObservedGeneration
	}
}
