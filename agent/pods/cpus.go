package pods

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/agent/cgroups"
)

// containerResources are the cgroup settings a container runs with (resources), its OOM
// score adjustment, and under the static CPU manager policy the CPUs it runs on: its own,
// with no CFS quota (as the kubelet since 1.33: the CPUs are its alone, a quota would only
// throttle it on them), or the shared pool.
func (m *Manager) containerResources(pod *corev1.Pod, c corev1.Container) *runtimeapi.LinuxContainerResources {
	r := resources(c, m.opts.NoCFSQuota)
	r.OomScoreAdj = oomScoreAdj(pod, &c, m.opts.MemoryCapacity)
	if m.opts.CPUs != nil {
		r.CpusetCpus = m.opts.CPUs.CPUs(pod.UID, c.Name).String()
		if !m.opts.CPUs.Exclusive(pod.UID, c.Name).IsEmpty() {
			r.CpuPeriod, r.CpuQuota = cgroups.CPUPeriod, -1
		}
	}
	return r
}

// takeCPUs gives the pod's containers that get CPUs to themselves their CPUs, if they have
// none yet (admission does it first; a pod whose assignment the node lost gets it here), and
// moves the shared pool's containers off them before anything runs there.
func (m *Manager) takeCPUs(ctx context.Context, pod *corev1.Pod) error {
	if m.opts.CPUs == nil {
		return nil
	}
	took, err := m.opts.CPUs.Admit(pod)
	if took {
		m.reconcileCPUs(ctx)
	}
	return err
}

// releaseCPUs gives a removed pod's CPUs back to the shared pool, and the shared pool's
// containers the use of them.
func (m *Manager) releaseCPUs(ctx context.Context, uid types.UID) {
	if m.opts.CPUs == nil {
		return
	}
	released, err := m.opts.CPUs.Retain(func(u types.UID) bool { return u != uid })
	if err != nil {
		m.log.Warn("CPU manager checkpoint", "err", err)
	}
	if released {
		m.reconcileCPUs(ctx)
	}
}

// reconcileCPUsPeriodically runs reconcileCPUs every period (the kubelet's
// --cpu-manager-reconcile-period), which catches what no event brings: a pod finished, an
// agent restarted over containers it did not start.
func (m *Manager) reconcileCPUsPeriodically(ctx context.Context, period time.Duration) {
	if m.opts.CPUs == nil {
		return
	}
	if period <= 0 {
		period = 10 * time.Second
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		m.reconcileCPUs(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reconcileCPUs gives back the CPUs of pods that are finished or gone, then puts every
// running container of this node's pods on its CPUs where it is not yet: a container of the
// shared pool follows the pool as it shrinks and grows. A container the runtime refuses to
// move is logged and tried again next time.
func (m *Manager) reconcileCPUs(ctx context.Context) {
	if !m.synced.Load() {
		return // no pods to tell live from gone yet; the periodic run comes once they are
	}
	m.cpuMu.Lock()
	defer m.cpuMu.Unlock()
	pods, err := m.lister.List(everything())
	if err != nil {
		return
	}
	live := map[types.UID]*corev1.Pod{}
	for _, p := range pods {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			live[p.UID] = p
		}
	}
	for _, p := range m.static.all() {
		live[p.UID] = p
	}
	if _, err := m.opts.CPUs.Retain(func(uid types.UID) bool { return live[uid] != nil }); err != nil {
		m.log.Warn("CPU manager checkpoint", "err", err)
	}
	resp, err := m.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		m.log.Warn("CPU manager: listing containers", "err", err)
		return
	}
	seen := map[string]bool{}
	for _, rc := range resp.Containers {
		seen[rc.Id] = true
		pod := live[types.UID(rc.Labels["io.kubernetes.pod.uid"])]
		if pod == nil || rc.Metadata == nil {
			continue
		}
		want := m.opts.CPUs.CPUs(pod.UID, rc.Metadata.Name).String()
		m.mu.Lock()
		have := m.cpusApplied[rc.Id]
		m.mu.Unlock()
		if have == want {
			continue
		}
		c := m.containerSpec(pod, rc.Metadata.Name)
		c.Resources = m.appliedTo(pod, c)
		r := m.containerResources(pod, c)
		if _, err := m.runtime.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: rc.Id, Linux: r}); err != nil {
			m.log.Warn("CPU manager: moving a container", "pod", pod.Namespace+"/"+pod.Name, "container", rc.Metadata.Name, "cpus", want, "err", err)
			continue
		}
		m.setCPUsApplied(rc.Id, want)
	}
	m.mu.Lock()
	for id := range m.cpusApplied {
		if !seen[id] {
			delete(m.cpusApplied, id)
		}
	}
	m.mu.Unlock()
}

// setCPUsApplied records the CPUs a container was put on.
func (m *Manager) setCPUsApplied(id, cpus string) {
	if m.opts.CPUs == nil {
		return
	}
	m.mu.Lock()
	m.cpusApplied[id] = cpus
	m.mu.Unlock()
}
