package pods

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestOOMScoreAdj(t *testing.T) {
	const capacity = 10 << 30
	res := func(kv ...string) corev1.ResourceRequirements {
		r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
		for i := 0; i+2 < len(kv); i += 3 {
			l := r.Requests
			if kv[i] == "limit" {
				l = r.Limits
			}
			l[corev1.ResourceName(kv[i+1])] = resource.MustParse(kv[i+2])
		}
		return r
	}
	pod := func(containers ...corev1.Container) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: containers}}
	}
	c := func(name string, r corev1.ResourceRequirements) corev1.Container {
		return corev1.Container{Name: name, Resources: r}
	}
	guaranteed := res("request", "cpu", "1", "request", "memory", "1Gi", "limit", "cpu", "1", "limit", "memory", "1Gi")
	tenth := res("request", "memory", "1Gi")
	critical := pod(c("c", tenth))
	critical.Annotations = map[string]string{staticSource: "file"}
	critical.Spec.PriorityClassName = "system-node-critical"
	notCritical := pod(c("c", tenth))
	notCritical.Spec.PriorityClassName = "system-node-critical" // the class alone, at no priority
	sidecar := pod(c("app", res("request", "memory", "2Gi")))
	sidecar.Spec.InitContainers = []corev1.Container{{Name: "side", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: res("request", "memory", "100Mi")}}
	podLevel := pod(c("a", res("request", "memory", "1Gi")), c("b", res("request", "cpu", "100m")))
	podLevel.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("3Gi")}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		c    *corev1.Container
		want int64
	}{
		{"guaranteed", pod(c("c", guaranteed)), nil, -997},
		{"besteffort", pod(c("c", corev1.ResourceRequirements{})), nil, 1000},
		{"a tenth of the memory", pod(c("c", tenth)), nil, 900},
		{"no memory request: just below besteffort", pod(c("c", res("request", "cpu", "100m"))), nil, 999},
		{"more than the node: just above guaranteed", pod(c("c", res("request", "memory", "20Gi"))), nil, 3},
		{"node-critical static pod", critical, nil, -997},
		{"system-node-critical class without the priority", notCritical, nil, 900},
		{"sidecar no higher than the smallest container", sidecar, &sidecar.Spec.InitContainers[0], 800},
		{"pod-level request shared among containers", podLevel, &podLevel.Spec.Containers[1], 1000 - 1000*(1<<30)/capacity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctr := tc.c
			if ctr == nil {
				ctr = &tc.pod.Spec.Containers[0]
			}
			if got := oomScoreAdj(tc.pod, ctr, capacity); got != tc.want {
				t.Errorf("oomScoreAdj = %d, want %d", got, tc.want)
			}
		})
	}
}
