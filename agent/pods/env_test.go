package pods

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestServiceEnv(t *testing.T) {
	env := ServiceEnv([]*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "my-web"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20",
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}, {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "headless"}, Spec: corev1.ServiceSpec{ClusterIP: "None", Ports: []corev1.ServicePort{{Port: 1}}}},
	})
	for k, v := range map[string]string{
		"MY_WEB_SERVICE_HOST": "10.96.0.20", "MY_WEB_SERVICE_PORT": "80", "MY_WEB_SERVICE_PORT_HTTP": "80",
		"MY_WEB_PORT": "tcp://10.96.0.20:80", "MY_WEB_PORT_53_UDP": "udp://10.96.0.20:53", "MY_WEB_PORT_53_UDP_PROTO": "udp",
		"MY_WEB_PORT_80_TCP_ADDR": "10.96.0.20", "MY_WEB_PORT_80_TCP_PORT": "80",
	} {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if _, ok := env["HEADLESS_SERVICE_HOST"]; ok {
		t.Error("headless services get no variables")
	}
}

func TestResources(t *testing.T) {
	c := corev1.Container{Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}
	r := resources(c, false)
	if r.CpuShares != 256 || r.CpuQuota != 50000 || r.CpuPeriod != 100000 || r.MemoryLimitInBytes != 64<<20 {
		t.Fatalf("resources %+v", r)
	}
	if r := resources(corev1.Container{}, false); r.CpuShares != 2 || r.CpuQuota != 0 || r.MemoryLimitInBytes != 0 {
		t.Fatalf("best effort %+v", r)
	}
	// --cpu-cfs-quota=false: the limit is not enforced, the weight and memory are.
	if r := resources(c, true); r.CpuShares != 256 || r.CpuQuota != 0 || r.CpuPeriod != 0 || r.MemoryLimitInBytes != 64<<20 {
		t.Fatalf("without CFS quota %+v", r)
	}
}
