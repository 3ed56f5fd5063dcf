package pods

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/agent/cgroups"
)

// deadlineExceeded ends a pod that ran longer than its activeDeadlineSeconds, as the
// kubelet: its containers are stopped and it fails with reason DeadlineExceeded.
func (m *Manager) deadlineExceeded(ctx context.Context, pod *corev1.Pod) error {
	m.recorder.Eventf(pod, corev1.EventTypeNormal, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
	codes, err := m.stopContainers(ctx, pod, gracePeriod(pod))
	if err != nil {
		return err
	}
	return m.writeTerminal(ctx, pod, codes, corev1.PodFailed, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
}

// terminate stops the pod's containers within the grace period (preStop hooks first),
// reports the pod's terminal phase (a pod kept by a finalizer must not look Running), removes
// its sandbox (which runs CNI DEL) and then deletes the pod object for good.
func (m *Manager) terminate(ctx context.Context, pod *corev1.Pod) error {
	codes, err := m.stopContainers(ctx, pod, gracePeriod(pod))
	if err != nil {
		return err
	}
	// An evicted pod keeps the status its eviction wrote.
	if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed && m.eviction(pod.UID) == nil {
		phase := corev1.PodSucceeded
		for _, c := range pod.Spec.Containers {
			if code, ok := codes[c.Name]; !ok || code != 0 {
				phase = corev1.PodFailed
			}
		}
		if err := m.writeTerminal(ctx, pod, codes, phase, "", ""); err != nil {
			return err
		}
	}
	if err := m.stopAll(ctx, pod.UID, 0, pod); err != nil {
		return err
	}
	m.forgetEviction(pod.UID, "")
	err = m.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// stopContainers stops the running containers of the pod's sandboxes within grace seconds,
// each after its preStop hook, and returns every container's exit code by name.
func (m *Manager) stopContainers(ctx context.Context, pod *corev1.Pod, grace int64) (map[string]int32, error) {
	resp, err := m.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(pod.UID)}}})
	if err != nil {
		return nil, err
	}
	specs := map[string]corev1.Container{}
	for _, c := range pod.Spec.Containers {
		specs[c.Name] = c
	}
	codes := map[string]int32{}
	var mu sync.Mutex
	for _, sb := range resp.Items {
		list, err := m.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: sb.Id}})
		if err != nil {
			return nil, err
		}
		// The containers first (their preStop hooks may need the sidecars), then the
		// sidecars and whatever else runs, as upstream orders termination.
		var first, then []*runtimeapi.Container
		for _, c := range list.Containers {
			if _, ok := specs[c.Metadata.Name]; ok {
				first = append(first, c)
			} else {
				then = append(then, c)
			}
		}
		for _, group := range [][]*runtimeapi.Container{first, then} {
			var wg sync.WaitGroup
			for _, c := range group {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
						m.recorder.Eventf(pod, corev1.EventTypeNormal, "Killing", "Stopping container %s", c.Metadata.Name)
						m.stopContainer(ctx, pod, m.containerSpec(pod, c.Metadata.Name), c.Id, grace)
					}
					if s, err := m.runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id}); err == nil {
						mu.Lock()
						if prev, ok := codes[c.Metadata.Name]; !ok || prev == 0 {
							codes[c.Metadata.Name] = s.Status.ExitCode
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
		}
	}
	return codes, nil
}

// writeTerminal reports the pod finished: phase (with reason and message, if any), every
// container terminated with its exit code, nothing ready.
func (m *Manager) writeTerminal(ctx context.Context, pod *corev1.Pod, codes map[string]int32, phase corev1.PodPhase, reason, message string, conds ...corev1.PodCondition) error {
	err := m.writeTerminalStrict(ctx, pod, codes, phase, reason, message, conds...)
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// writeTerminalStrict is writeTerminal that returns a conflict, for a caller that retries
// over a fresh copy.
func (m *Manager) writeTerminalStrict(ctx context.Context, pod *corev1.Pod, codes map[string]int32, phase corev1.PodPhase, reason, message string, conds ...corev1.PodCondition) error {
	if isStatic(pod) {
		return nil
	}
	cp := pod.DeepCopy()
	cp.Status.Phase, cp.Status.Reason, cp.Status.Message = phase, reason, message
	now := metav1.Now()
	for i := range cp.Status.ContainerStatuses {
		cs := &cp.Status.ContainerStatuses[i]
		code, ok := codes[cs.Name]
		if !ok {
			code = 137
		}
		if cs.State.Terminated == nil {
			r := "Error"
			if code == 0 {
				r = "Completed"
			}
			started := now
			if cs.State.Running != nil {
				started = cs.State.Running.StartedAt
			}
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: r,
				StartedAt: started, FinishedAt: now, ContainerID: cs.ContainerID}}
		}
		cs.Ready = false
		cs.Started = ptr.To(false)
	}
	setCond(&cp.Status, corev1.ContainersReady, false)
	setCond(&cp.Status, corev1.PodReady, false)
	for _, c := range conds {
		setCondReason(&cp.Status, c.Type, c.Status == corev1.ConditionTrue, c.Reason, c.Message)
	}
	_, err := m.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// stopAll stops the pod's containers (without hooks: the pod is gone or being replaced) and
// removes its sandboxes, cgroup, volumes and bookkeeping.
func (m *Manager) stopAll(ctx context.Context, uid types.UID, grace int64, pod *corev1.Pod) error {
	resp, err := m.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(uid)}}})
	if err != nil {
		return err
	}
	for _, sb := range resp.Items {
		list, err := m.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: sb.Id}})
		if err != nil {
			return err
		}
		var wg sync.WaitGroup
		for _, c := range list.Containers {
			if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				continue
			}
			if pod != nil {
				m.recorder.Eventf(pod, corev1.EventTypeNormal, "Killing", "Stopping container %s", c.Metadata.Name)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = m.runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.Id, Timeout: grace})
			}()
		}
		wg.Wait()
		if _, err := m.runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			return err
		}
		if _, err := m.runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			return err
		}
	}
	if err := cgroups.Remove(m.cgroupMounts, m.opts.CgroupRoot, string(uid)); err != nil {
		m.log.Warn("pod cgroup", "uid", uid, "err", err)
	}
	m.releaseCPUs(ctx, uid)
	_ = m.syncQOS(nil, false)
	m.prober.forget(string(uid))
	if m.opts.Volumes != nil {
		m.opts.Volumes.Cleanup(string(uid))
	}
	if m.opts.PodsDir != "" {
		// Only what the pod manager wrote: the volumes (a tmpfs among them) are the volume
		// manager's to remove.
		for _, name := range []string{"etc-hosts", "etc-hosts.tmp", "containers"} {
			_ = os.RemoveAll(filepath.Join(m.podDir(uid), name))
		}
		_ = os.Remove(m.podDir(uid)) // if nothing else is left
	}
	m.backoffs.forgetPod(uid)
	m.mu.Lock()
	delete(m.prepared, uid)
	delete(m.hosts, uid)
	for k := range m.applied {
		if strings.HasPrefix(k, string(uid)) {
			delete(m.applied, k)
		}
	}
	delete(m.resizePending, uid)
	for k := range m.allocated {
		if strings.HasPrefix(k, string(uid)+"/") {
			delete(m.allocated, k)
		}
	}
	m.mu.Unlock()
	return nil
}

// stopSandboxes stops a pod's ready sandboxes, which runs CNI DEL and frees the address.
func (m *Manager) stopSandboxes(ctx context.Context, uid types.UID) error {
	resp, err := m.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(uid)}}})
	if err != nil {
		return err
	}
	for _, sb := range resp.Items {
		if _, err := m.runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			return err
		}
	}
	return nil
}

// cleanupOrphans removes sandboxes of a pod that is gone from the API (deleted with grace 0).
func (m *Manager) cleanupOrphans(ctx context.Context, ns, name string) error {
	resp, err := m.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.name": name}}})
	if err != nil {
		return err
	}
	for _, sb := range resp.Items {
		if err := m.stopAll(ctx, types.UID(sb.Metadata.Uid), 0, nil); err != nil {
			return err
		}
	}
	return nil
}
