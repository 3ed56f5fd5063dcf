// Package podqos classifies a pod into its quality-of-service class (Guaranteed, Burstable,
// BestEffort) by upstream's rule. The API server records the class in status.qosClass at
// creation; the agent needs it too, for pods the API server never saw (static pods read from
// manifests) and to place each pod's cgroup under its class's.
package podqos

import corev1 "k8s.io/api/core/v1"

// Class is upstream's rule: Guaranteed when every container (init containers included) has
// equal, non-zero cpu and memory requests and limits, BestEffort when none has any, Burstable
// otherwise.
func Class(spec *corev1.PodSpec) corev1.PodQOSClass {
	anySet, guaranteed := false, true
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range list {
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				req, hasReq := c.Resources.Requests[r]
				lim, hasLim := c.Resources.Limits[r]
				if (hasReq && !req.IsZero()) || (hasLim && !lim.IsZero()) {
					anySet = true
				}
				if !hasLim || lim.IsZero() || (hasReq && req.Cmp(lim) != 0) {
					guaranteed = false
				}
			}
		}
	}
	switch {
	case !anySet:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// Of is the pod's class as the API server recorded it (status.qosClass, which never changes
// after creation), or as Class computes it when none is recorded.
func Of(p *corev1.Pod) corev1.PodQOSClass {
	if p.Status.QOSClass != "" {
		return p.Status.QOSClass
	}
	return Class(&p.Spec)
}
