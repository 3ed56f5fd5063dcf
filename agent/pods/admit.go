package pods

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/skiff-sh/skiff/agent/eviction"
)

// Rejection is why the node refuses a pod, as the kubelet's admission says it: the reason
// (a predicate's name, or OutOfcpu, OutOfmemory, OutOfpods) and the message.
type Rejection struct{ Reason, Message string }

// Admit is the kubelet's admission of a pod bound to this node, against the pods the node
// already runs: host ports must be free, and the requests must fit what is allocatable. The
// scheduler checks the same, but a pod can be bound by name (spec.nodeName) or race another;
// the node has the last word. It does no I/O.
func Admit(pod *corev1.Pod, running []*corev1.Pod, allocatable corev1.ResourceList) *Rejection {
	var used []hostPort
	for _, p := range running {
		used = append(used, hostPorts(p)...)
	}
	for _, want := range hostPorts(pod) {
		for _, u := range used {
			if want.conflicts(u) {
				return &Rejection{Reason: "NodePorts", Message: "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"}
			}
		}
	}
	if len(allocatable) == 0 {
		return nil
	}
	if capacity, ok := allocatable[corev1.ResourcePods]; ok && int64(len(running)+1) > capacity.Value() {
		return &Rejection{Reason: "OutOfpods", Message: fmt.Sprintf("Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d", len(running), capacity.Value())}
	}
	want := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	sum := corev1.ResourceList{}
	for _, p := range running {
		for k, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			cur := sum[k]
			cur.Add(q)
			sum[k] = cur
		}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, ok := want[name]
		capacity, limited := allocatable[name]
		if !ok || !limited || req.IsZero() {
			continue
		}
		u := sum[name]
		r, used, c := req.Value(), u.Value(), capacity.Value()
		if name == corev1.ResourceCPU {
			r, used, c = req.MilliValue(), u.MilliValue(), capacity.MilliValue()
		}
		if r+used > c {
			return &Rejection{Reason: "OutOf" + string(name),
				Message: fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", name, r, used, c)}
		}
	}
	return nil
}

// hostPort is one host port a pod asks for; an empty IP is every address.
type hostPort struct {
	protocol corev1.Protocol
	ip       string
	port     int32
}

// conflicts is upstream's rule: the same protocol and port, on the same address or where
// either side takes every address.
func (h hostPort) conflicts(o hostPort) bool {
	return h.protocol == o.protocol && h.port == o.port && (h.ip == "" || o.ip == "" || h.ip == o.ip)
}

func hostPorts(p *corev1.Pod) []hostPort {
	var out []hostPort
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, port := range c.Ports {
				if port.HostPort <= 0 {
					continue
				}
				hp := hostPort{protocol: port.Protocol, ip: port.HostIP, port: port.HostPort}
				if hp.protocol == "" {
					hp.protocol = corev1.ProtocolTCP
				}
				if hp.ip == "0.0.0.0" || hp.ip == "::" {
					hp.ip = ""
				}
				out = append(out, hp)
			}
		}
	}
	return out
}

// admit decides, once per pod, whether this node runs it; a rejected pod is failed with
// the kubelet's reason. Pods the node already started (a start time, or admitted before
// this agent restarted) are not asked again.
func (m *Manager) admit(ctx context.Context, pod *corev1.Pod) (bool, error) {
	m.admitMu.Lock()
	if m.admitted[pod.UID] || pod.Status.StartTime != nil {
		m.admitMu.Unlock()
		return true, nil
	}
	pods, err := m.lister.List(everything())
	if err != nil {
		m.admitMu.Unlock()
		return false, err
	}
	var running []*corev1.Pod
	live := map[types.UID]bool{}
	for _, p := range pods {
		live[p.UID] = true
	}
	for uid := range m.admitted {
		if !live[uid] {
			delete(m.admitted, uid) // deleted since
		}
	}
	for _, p := range pods {
		if p.UID == pod.UID || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if m.admitted[p.UID] || p.Status.StartTime != nil {
			running = append(running, m.allocatedPod(p)) // a resize it waits for is not its yet
		}
	}
	var rej *Rejection
	if m.opts.Pressure != nil {
		// A node under pressure refuses what would make it worse: the kubelet's eviction
		// admission, its first admission handler.
		if r := eviction.Admit(pod, m.opts.Pressure()); r != nil {
			rej = &Rejection{Reason: r.Reason, Message: r.Message}
		}
	}
	if rej == nil {
		rej = Admit(pod, running, m.opts.Allocatable)
	}
	tookCPUs := false
	if rej == nil && m.opts.CPUs != nil {
		// The CPU manager's admission, as the kubelet's topology manager runs it: the
		// containers that get CPUs to themselves get them now, or the pod is refused.
		var err error
		if tookCPUs, err = m.opts.CPUs.Admit(pod); err != nil {
			rej = &Rejection{Reason: "UnexpectedAdmissionError", Message: fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)}
		}
	}
	if rej == nil {
		m.admitted[pod.UID] = true
	}
	m.admitMu.Unlock()
	if tookCPUs {
		m.reconcileCPUs(ctx) // the shared pool's containers leave the pod's CPUs before it starts
	}
	if rej == nil {
		return true, nil
	}
	m.recorder.Event(pod, corev1.EventTypeWarning, rej.Reason, rej.Message)
	return false, m.writeTerminal(ctx, pod, nil, corev1.PodFailed, rej.Reason, "Pod was rejected: "+rej.Message)
}

// forgetAdmitted drops a pod's admission once it is gone.
func (m *Manager) forgetAdmitted(uid types.UID) {
	m.admitMu.Lock()
	delete(m.admitted, uid)
	m.admitMu.Unlock()
}
