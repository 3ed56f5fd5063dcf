package bgp

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/bgp/config"
)

func TestServicePrefixes(t *testing.T) {
	lb := func(name, ip string, local bool, class *string) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class, ExternalIPs: []string{"192.0.2.9"}}}
		if local {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}
		if ip != "" {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		}
		return s
	}
	slice := func(svc, node string, ready bool) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: svc + "-" + node,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.1"}, NodeName: ptr.To(node), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}}}
	}
	cluster := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ci"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}
	cluster.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.18.200.99"}}
	services := []*corev1.Service{
		lb("cluster", "198.18.200.1", false, nil),
		lb("ours", "198.18.200.2", false, ptr.To(config.LoadBalancerClass)),
		lb("theirs", "198.18.200.3", false, ptr.To("example.com/lb")),
		lb("local-here", "198.18.200.4", true, nil),
		lb("local-elsewhere", "198.18.200.5", true, nil),
		lb("local-not-ready", "198.18.200.6", true, nil),
		lb("pending", "", false, nil),
		lb("dup", "198.18.200.1", false, nil),
		lb("six", "2001:2:0:200::1", false, nil),
		lb("mapped", "::ffff:198.18.200.7", false, nil),
		cluster,
	}
	slices := []*discoveryv1.EndpointSlice{slice("local-here", "n1", true), slice("local-elsewhere", "n2", true), slice("local-not-ready", "n1", false)}
	got := fmt.Sprint(ServicePrefixes("n1", services, slices))
	if want := "[198.18.200.1/32 198.18.200.2/32 198.18.200.4/32 2001:2:0:200::1/128]"; got != want {
		t.Errorf("n1 advertises %s, want %s", got, want)
	}
	got = fmt.Sprint(ServicePrefixes("n2", services, slices))
	if want := "[198.18.200.1/32 198.18.200.2/32 198.18.200.5/32 2001:2:0:200::1/128]"; got != want {
		t.Errorf("n2 advertises %s, want %s", got, want)
	}
}
