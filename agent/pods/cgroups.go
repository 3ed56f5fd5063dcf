package pods

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/agent/cgroups"
)

// ensurePodCgroup makes the pod's cgroup in its QoS tier with the pod's limits, before its
// sandbox is created under it, and reweighs the burstable tier for it (as the kubelet's pod
// container manager and QoS container manager do). With FlatCgroups it does nothing: the
// runtime creates the cgroup.
func (m *Manager) ensurePodCgroup(pod *corev1.Pod) error {
	if m.opts.FlatCgroups {
		return nil
	}
	// As the kubelet, a tier that cannot be reweighed is logged (syncQOS) and the pod still
	// starts: ApplyPod makes the tier if it is missing.
	_ = m.syncQOS(pod, false)
	return cgroups.ApplyPod(m.cgroupMounts, cgroups.Parent(m.opts.CgroupRoot, pod, true), m.podResources(pod), false)
}

// podResources are the pod cgroup's limits under the node's policy.
func (m *Manager) podResources(pod *corev1.Pod) cgroups.PodResources {
	// A pod with CPUs of its own has no CFS quota on them, as its containers have none.
	exclusive := m.opts.CPUs != nil && m.opts.CPUs.HasExclusive(pod.UID)
	return cgroups.ResourcesForPod(pod, cgroups.PodPolicy{MaxPIDs: m.opts.PodMaxPIDs, NoCFSQuota: m.opts.NoCFSQuota || exclusive})
}

// syncQOS creates the QoS tiers and sets the burstable tier's weight to the CPU its active
// pods request (with extra, a pod about to start, counted too), unless that weight is the
// one it last wrote and not force. A failure is logged and returned.
func (m *Manager) syncQOS(extra *corev1.Pod, force bool) error {
	if m.opts.FlatCgroups {
		return nil
	}
	pods := m.ActivePods()
	if extra != nil {
		found := false
		for _, p := range pods {
			found = found || p.UID == extra.UID
		}
		if !found {
			pods = append(pods, extra)
		}
	}
	shares := cgroups.BurstableShares(pods)
	m.qosMu.Lock()
	defer m.qosMu.Unlock()
	if shares == m.qosShares && !force {
		return nil // written already: a burst of pod starts writes the tiers once
	}
	err := cgroups.EnsureQOS(m.cgroupMounts, m.opts.CgroupRoot, shares)
	if err != nil {
		m.log.Warn("QoS cgroups", "err", err)
		m.qosShares = 0
		return err
	}
	m.qosShares = shares
	return nil
}

// syncQOSPeriodically runs syncQOS at start (the node's pods as the agent finds them after a
// restart) and then every minute, as the kubelet's QoS container manager does, so the burstable tier's weight
// follows its pods even when no pod of this agent's starts or ends.
func (m *Manager) syncQOSPeriodically(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		_ = m.syncQOS(nil, true)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// resizeRequested reports whether any running container's spec asks for other cpu or memory
// than it runs with.
func (m *Manager) resizeRequested(pod *corev1.Pod, latest map[string]*runtimeapi.Container) bool {
	for _, c := range pod.Spec.Containers {
		if cur := latest[c.Name]; cur != nil && cur.State == runtimeapi.ContainerState_CONTAINER_RUNNING && m.resized(pod, c) {
			return true
		}
	}
	return false
}

// resizing reports whether any running container's spec asks for other resources than it
// runs with: the pod's cgroup follows its containers' in-place resize.
func (m *Manager) resizing(pod *corev1.Pod, latest map[string]*runtimeapi.Container) bool {
	if m.opts.FlatCgroups {
		return false
	}
	for _, c := range pod.Spec.Containers {
		if cur := latest[c.Name]; cur != nil && cur.State == runtimeapi.ContainerState_CONTAINER_RUNNING && m.resized(pod, c) {
			// A pod started before the agent placed pods by class keeps its cgroup where it is.
			return cgroups.At(m.cgroupMounts, cgroups.Parent(m.opts.CgroupRoot, pod, true))
		}
	}
	return false
}

// resizePodCgroup writes the pod cgroup's limits for its resized spec: before the containers
// are resized only those that grow (loosenOnly; cgroup v1 refuses a container CPU quota above
// its pod's), after them all, the burstable tier reweighed. A failure is reported as the
// kubelet reports a resize it could not make.
func (m *Manager) resizePodCgroup(pod *corev1.Pod, loosenOnly bool) {
	err := cgroups.ApplyPod(m.cgroupMounts, cgroups.Parent(m.opts.CgroupRoot, pod, true), m.podResources(pod), loosenOnly)
	if err != nil {
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "ResizeFailed", "Resizing the pod's cgroup failed: %v", err)
	}
	if !loosenOnly {
		_ = m.syncQOS(nil, false)
	}
}
