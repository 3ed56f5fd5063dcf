package podqos

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func res(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func ctr(req, lim corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
}

func TestClass(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spec  corev1.PodSpec
		class corev1.PodQOSClass
	}{
		{"nothing set", corev1.PodSpec{Containers: []corev1.Container{ctr(nil, nil)}}, corev1.PodQOSBestEffort},
		{"zero quantities", corev1.PodSpec{Containers: []corev1.Container{ctr(res("cpu", "0"), res("memory", "0"))}}, corev1.PodQOSBestEffort},
		{"other resources only", corev1.PodSpec{Containers: []corev1.Container{ctr(res("ephemeral-storage", "1Gi"), nil)}}, corev1.PodQOSBestEffort},
		{"limits equal requests", corev1.PodSpec{Containers: []corev1.Container{ctr(res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi"))}}, corev1.PodQOSGuaranteed},
		{"limits only (requests default to them)", corev1.PodSpec{Containers: []corev1.Container{ctr(nil, res("cpu", "1", "memory", "1Gi"))}}, corev1.PodQOSGuaranteed},
		{"1000m equals 1", corev1.PodSpec{Containers: []corev1.Container{ctr(res("cpu", "1000m", "memory", "1Gi"), res("cpu", "1", "memory", "1024Mi"))}}, corev1.PodQOSGuaranteed},
		{"cpu only", corev1.PodSpec{Containers: []corev1.Container{ctr(res("cpu", "1"), res("cpu", "1"))}}, corev1.PodQOSBurstable},
		{"request below limit", corev1.PodSpec{Containers: []corev1.Container{ctr(res("cpu", "500m", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi"))}}, corev1.PodQOSBurstable},
		{"one container of two unset", corev1.PodSpec{Containers: []corev1.Container{ctr(nil, res("cpu", "1", "memory", "1Gi")), ctr(nil, nil)}}, corev1.PodQOSBurstable},
		{"init container unset", corev1.PodSpec{InitContainers: []corev1.Container{ctr(nil, nil)}, Containers: []corev1.Container{ctr(nil, res("cpu", "1", "memory", "1Gi"))}}, corev1.PodQOSBurstable},
		{"only an init container requests", corev1.PodSpec{InitContainers: []corev1.Container{ctr(res("memory", "1Mi"), nil)}, Containers: []corev1.Container{ctr(nil, nil)}}, corev1.PodQOSBurstable},
	} {
		if got := Class(&tc.spec); got != tc.class {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.class)
		}
	}
}

func TestOfPrefersStatus(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{ctr(nil, nil)}}}
	if got := Of(p); got != corev1.PodQOSBestEffort {
		t.Fatalf("computed: got %s", got)
	}
	p.Status.QOSClass = corev1.PodQOSBurstable
	if got := Of(p); got != corev1.PodQOSBurstable {
		t.Fatalf("recorded: got %s, want the status's Burstable", got)
	}
}
