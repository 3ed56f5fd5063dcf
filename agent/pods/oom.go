package pods

import (
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/skiff-sh/skiff/internal/podqos"
)

// The kubelet's OOM score adjustments: the kernel's OOM killer takes the highest score first.
const (
	guaranteedOOMScoreAdj = -997
	besteffortOOMScoreAdj = 1000
	// systemCriticalPriority is the priority of system-cluster-critical and above.
	systemCriticalPriority = 2000000000
)

// oomScoreAdj is the container's oom_score_adj as the kubelet computes it: Guaranteed pods
// (and system-node-critical ones) last, BestEffort pods first, and a Burstable container by
// the share of the node's memory it requests — 1000 less a thousandth for each thousandth
// requested, between 3 and 999 — so a container using more than it asked for goes before one
// that keeps to its request. A sidecar scores no higher than the pod's smallest container,
// and a pod-level memory request not taken by its containers is shared among them. It does
// no I/O.
func oomScoreAdj(pod *corev1.Pod, c *corev1.Container, memoryCapacity int64) int64 {
	if nodeCritical(pod) {
		return guaranteedOOMScoreAdj
	}
	switch podqos.Of(pod) {
	case corev1.PodQOSGuaranteed:
		return guaranteedOOMScoreAdj
	case corev1.PodQOSBestEffort:
		return besteffortOOMScoreAdj
	}
	if memoryCapacity <= 0 {
		return besteffortOOMScoreAdj - 1
	}
	extra := unclaimedPodMemory(pod)
	score := 1000 - 1000*(c.Resources.Requests.Memory().Value()+extra)/memoryCapacity
	if isSidecarOf(pod, c) && len(pod.Spec.Containers) > 0 {
		smallest := pod.Spec.Containers[0].Resources.Requests.Memory().Value()
		for _, o := range pod.Spec.Containers[1:] {
			smallest = min(smallest, o.Resources.Requests.Memory().Value())
		}
		score = min(score, 1000-1000*(smallest+extra)/memoryCapacity)
	}
	switch {
	case score < 1000+guaranteedOOMScoreAdj:
		return 1000 + guaranteedOOMScoreAdj // Burstable always above Guaranteed
	case score == besteffortOOMScoreAdj:
		return besteffortOOMScoreAdj - 1 // and below BestEffort
	}
	return score
}

// unclaimedPodMemory is each container's share of the pod-level memory request that its
// containers' own requests leave over (0 without pod-level resources).
func unclaimedPodMemory(pod *corev1.Pod) int64 {
	if pod.Spec.Resources == nil || pod.Spec.Resources.Requests.Memory().IsZero() {
		return 0
	}
	n := int64(len(pod.Spec.Containers) + len(pod.Spec.InitContainers))
	claimed := resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{})[corev1.ResourceMemory]
	return max(pod.Spec.Resources.Requests.Memory().Value()-claimed.Value(), 0) / n
}

// isSidecarOf reports whether c is one of the pod's sidecars: an init container that keeps
// running.
func isSidecarOf(pod *corev1.Pod, c *corev1.Container) bool {
	if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		return false
	}
	for _, ic := range pod.Spec.InitContainers {
		if ic.Name == c.Name {
			return true
		}
	}
	return false
}

// nodeCritical reports a system-node-critical pod: critical (a static pod, a mirror, or of
// system-critical priority) and of that priority class.
func nodeCritical(pod *corev1.Pod) bool {
	if pod.Spec.PriorityClassName != "system-node-critical" {
		return false
	}
	_, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]
	src, hasSrc := pod.Annotations[staticSource]
	static := hasSrc && src != "api"
	return static || mirror || (pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority)
}
