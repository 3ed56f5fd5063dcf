package pods

import (
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// resources maps a container's requests and limits onto cgroup settings as the kubelet does:
// cpu request -> shares (1024 per core, at least 2), cpu limit -> quota over a 100 ms period,
// memory limit -> the memory limit.
func resources(c corev1.Container) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{CpuShares: 2}
	if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
		r.CpuShares = max(q.MilliValue()*1024/1000, 2)
	}
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		r.CpuPeriod = 100000
		r.CpuQuota = max(q.MilliValue()*100, 1000)
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		r.MemoryLimitInBytes = q.Value()
	}
	return r
}

// securityContext passes the basic securityContext fields through to CRI.
func securityContext(pod *corev1.Pod, c corev1.Container) *runtimeapi.LinuxContainerSecurityContext {
	sc := &runtimeapi.LinuxContainerSecurityContext{}
	if ps := pod.Spec.SecurityContext; ps != nil {
		if ps.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *ps.RunAsUser}
		}
		if ps.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *ps.RunAsGroup}
		}
		sc.SupplementalGroups = append([]int64(nil), ps.SupplementalGroups...)
		// The fsGroup owns the pod's volumes; every container is in it, as upstream.
		if ps.FSGroup != nil {
			sc.SupplementalGroups = append(sc.SupplementalGroups, *ps.FSGroup)
		}
	}
	if cs := c.SecurityContext; cs != nil {
		if cs.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *cs.RunAsUser}
		}
		if cs.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *cs.RunAsGroup}
		}
		if cs.Privileged != nil {
			sc.Privileged = *cs.Privileged
		}
		if cs.AllowPrivilegeEscalation != nil {
			sc.NoNewPrivs = !*cs.AllowPrivilegeEscalation
		}
		if cs.ReadOnlyRootFilesystem != nil {
			sc.ReadonlyRootfs = *cs.ReadOnlyRootFilesystem
		}
		if caps := cs.Capabilities; caps != nil {
			sc.Capabilities = &runtimeapi.Capability{}
			for _, a := range caps.Add {
				sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(a))
			}
			for _, d := range caps.Drop {
				sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(d))
			}
		}
	}
	return sc
}
