package pods

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

func everything() labels.Selector { return labels.Everything() }

// containerStatus converts a CRI container into the API's status.
func (m *Manager) containerStatus(ctx context.Context, pod *corev1.Pod, spec corev1.Container, c *runtimeapi.Container, waitingReason string) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: spec.Name, Image: spec.Image}
	if c == nil {
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: waitingReason}
		return cs
	}
	cs.RestartCount = int32(c.Metadata.Attempt)
	cs.ContainerID = "containerd://" + c.Id
	cs.ImageID = c.ImageRef
	s, err := m.runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id})
	if err != nil {
		// A read that failed (a busy runtime) is no change of state: the container keeps
		// the status last reported for it, as the kubelet keeps its cached one.
		for _, prev := range append(append([]corev1.ContainerStatus(nil), pod.Status.ContainerStatuses...), pod.Status.InitContainerStatuses...) {
			if prev.Name == spec.Name && prev.ContainerID == cs.ContainerID {
				return prev
			}
		}
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
		return cs
	}
	st := s.Status
	switch st.State {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Unix(0, st.StartedAt))}
		// What the container runs with, as upstream reports it: its cpu and memory requests and
		// limits (a resize not yet done differs from the spec), and the requests allocated.
		cs.Resources, cs.AllocatedResources = appliedResources(corev1.Container{Resources: m.appliedTo(pod, spec)})
		cs.Ready = true
		started := true
		cs.Started = &started
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		reason := st.Reason
		if reason == "" {
			reason = "Error"
			if st.ExitCode == 0 {
				reason = "Completed"
			}
		}
		msg := st.Message
		if m := terminationMessage(st); m != "" {
			msg = m
		}
		term := &corev1.ContainerStateTerminated{ExitCode: st.ExitCode, Reason: reason, Message: msg,
			StartedAt: metav1.NewTime(time.Unix(0, st.StartedAt)), FinishedAt: metav1.NewTime(time.Unix(0, st.FinishedAt)), ContainerID: cs.ContainerID}
		cs.State.Terminated = term
	default:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
	}
	return cs
}

// writeStatus computes the pod's status from CRI and writes it if it changed; a container with
// an image error of this sync waits with its reason and message.
func (m *Manager) writeStatus(ctx context.Context, pod *corev1.Pod, sb *runtimeapi.PodSandboxStatus, latest map[string]*runtimeapi.Container, waiting string,
	waitErrs map[string]*waitingError) error {
	// A pod with init containers reports its containers PodInitializing from the start, as
	// the kubelet does: ContainerCreating is for pods without any.
	if waiting == "ContainerCreating" && len(pod.Spec.InitContainers) > 0 {
		waiting = "PodInitializing"
	}
	target := pod
	if isStatic(pod) {
		// A static pod's status is published on its mirror, once the mirror exists.
		mirror, err := m.lister.Pods(pod.Namespace).Get(pod.Name)
		if err != nil || mirror.DeletionTimestamp != nil {
			return nil
		}
		target = mirror
	}
	s := target.Status.DeepCopy()
	// The spec this status describes (upstream's pod observedGeneration).
	s.ObservedGeneration = target.Generation
	s.HostIP = m.hostIP()
	s.HostIPs = nil
	for _, ip := range m.opts.HostIPs {
		s.HostIPs = append(s.HostIPs, corev1.HostIP{IP: ip})
	}
	if ips := m.sandboxIPs(pod, sb); len(ips) > 0 && sb != nil {
		s.PodIP = ips[0]
		s.PodIPs = nil
		for _, ip := range ips {
			s.PodIPs = append(s.PodIPs, corev1.PodIP{IP: ip})
		}
	}
	if s.StartTime == nil {
		now := metav1.Now()
		s.StartTime = &now
	}
	reason := waiting
	if reason == "" {
		reason = "ContainerCreating"
	}
	// Init containers: done ones are ready; a failed one waits for its restart (its run kept
	// as the last state) unless the pod never restarts; the rest wait for their turn.
	var statuses, initStatuses []corev1.ContainerStatus
	var incomplete []string
	initFailed := false
	var unready []string
	for _, c := range pod.Spec.InitContainers {
		cs := imageWaiting(m.containerStatus(ctx, pod, c, latest[c.Name], "PodInitializing"), waitErrs[c.Name])
		if isSidecar(c) {
			// A running sidecar is initialized; it is ready by its readiness probe, and the
			// pod is ready only with it.
			if cs.State.Running != nil {
				cs.Ready = m.prober.ready(pod, c, latest[c.Name].Id)
				cs.Started = ptr.To(true)
			} else {
				cs.Ready = false
				incomplete = append(incomplete, c.Name)
				if t := cs.State.Terminated; t != nil {
					cs.LastTerminationState = cs.State
					cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
						Message: "back-off restarting failed container " + c.Name}}
				}
			}
			if !cs.Ready {
				unready = append(unready, c.Name)
			}
			initStatuses = append(initStatuses, cs)
			continue
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode == 0 {
			cs.Ready = true
		} else {
			cs.Ready = false
			incomplete = append(incomplete, c.Name)
			if t != nil {
				if pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
					initFailed = true
				} else {
					cs.LastTerminationState = cs.State
					cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
						Message: "back-off restarting failed container " + c.Name}}
				}
			}
		}
		if cs.State.Running != nil {
			cs.Started = ptr.To(true)
		}
		initStatuses = append(initStatuses, cs)
	}
	running, ready, exited, failed := 0, 0, 0, 0
	for _, c := range pod.Spec.Containers {
		cs := imageWaiting(m.containerStatus(ctx, pod, c, latest[c.Name], reason), waitErrs[c.Name])
		if cs.Ready && latest[c.Name] != nil {
			cs.Ready = m.prober.ready(pod, c, latest[c.Name].Id)
		}
		if t := cs.State.Terminated; t != nil && (pod.Spec.RestartPolicy == corev1.RestartPolicyAlways ||
			(pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && t.ExitCode != 0)) {
			// Waiting for a restart after a crash.
			last := cs.State
			cs.LastTerminationState = last
			cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: "back-off restarting failed container " + c.Name}}
		}
		for _, prev := range target.Status.ContainerStatuses {
			if prev.Name == cs.Name && prev.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated == nil {
				cs.LastTerminationState = prev.LastTerminationState
			}
		}
		switch {
		case cs.State.Running != nil:
			running++
			if cs.Ready {
				ready++
			}
		case cs.State.Terminated != nil:
			exited++
			if cs.State.Terminated.ExitCode != 0 {
				failed++
			}
		}
		if !cs.Ready {
			unready = append(unready, c.Name)
		}
		statuses = append(statuses, cs)
	}
	s.ContainerStatuses, s.InitContainerStatuses = statuses, initStatuses
	s.EphemeralContainerStatuses = nil
	for _, ec := range pod.Spec.EphemeralContainers {
		cs := imageWaiting(m.containerStatus(ctx, pod, corev1.Container(ec.EphemeralContainerCommon), latest[ec.Name], "ContainerCreating"), waitErrs[ec.Name])
		cs.Ready = false // ephemeral containers are never ready, as upstream
		s.EphemeralContainerStatuses = append(s.EphemeralContainerStatuses, cs)
	}
	n := len(pod.Spec.Containers)
	switch {
	case initFailed:
		s.Phase = corev1.PodFailed
	case len(incomplete) > 0:
		s.Phase = corev1.PodPending
	case exited == n && failed == 0 && pod.Spec.RestartPolicy != corev1.RestartPolicyAlways:
		s.Phase = corev1.PodSucceeded
	case exited == n && failed > 0 && pod.Spec.RestartPolicy == corev1.RestartPolicyNever:
		s.Phase = corev1.PodFailed
	case running > 0 || exited > 0:
		s.Phase = corev1.PodRunning
	default:
		s.Phase = corev1.PodPending
	}
	setCond(s, corev1.PodScheduled, true)
	if len(incomplete) > 0 {
		setCondReason(s, corev1.PodInitialized, false, "ContainersNotInitialized", fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(incomplete, " ")))
	} else {
		setCond(s, corev1.PodInitialized, true)
	}
	if len(unready) > 0 {
		msg := fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
		setCondReason(s, corev1.ContainersReady, false, "ContainersNotReady", msg)
		setCondReason(s, corev1.PodReady, false, "ContainersNotReady", msg)
	} else {
		setCond(s, corev1.ContainersReady, true)
		setCond(s, corev1.PodReady, true)
	}
	if sb != nil {
		setCond(s, corev1.PodReadyToStartContainers, true)
	}
	setResizeCondition(s, m.resizeCondition(pod.UID))
	if apiequality.Semantic.DeepEqual(stripTimes(*s), stripTimes(target.Status)) {
		return nil
	}
	cp := target.DeepCopy()
	cp.Status = *s
	_, err := m.client.CoreV1().Pods(target.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func setCond(s *corev1.PodStatus, t corev1.PodConditionType, ok bool) {
	setCondReason(s, t, ok, "", "")
}

// setCondReason sets a condition with its reason and message (upstream gives false
// Initialized, ContainersReady and Ready conditions both), stamping the transition time only
// when the status changes.
func setCondReason(s *corev1.PodStatus, t corev1.PodConditionType, ok bool, reason, message string) {
	status := corev1.ConditionFalse
	if ok {
		status = corev1.ConditionTrue
	}
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			if s.Conditions[i].Status != status {
				s.Conditions[i].Status = status
				s.Conditions[i].LastTransitionTime = metav1.Now()
			}
			s.Conditions[i].Reason, s.Conditions[i].Message = reason, message
			return
		}
	}
	s.Conditions = append(s.Conditions, corev1.PodCondition{Type: t, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.Now()})
}

// stripTimes drops fields that change without meaning, so unchanged pods are not rewritten.
func stripTimes(s corev1.PodStatus) corev1.PodStatus {
	s = *s.DeepCopy()
	for i := range s.Conditions {
		s.Conditions[i].LastTransitionTime = metav1.Time{}
		s.Conditions[i].LastProbeTime = metav1.Time{}
	}
	s.StartTime = nil
	return s
}

// imageWaiting makes a container whose image is not there wait with the pull's reason, its last
// run (if any) kept as its last state.
func imageWaiting(cs corev1.ContainerStatus, e *waitingError) corev1.ContainerStatus {
	if e == nil {
		return cs
	}
	if cs.State.Terminated != nil {
		cs.LastTerminationState = cs.State
	}
	cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: e.Reason, Message: e.Message}}
	cs.Ready = false
	return cs
}

// appliedResources are a running container's cpu and memory requests and limits (what its
// cgroup was given) and its allocated requests.
func appliedResources(c corev1.Container) (*corev1.ResourceRequirements, corev1.ResourceList) {
	pick := func(l corev1.ResourceList) corev1.ResourceList {
		var out corev1.ResourceList
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := l[r]; ok {
				if out == nil {
					out = corev1.ResourceList{}
				}
				out[r] = q
			}
		}
		return out
	}
	req := &corev1.ResourceRequirements{Requests: pick(c.Resources.Requests), Limits: pick(c.Resources.Limits)}
	var alloc corev1.ResourceList
	if len(c.Resources.Requests) > 0 {
		alloc = c.Resources.Requests.DeepCopy()
	}
	return req, alloc
}
