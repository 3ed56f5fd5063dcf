// Package downward computes the values the downward API exposes to a container — pod fields
// (fieldRef) and the container's resources (resourceFieldRef) — for environment variables and
// downwardAPI volume files alike, with the kubelet's rules: labels and annotations as sorted
// key="value" lines, resource values divided by their divisor and rounded up, and limits that
// are not set reported as the node's allocatable.
package downward

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// FieldValue is the value of a fieldRef path of the pod. podIPs are the sandbox's addresses
// (the status may not have them yet when a container starts), hostIP the node's.
func FieldValue(pod *corev1.Pod, path string, podIPs []string, hostIP string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return hostIP, nil
	case "status.hostIPs":
		return hostIP, nil
	case "status.podIP":
		if len(podIPs) > 0 {
			return podIPs[0], nil
		}
		return pod.Status.PodIP, nil
	case "status.podIPs":
		if len(podIPs) > 0 {
			return strings.Join(podIPs, ","), nil
		}
		var ips []string
		for _, ip := range pod.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	}
	if k, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[k], nil
	}
	if k, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[k], nil
	}
	return "", fmt.Errorf("unsupported fieldRef %q", path)
}

// subscript parses `prefix['key']`.
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}

// formatMap renders labels or annotations as the kubelet does: one key="value" line each,
// sorted by key, values quoted as Go strings.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	return b.String()
}

// ResourceValue is the value of a resourceFieldRef for container c: limits.* or requests.*
// of cpu, memory, ephemeral-storage or hugepages-*, divided by the divisor (1 when zero) and
// rounded up. A limit that is not set is the node's allocatable, as the kubelet reports it.
func ResourceValue(c *corev1.Container, ref *corev1.ResourceFieldSelector, allocatable corev1.ResourceList) (string, error) {
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported resourceFieldRef %q", ref.Resource)
	}
	res := corev1.ResourceName(name)
	if res != corev1.ResourceCPU && res != corev1.ResourceMemory && res != corev1.ResourceEphemeralStorage &&
		!strings.HasPrefix(name, corev1.ResourceHugePagesPrefix) {
		return "", fmt.Errorf("unsupported resourceFieldRef %q", ref.Resource)
	}
	var q resource.Quantity
	var set bool
	if kind == "limits" {
		q, set = c.Resources.Limits[res]
		if !set {
			q, set = allocatable[res]
		}
	} else {
		q, set = c.Resources.Requests[res]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if !set {
		q = resource.Quantity{}
	}
	if res == corev1.ResourceCPU {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

// ContainerByName finds a container (init, regular) of the pod; nil if none.
func ContainerByName(pod *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}
