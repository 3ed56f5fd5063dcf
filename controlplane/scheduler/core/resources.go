package core

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Resources is what a pod requests or a node offers, in the units the scheduler compares:
// millicores for CPU, bytes for memory and ephemeral storage, a count for pods.
type Resources struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	Pods             int64
}

const (
	// Upstream scores pods without requests as if they asked for this much, so that a node full of
	// best-effort pods does not look empty to the least-allocated scorer. Only scoring uses them;
	// the fit filter compares real requests.
	defaultMilliCPURequest int64 = 100
	defaultMemoryRequest   int64 = 200 * 1024 * 1024

	// defaultAllowedPods stands in when a node does not publish allocatable pods; it is the
	// kubelet's default max-pods, so a node registered without it still behaves like a kubelet's.
	defaultAllowedPods int64 = 110
)

// scalarQty is one extended resource, hugepage size or attachable-volume count. They are rare,
// so a short slice beats a map on every pod.
type scalarQty struct {
	name  corev1.ResourceName
	value int64
}

const (
	hasCPU uint8 = 1 << iota
	hasMem
	hasEph
)

// resVec accumulates requests the way upstream's resource helper does on ResourceLists, but
// without allocating a map per container. has records which resources were named at all,
// because upstream distinguishes "not requested" (defaulted for scoring) from "requested zero".
type resVec struct {
	cpu, mem, eph int64
	has           uint8
	scalar        []scalarQty
}

func (v *resVec) scalarIndex(name corev1.ResourceName) int {
	for i := range v.scalar {
		if v.scalar[i].name == name {
			return i
		}
	}
	return -1
}

func (v *resVec) addScalar(name corev1.ResourceName, val int64) {
	if i := v.scalarIndex(name); i >= 0 {
		v.scalar[i].value += val
		return
	}
	v.scalar = append(v.scalar, scalarQty{name, val})
}

func (v *resVec) maxScalar(name corev1.ResourceName, val int64) {
	if i := v.scalarIndex(name); i >= 0 {
		if val > v.scalar[i].value {
			v.scalar[i].value = val
		}
		return
	}
	v.scalar = append(v.scalar, scalarQty{name, val})
}

func (v *resVec) setScalar(name corev1.ResourceName, val int64) {
	if i := v.scalarIndex(name); i >= 0 {
		v.scalar[i].value = val
		return
	}
	v.scalar = append(v.scalar, scalarQty{name, val})
}

// addList adds every resource the scheduler understands from rl.
func (v *resVec) addList(rl corev1.ResourceList) {
	for name, q := range rl {
		switch name {
		case corev1.ResourceCPU:
			v.cpu += q.MilliValue()
			v.has |= hasCPU
		case corev1.ResourceMemory:
			v.mem += q.Value()
			v.has |= hasMem
		case corev1.ResourceEphemeralStorage:
			v.eph += q.Value()
			v.has |= hasEph
		default:
			if isScalarResource(name) {
				v.addScalar(name, q.Value())
			}
		}
	}
}

// maxList raises every resource in v to at least its value in rl; a resource v has not seen
// yet takes rl's value outright.
func (v *resVec) maxList(rl corev1.ResourceList) {
	for name, q := range rl {
		switch name {
		case corev1.ResourceCPU:
			if x := q.MilliValue(); v.has&hasCPU == 0 || x > v.cpu {
				v.cpu = x
			}
			v.has |= hasCPU
		case corev1.ResourceMemory:
			if x := q.Value(); v.has&hasMem == 0 || x > v.mem {
				v.mem = x
			}
			v.has |= hasMem
		case corev1.ResourceEphemeralStorage:
			if x := q.Value(); v.has&hasEph == 0 || x > v.eph {
				v.eph = x
			}
			v.has |= hasEph
		default:
			if isScalarResource(name) {
				v.maxScalar(name, q.Value())
			}
		}
	}
}

func (v *resVec) add(o *resVec) {
	v.cpu += o.cpu
	v.mem += o.mem
	v.eph += o.eph
	v.has |= o.has
	for _, s := range o.scalar {
		v.addScalar(s.name, s.value)
	}
}

func (v *resVec) maxWith(o *resVec) {
	if o.has&hasCPU != 0 && (v.has&hasCPU == 0 || o.cpu > v.cpu) {
		v.cpu = o.cpu
	}
	if o.has&hasMem != 0 && (v.has&hasMem == 0 || o.mem > v.mem) {
		v.mem = o.mem
	}
	if o.has&hasEph != 0 && (v.has&hasEph == 0 || o.eph > v.eph) {
		v.eph = o.eph
	}
	v.has |= o.has
	for _, s := range o.scalar {
		v.maxScalar(s.name, s.value)
	}
}

// isScalarResource says whether the fit filter tracks name beyond cpu, memory and ephemeral
// storage: extended resources (vendor-domain names such as nvidia.com/gpu), hugepages,
// attachable volumes and kubernetes.io-prefixed native resources — the same set upstream's
// IsScalarResourceName accepts.
func isScalarResource(name corev1.ResourceName) bool {
	s := string(name)
	if strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) ||
		strings.HasPrefix(s, corev1.ResourceAttachableVolumesPrefix) ||
		strings.Contains(s, "kubernetes.io/") {
		return true
	}
	// Extended resources: domain-qualified, and usable as a quota name ("requests.<name>").
	if !strings.Contains(s, "/") || strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+s)) == 0
}

func isRestartable(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func findContainerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	for i := range pod.Status.InitContainerStatuses {
		if pod.Status.InitContainerStatuses[i].Name == name {
			return &pod.Status.InitContainerStatuses[i]
		}
	}
	return nil
}

// resizeInfeasible reports a pending in-place resize the kubelet declared impossible; the
// kubelet then keeps running the old size, so the spec must not count.
func resizeInfeasible(pod *corev1.Pod) bool {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodResizePending {
			return pod.Status.Conditions[i].Reason == corev1.PodReasonInfeasible
		}
	}
	return false
}

// containerVec is one container's effective requests. With in-place vertical scaling (GA) a
// running container may hold more than its spec asks for while a resize is in flight, so the
// larger of spec, actual and allocated counts, as upstream does; defCPU/defMem substitute the
// scoring defaults for a resource the container leaves unnamed.
func containerVec(pod *corev1.Pod, c *corev1.Container, useStatus, defCPU, defMem bool) resVec {
	var v resVec
	var cs *corev1.ContainerStatus
	if useStatus {
		cs = findContainerStatus(pod, c.Name)
	}
	if cs != nil && cs.Resources != nil {
		if !resizeInfeasible(pod) {
			v.maxList(c.Resources.Requests)
		}
		v.maxList(cs.Resources.Requests)
		v.maxList(cs.AllocatedResources)
	} else {
		v.addList(c.Resources.Requests)
	}
	if defCPU && v.has&hasCPU == 0 {
		v.cpu = defaultMilliCPURequest
		v.has |= hasCPU
	}
	if defMem && v.has&hasMem == 0 {
		v.mem = defaultMemoryRequest
		v.has |= hasMem
	}
	return v
}

func isPodLevelResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory ||
		strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

func podLevelRequestsSet(pod *corev1.Pod) bool {
	if pod.Spec.Resources == nil {
		return false
	}
	for name := range pod.Spec.Resources.Requests {
		if isPodLevelResource(name) {
			return true
		}
	}
	return false
}

// podVec aggregates a pod's requests following the sidecar KEP's formula, which is what the
// kubelet admits against: regular containers and restartable (sidecar) init containers run
// together and add up; each classic init container runs alone next to the sidecars started
// before it; the pod needs the larger of the two phases. Pod-level requests then replace the
// aggregate for the resources they name, and overhead (the sandbox's cost) is added on top.
func podVec(pod *corev1.Pod, defCPU, defMem bool) resVec {
	useStatus := len(pod.Status.ContainerStatuses)+len(pod.Status.InitContainerStatuses) > 0
	var total resVec
	for i := range pod.Spec.Containers {
		c := containerVec(pod, &pod.Spec.Containers[i], useStatus, defCPU, defMem)
		total.add(&c)
	}
	if len(pod.Spec.InitContainers) > 0 {
		var sidecars, initMax resVec
		for i := range pod.Spec.InitContainers {
			ic := &pod.Spec.InitContainers[i]
			if isRestartable(ic) {
				c := containerVec(pod, ic, useStatus, defCPU, defMem)
				total.add(&c)
				sidecars.add(&c)
				initMax.maxWith(&sidecars)
				continue
			}
			// Status resources only describe containers that keep running; a classic init
			// container's spec is what it will run with.
			c := containerVec(pod, ic, false, defCPU, defMem)
			c.add(&sidecars)
			initMax.maxWith(&c)
		}
		total.maxWith(&initMax)
	}
	if podLevelRequestsSet(pod) {
		for name, q := range pod.Spec.Resources.Requests {
			switch {
			case name == corev1.ResourceCPU:
				total.cpu = q.MilliValue()
				total.has |= hasCPU
			case name == corev1.ResourceMemory:
				total.mem = q.Value()
				total.has |= hasMem
			case isPodLevelResource(name):
				total.setScalar(name, q.Value())
			}
		}
	}
	if pod.Spec.Overhead != nil {
		total.addList(pod.Spec.Overhead)
	}
	return total
}

// podDemand is everything a pod takes from its node, computed once when the pod is added.
type podDemand struct {
	req     Resources   // real requests; Pods is 1
	scalar  []scalarQty // non-zero scalar requests only
	non0CPU int64       // requests with the scoring defaults filled in
	non0Mem int64
}

func demandOf(pod *corev1.Pod) podDemand {
	actual := podVec(pod, false, false)
	d := podDemand{req: Resources{MilliCPU: actual.cpu, Memory: actual.mem, EphemeralStorage: actual.eph, Pods: 1}}
	for _, s := range actual.scalar {
		if s.value != 0 {
			d.scalar = append(d.scalar, s)
		}
	}
	// With pod-level requests the defaults only stand in for a resource that neither the pod nor
	// any container names; otherwise every container lacking a request gets the defaults.
	defCPU, defMem := true, true
	if podLevelRequestsSet(pod) {
		defCPU, defMem = actual.has&hasCPU == 0, actual.has&hasMem == 0
	}
	if (defCPU || defMem) && !allContainersNameCPUAndMemory(pod) {
		non0 := podVec(pod, defCPU, defMem)
		d.non0CPU, d.non0Mem = non0.cpu, non0.mem
	} else {
		d.non0CPU, d.non0Mem = actual.cpu, actual.mem
	}
	return d
}

// PodRequests sums container requests (max with each init container, plus overhead), as
// upstream's resource fit does: sidecar init containers add to the running total, classic init
// containers only raise the floor, pod-level requests override the aggregate, and a running
// container's in-flight resize counts at its larger size. Pods is always 1.
func PodRequests(p *corev1.Pod) Resources {
	v := podVec(p, false, false)
	return Resources{MilliCPU: v.cpu, Memory: v.mem, EphemeralStorage: v.eph, Pods: 1}
}

// parseAllocatable reads a node's allocatable list into Resources plus scalar resources.
func parseAllocatable(rl corev1.ResourceList) (Resources, map[corev1.ResourceName]int64) {
	r := Resources{Pods: defaultAllowedPods}
	var scalar map[corev1.ResourceName]int64
	for name, q := range rl {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU = q.MilliValue()
		case corev1.ResourceMemory:
			r.Memory = q.Value()
		case corev1.ResourceEphemeralStorage:
			r.EphemeralStorage = q.Value()
		case corev1.ResourcePods:
			r.Pods = q.Value()
		default:
			if isScalarResource(name) {
				if scalar == nil {
					scalar = make(map[corev1.ResourceName]int64)
				}
				scalar[name] = q.Value()
			}
		}
	}
	return r, scalar
}
