package pods

import (
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/agent/cgroups"
)

// resources maps a container's requests and limits onto cgroup settings as the kubelet does:
// cpu request -> shares (1024 per core, at least 2), cpu limit -> quota over a 100 ms period
// (none when the node does not enforce CPU limits, --cpu-cfs-quota=false), memory limit ->
// the memory limit.
func resources(c corev1.Container, noCFSQuota bool) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{CpuShares: int64(cgroups.SharesFromMilliCPU(0))}
	if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
		r.CpuShares = int64(cgroups.SharesFromMilliCPU(q.MilliValue()))
	}
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok && !noCFSQuota {
		r.CpuPeriod = cgroups.CPUPeriod
		r.CpuQuota = cgroups.QuotaFromMilliCPU(q.MilliValue())
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
