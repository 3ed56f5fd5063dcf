package informers

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeViewPod keeps of a pod only what a node's cluster-wide readers use: cluster DNS (name,
// namespace, phase, addresses), network policy (labels, addresses, host network, named
// ports) and the service proxy's host ports (node, creation time, ports, host IP). A node
// holds every pod of the cluster — the peers its policies name are anywhere — so this is
// what an agent costs per remote pod: ~1 KiB instead of the ~10–25 KiB of a decoded pod
// with its volumes, env, probes, conditions and container statuses. The node's own pods
// come whole from the pod manager's own watch, never from here.
func NodeViewPod(p *corev1.Pod) *corev1.Pod {
	slim := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName, HostNetwork: p.Spec.HostNetwork},
		Status: corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP, PodIPs: p.Status.PodIPs, HostIP: p.Status.HostIP},
	}
	slim.Spec.InitContainers = portsOnly(p.Spec.InitContainers)
	slim.Spec.Containers = portsOnly(p.Spec.Containers)
	return slim
}

// portsOnly keeps the containers that declare ports, with their ports (and, for sidecars,
// the restart policy that makes an init container's ports live).
func portsOnly(cs []corev1.Container) []corev1.Container {
	var out []corev1.Container
	for _, c := range cs {
		if len(c.Ports) > 0 {
			out = append(out, corev1.Container{Name: c.Name, Ports: c.Ports, RestartPolicy: c.RestartPolicy})
		}
	}
	return out
}

// nodeView is the Shared factory's transform: managed fields stripped from everything, pods
// cut to NodeViewPod.
func nodeView(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		return NodeViewPod(p), nil
	}
	return StripManagedFields(obj)
}
