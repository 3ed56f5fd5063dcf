package apiserver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestPickEndpoint(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: "ns"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}
	slice := func(ready bool, addr string) discoveryv1.EndpointSlice {
		return discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](8443)}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}}}
	}
	u, err := PickEndpoint(svc, []discoveryv1.EndpointSlice{slice(false, "10.244.1.2"), slice(true, "10.244.1.3")}, 443)
	if err != nil || u.String() != "https://10.244.1.3:8443" {
		t.Errorf("picked %v, %v", u, err)
	}
	if _, err := PickEndpoint(svc, []discoveryv1.EndpointSlice{slice(false, "10.244.1.2")}, 443); err == nil {
		t.Error("an unready endpoint was picked")
	}
	if _, err := PickEndpoint(svc, nil, 80); err == nil {
		t.Error("a port the service lacks resolved")
	}
}
