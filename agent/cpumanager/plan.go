package cpumanager

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"

	"github.com/skiff-sh/skiff/internal/podqos"
)

// Assignment is the CPUs each container of a pod has to itself, by container name.
type Assignment map[string]cpuset.CPUSet

// State is who has which CPUs: the reserved CPUs (never given out) and each pod's
// assignment, by pod UID.
type State struct {
	Reserved cpuset.CPUSet
	Pods     map[string]Assignment
}

// Assigned is every CPU some container has to itself.
func (s State) Assigned() cpuset.CPUSet {
	out := cpuset.New()
	for _, a := range s.Pods {
		for _, cpus := range a {
			out = out.Union(cpus)
		}
	}
	return out
}

// Shared is the shared pool: the node's CPUs less those given out, the reserved included.
func (s State) Shared(t Topology) cpuset.CPUSet {
	return t.All().Difference(s.Assigned())
}

// Free is what may still be given out: the shared pool less the reserved CPUs.
func (s State) Free(t Topology) cpuset.CPUSet {
	return s.Shared(t).Difference(s.Reserved)
}

// Exclusive is how many CPUs the container gets to itself: its CPU request, when the pod is
// Guaranteed and the request a whole number of CPUs; otherwise 0 and it runs on the shared
// pool. Pods with pod-level resources share the pool too, as under the kubelet's static
// policy.
func Exclusive(pod *corev1.Pod, c *corev1.Container) int {
	if pod.Spec.Resources != nil || podqos.Of(pod) != corev1.PodQOSGuaranteed {
		return 0
	}
	q, ok := c.Resources.Requests[corev1.ResourceCPU]
	if !ok {
		return 0
	}
	if m := q.MilliValue(); m > 0 && m%1000 == 0 {
		return int(m / 1000)
	}
	return 0
}

// Plan chooses the CPUs of every container of pod that gets CPUs to itself (Exclusive),
// from those s leaves free, and returns nil when none does. Init containers run one after
// another and before the others, so the CPUs of one that has finished go to the containers
// after it first, as the kubelet reuses them; a sidecar (an init container that keeps
// running) keeps its own. It does no I/O.
func Plan(t Topology, s State, pod *corev1.Pod) (Assignment, error) {
	free := s.Free(t)
	reusable := cpuset.New()
	out := Assignment{}
	assign := func(c *corev1.Container) (cpuset.CPUSet, error) {
		n := Exclusive(pod, c)
		if n == 0 {
			return cpuset.New(), nil
		}
		fromReused, err := Take(t, reusable, min(n, reusable.Size()))
		if err != nil {
			return fromReused, err
		}
		fromFree, err := Take(t, free, n-fromReused.Size())
		if err != nil {
			return fromFree, NotEnoughError{Requested: n, Available: free.Size() + reusable.Size()}
		}
		reusable, free = reusable.Difference(fromReused), free.Difference(fromFree)
		cpus := fromReused.Union(fromFree)
		out[c.Name] = cpus
		return cpus, nil
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cpus, err := assign(c)
		if err != nil {
			return nil, err
		}
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			reusable = reusable.Union(cpus)
		}
	}
	for i := range pod.Spec.Containers {
		if _, err := assign(&pod.Spec.Containers[i]); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
