package pods

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func portPod(name string, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Ports: ports}}}}
}

func cpuPod(name, cpu string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
}

func TestAdmit(t *testing.T) {
	tcp := func(port int32, ip string) corev1.ContainerPort {
		return corev1.ContainerPort{ContainerPort: port, HostPort: port, HostIP: ip}
	}
	udp := func(port int32) corev1.ContainerPort {
		return corev1.ContainerPort{ContainerPort: port, HostPort: port, Protocol: corev1.ProtocolUDP}
	}
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: resource.MustParse("3")}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		running []*corev1.Pod
		reason  string
	}{
		{"free port", portPod("new", tcp(8080, "")), []*corev1.Pod{portPod("old", tcp(9090, ""))}, ""},
		{"same port, any address", portPod("new", tcp(8080, "")), []*corev1.Pod{portPod("old", tcp(8080, ""))}, "NodePorts"},
		{"same port, one address against any", portPod("new", tcp(8080, "10.0.0.1")), []*corev1.Pod{portPod("old", tcp(8080, "0.0.0.0"))}, "NodePorts"},
		{"same port, other addresses", portPod("new", tcp(8080, "10.0.0.1")), []*corev1.Pod{portPod("old", tcp(8080, "10.0.0.2"))}, ""},
		{"same port, other protocol", portPod("new", udp(8080)), []*corev1.Pod{portPod("old", tcp(8080, ""))}, ""},
		{"cpu fits", cpuPod("new", "1"), []*corev1.Pod{cpuPod("old", "1")}, ""},
		{"cpu does not fit", cpuPod("new", "1500m"), []*corev1.Pod{cpuPod("old", "1")}, "OutOfcpu"},
		{"pods capacity", cpuPod("new", "0"), []*corev1.Pod{cpuPod("a", "0"), cpuPod("b", "0"), cpuPod("c", "0")}, "OutOfpods"},
	} {
		rej := Admit(tc.pod, tc.running, alloc)
		got := ""
		if rej != nil {
			got = rej.Reason
		}
		if got != tc.reason {
			t.Errorf("%s: rejection %+v, want %q", tc.name, rej, tc.reason)
		}
	}
	rej := Admit(cpuPod("new", "1500m"), []*corev1.Pod{cpuPod("old", "1")}, alloc)
	if rej.Message != "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000" {
		t.Errorf("message %q", rej.Message)
	}
	if rej := Admit(portPod("new", tcp(1, "")), []*corev1.Pod{portPod("old", tcp(1, ""))}, nil); rej == nil ||
		rej.Message != "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports" {
		t.Errorf("ports without allocatable: %+v", rej)
	}
}
