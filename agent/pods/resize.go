package pods

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

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

// admitResize decides the pod's pending resize, and every other resize waiting on the node,
// in the kubelet's order (resizeFirst), against the node's active pods as allocated: the
// first that fit are allocated (those of other pods are synced to be carried out), the rest
// wait with a PodResizePending condition, reported when it changes by the kubelet's
// ResizeDeferred or ResizeInfeasible event. It reports whether the pod's own was allocated.
// Admission holds the same lock, so two pods cannot both take the last of a resource.
func (m *Manager) admitResize(pod *corev1.Pod) bool {
	if !m.synced.Load() {
		return false
	}
	pods, err := m.lister.List(everything())
	if err != nil {
		return false
	}
	m.admitMu.Lock()
	defer m.admitMu.Unlock()
	if m.allocatedAsSpec(pod) {
		m.clearResize(pod.UID) // allocated already, in another pod's pass
		return true
	}
	active := m.activeOf(pods)
	var waiting []resizeCandidate
	for _, p := range active {
		if p.UID == pod.UID {
			continue
		}
		if since, ok := m.pendingSince(p.UID); ok && !m.allocatedAsSpec(p) {
			waiting = append(waiting, resizeCandidate{pod: p, increasing: m.increasesRequests(p), since: since})
		}
	}
	since, ok := m.pendingSince(pod.UID)
	if !ok {
		since = time.Now()
	}
	waiting = append(waiting, resizeCandidate{pod: pod, increasing: m.increasesRequests(pod), since: since})
	slices.SortStableFunc(waiting, resizeFirst)
	admitted := false
	for _, c := range waiting {
		var others []*corev1.Pod
		for _, p := range active {
			if p.UID != c.pod.UID {
				others = append(others, m.allocatedPod(p))
			}
		}
		p := c.pod
		rej := AdmitResize(p, func(ctr corev1.Container) corev1.ResourceRequirements { return m.allocatedTo(p, ctr) },
			others, m.opts.Allocatable, m.opts.CPUs != nil)
		if rej == nil {
			m.allocate(p)
			m.clearResize(p.UID)
			if p.UID == pod.UID {
				admitted = true
			} else {
				m.loop.Add(p.Namespace + "/" + p.Name)
			}
			continue
		}
		m.mu.Lock()
		prev, had := m.resizePending[p.UID]
		m.resizePending[p.UID] = pendingResize{Rejection: *rej, generation: p.Generation, since: c.since}
		m.mu.Unlock()
		if !had || prev.Rejection != *rej || prev.generation != p.Generation {
			event := "ResizeDeferred"
			if rej.Reason == corev1.PodReasonInfeasible {
				event = "ResizeInfeasible"
			}
			m.recorder.Eventf(p, corev1.EventTypeWarning, event, "Pod resize %s: %s", rej.Reason, rej.Message)
		}
	}
	return admitted
}

// resizeCandidate is a pod whose resize waits to be allocated.
type resizeCandidate struct {
	pod *corev1.Pod
	// increasing: the resize raises a request (one that does not, always fits).
	increasing bool
	// since the resize has been waiting.
	since time.Time
}

// resizeFirst orders waiting resizes as the kubelet retries them: those that raise no
// request first (they always fit), then by pod priority, then Guaranteed before Burstable,
// then the longest waiting. It does no I/O.
func resizeFirst(a, b resizeCandidate) int {
	if a.increasing != b.increasing {
		if !a.increasing {
			return -1
		}
		return 1
	}
	pa, pb := ptr.Deref(a.pod.Spec.Priority, 0), ptr.Deref(b.pod.Spec.Priority, 0)
	if pa != pb {
		if pa > pb {
			return -1
		}
		return 1
	}
	ga, gb := podqos.Of(a.pod) == corev1.PodQOSGuaranteed, podqos.Of(b.pod) == corev1.PodQOSGuaranteed
	if ga != gb {
		if ga {
			return -1
		}
		return 1
	}
	return a.since.Compare(b.since)
}

// increasesRequests reports whether the pod's spec requests more cpu or memory for any
// container than it was allocated.
func (m *Manager) increasesRequests(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		alloc := m.allocatedTo(p, c)
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := c.Resources.Requests[r]; ok && q.Cmp(alloc.Requests[r]) > 0 {
				return true
			}
		}
	}
	return false
}

// pendingSince is when the pod's resize began to wait, if it does.
func (m *Manager) pendingSince(uid types.UID) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.resizePending[uid]
	return p.since, ok
}

// allocate records the pod's spec resources as its allocation: its resize was admitted.
func (m *Manager) allocate(p *corev1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range p.Spec.Containers {
		m.allocated[string(p.UID)+"/"+c.Name] = *c.Resources.DeepCopy()
	}
}

// allocatedTo is what the container was allocated: its admitted resize, else what it runs
// with.
func (m *Manager) allocatedTo(p *corev1.Pod, c corev1.Container) corev1.ResourceRequirements {
	m.mu.Lock()
	r, ok := m.allocated[string(p.UID)+"/"+c.Name]
	m.mu.Unlock()
	if ok {
		return r
	}
	return m.appliedTo(p, c)
}

// allocatedAsSpec reports whether every container's allocation is what its spec asks for.
func (m *Manager) allocatedAsSpec(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		if !sameCPUMemory(m.allocatedTo(p, c), c.Resources) {
			return false
		}
	}
	return true
}

// pendingResize is a resize the node has not taken on, the pod generation it is for, and
// since when it waits.
type pendingResize struct {
	Rejection
	generation int64
	since      time.Time
}

// clearResize forgets a pod's pending resize: it was allocated.
func (m *Manager) clearResize(uid types.UID) {
	m.mu.Lock()
	delete(m.resizePending, uid)
	m.mu.Unlock()
}

// noResize forgets a pod's pending resize and allocation: its spec is back to what it runs
// with.
func (m *Manager) noResize(uid types.UID) {
	m.mu.Lock()
	delete(m.resizePending, uid)
	for k := range m.allocated {
		if strings.HasPrefix(k, string(uid)+"/") {
			delete(m.allocated, k)
		}
	}
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
		out.Spec.Containers[i].Resources = m.allocatedTo(p, p.Spec.Containers[i])
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

// setApplied records the resources a container now runs with.
func (m *Manager) setApplied(pod *corev1.Pod, c corev1.Container) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applied[string(pod.UID)+"/"+c.Name] = *c.Resources.DeepCopy()
}

// appliedTo is what a container runs with; one the agent did not start (it restarted since)
// is taken to run with its spec.
func (m *Manager) appliedTo(pod *corev1.Pod, c corev1.Container) corev1.ResourceRequirements {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.applied[string(pod.UID)+"/"+c.Name]
	if !ok {
		r = *c.Resources.DeepCopy()
		m.applied[string(pod.UID)+"/"+c.Name] = r
	}
	return r
}

// resized says whether the spec asks for other cpu or memory than the container runs with.
func (m *Manager) resized(pod *corev1.Pod, c corev1.Container) bool {
	return !sameCPUMemory(m.appliedTo(pod, c), c.Resources)
}

func sameCPUMemory(a, b corev1.ResourceRequirements) bool {
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if !sameQuantity(a.Requests, b.Requests, r) || !sameQuantity(a.Limits, b.Limits, r) {
			return false
		}
	}
	return true
}

func sameQuantity(a, b corev1.ResourceList, r corev1.ResourceName) bool {
	qa, oka := a[r]
	qb, okb := b[r]
	return oka == okb && qa.Cmp(qb) == 0
}

// restartOnResize says whether a resource that changed has resizePolicy RestartContainer.
func restartOnResize(c corev1.Container, applied corev1.ResourceRequirements) bool {
	for _, p := range c.ResizePolicy {
		if p.RestartPolicy != corev1.RestartContainer {
			continue
		}
		if !sameQuantity(applied.Requests, c.Resources.Requests, p.ResourceName) || !sameQuantity(applied.Limits, c.Resources.Limits, p.ResourceName) {
			return true
		}
	}
	return false
}
