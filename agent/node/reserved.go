package node

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ResourcePID is the reservable resource "pid": tasks kept back from pods, as the kubelet's
// --system-reserved=pid=N. It is not published in the Node's capacity.
const ResourcePID corev1.ResourceName = "pid"

// reservable are the resources --kube-reserved and --system-reserved may name.
var reservable = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, ResourcePID}

// ParseReserved reads a --kube-reserved or --system-reserved value as the kubelet writes it,
// RESOURCE=QUANTITY pairs separated by commas ("cpu=200m,memory=512Mi,ephemeral-storage=1Gi,pid=1000");
// empty is nothing reserved.
func ParseReserved(s string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%q: want RESOURCE=QUANTITY, e.g. memory=512Mi", pair)
		}
		name := corev1.ResourceName(k)
		known := false
		for _, r := range reservable {
			known = known || r == name
		}
		if !known {
			return nil, fmt.Errorf("%q: cannot reserve %s (only cpu, memory, ephemeral-storage and pid)", pair, k)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s is given twice", k)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%q: %s is not a quantity: %w", pair, v, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%q: must not be negative", pair)
		}
		if name == ResourcePID && q.MilliValue()%1000 != 0 {
			return nil, fmt.Errorf("%q: pid is a whole number of tasks", pair)
		}
		out[name] = q
	}
	return out, nil
}

// PodsLimit is what the node's pods may use together: the capacity less every reservation
// (--kube-reserved and --system-reserved), never below zero — the kubelet's node allocatable
// before eviction thresholds, which it enforces on the cgroup that holds every pod. Only the
// resources capacity has are in it (pid when the caller adds the node's PID limit to it).
func PodsLimit(capacity corev1.ResourceList, reserved ...corev1.ResourceList) corev1.ResourceList {
	out := capacity.DeepCopy()
	for name, q := range out {
		for _, r := range reserved {
			if rq, ok := r[name]; ok {
				q.Sub(rq)
			}
		}
		if q.Sign() < 0 {
			q = *resource.NewQuantity(0, q.Format)
		}
		out[name] = q
	}
	return out
}
