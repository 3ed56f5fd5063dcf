package pods

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPrivilegedContainerMakesThePrivilegedSandbox(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want bool
	}{
		{"none", corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}, false},
		{"explicitly not", corev1.PodSpec{Containers: []corev1.Container{{Name: "c", SecurityContext: &corev1.SecurityContext{Privileged: &no}}}}, false},
		{"a container", corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b", SecurityContext: &corev1.SecurityContext{Privileged: &yes}}}}, true},
		{"an init container", corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i", SecurityContext: &corev1.SecurityContext{Privileged: &yes}}},
			Containers: []corev1.Container{{Name: "c"}}}, true},
	} {
		if got := hasPrivilegedContainer(&corev1.Pod{Spec: tc.spec}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
