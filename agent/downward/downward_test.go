package downward

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFieldValue(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1",
			Labels: map[string]string{"b": "2", "a": "1"}, Annotations: map[string]string{"x": `say "hi"`}},
		Spec:   corev1.PodSpec{NodeName: "n1", ServiceAccountName: "sa"},
		Status: corev1.PodStatus{PodIP: "10.0.0.9", PodIPs: []corev1.PodIP{{IP: "10.0.0.9"}}},
	}
	for _, tc := range []struct {
		path   string
		podIPs []string
		want   string
		err    bool
	}{
		{path: "metadata.name", want: "p"},
		{path: "metadata.namespace", want: "ns"},
		{path: "metadata.uid", want: "u1"},
		{path: "metadata.labels", want: "a=\"1\"\nb=\"2\""},
		{path: "metadata.annotations", want: `x="say \"hi\""`},
		{path: "metadata.labels['b']", want: "2"},
		{path: "metadata.annotations['x']", want: `say "hi"`},
		{path: "metadata.labels['missing']", want: ""},
		{path: "spec.nodeName", want: "n1"},
		{path: "spec.serviceAccountName", want: "sa"},
		{path: "status.hostIP", want: "192.0.2.1"},
		{path: "status.hostIPs", want: "192.0.2.1"},
		{path: "status.podIP", want: "10.0.0.9"},
		// The sandbox's address wins: the status is written after the containers start.
		{path: "status.podIP", podIPs: []string{"10.0.0.7"}, want: "10.0.0.7"},
		{path: "status.podIPs", podIPs: []string{"10.0.0.7", "fd00::7"}, want: "10.0.0.7,fd00::7"},
		{path: "status.podIPs", want: "10.0.0.9"},
		{path: "spec.containers", err: true},
		{path: "metadata.labels['x'", err: true},
	} {
		got, err := FieldValue(pod, tc.path, tc.podIPs, "192.0.2.1")
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("FieldValue(%s, %v) = %q, %v; want %q (error %v)", tc.path, tc.podIPs, got, err, tc.want, tc.err)
		}
	}
}

func TestResourceValue(t *testing.T) {
	q := resource.MustParse
	limited := &corev1.Container{Resources: corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceCPU: q("1250m"), corev1.ResourceMemory: q("64Mi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: q("250m"), corev1.ResourceMemory: q("32Mi")},
	}}
	unlimited := &corev1.Container{}
	alloc := corev1.ResourceList{corev1.ResourceCPU: q("4"), corev1.ResourceMemory: q("8Gi"), corev1.ResourceEphemeralStorage: q("100Gi")}
	for _, tc := range []struct {
		c        *corev1.Container
		resource string
		divisor  string
		want     string
		err      bool
	}{
		// upstream's e2e: a 1250m limit is "2" (rounded up), a 250m request "1".
		{c: limited, resource: "limits.cpu", want: "2"},
		{c: limited, resource: "requests.cpu", want: "1"},
		{c: limited, resource: "limits.cpu", divisor: "1m", want: "1250"},
		{c: limited, resource: "requests.cpu", divisor: "100m", want: "3"},
		{c: limited, resource: "limits.memory", want: "67108864"},
		{c: limited, resource: "requests.memory", want: "33554432"},
		{c: limited, resource: "limits.memory", divisor: "1Mi", want: "64"},
		{c: limited, resource: "requests.memory", divisor: "1Gi", want: "1"},
		// No limit: the node's allocatable.
		{c: unlimited, resource: "limits.cpu", want: "4"},
		{c: unlimited, resource: "limits.memory", want: "8589934592"},
		{c: unlimited, resource: "limits.ephemeral-storage", divisor: "1Gi", want: "100"},
		{c: unlimited, resource: "requests.cpu", want: "0"},
		{c: unlimited, resource: "requests.memory", want: "0"},
		{c: unlimited, resource: "limits.hugepages-2Mi", want: "0"},
		{c: limited, resource: "limits.gpu", err: true},
		{c: limited, resource: "cpu", err: true},
		{c: limited, resource: "status.cpu", err: true},
	} {
		ref := &corev1.ResourceFieldSelector{Resource: tc.resource}
		if tc.divisor != "" {
			ref.Divisor = q(tc.divisor)
		}
		got, err := ResourceValue(tc.c, ref, alloc)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ResourceValue(%s / %s) = %q, %v; want %q (error %v)", tc.resource, tc.divisor, got, err, tc.want, tc.err)
		}
	}
}
