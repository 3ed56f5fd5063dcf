package services

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func lbLocal(name string, hc int32) *corev1.Service {
	s := svc(name, "10.96.0.20", corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP})
	s.Spec.Type = corev1.ServiceTypeLoadBalancer
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	s.Spec.HealthCheckNodePort = hc
	return s
}

func TestHealthChecks(t *testing.T) {
	notLocal := lbLocal("cluster", 31001)
	notLocal.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	nodePort := lbLocal("np", 31002)
	nodePort.Spec.Type = corev1.ServiceTypeNodePort
	no := false
	got := HealthChecks([]*corev1.Service{lbLocal("web", 31000), notLocal, nodePort, lbLocal("unset", 0)},
		[]*discoveryv1.EndpointSlice{slice("web", "http", 8080, corev1.ProtocolTCP,
			ep{addr: "10.244.1.1", node: "n1"}, ep{addr: "10.244.1.2", node: "n1"}, ep{addr: "10.244.1.3", node: "n1", ready: &no}, ep{addr: "10.244.2.1", node: "n2"})}, "n1")
	if fmt.Sprint(got) != "[{default web 31000 2}]" {
		t.Errorf("HealthChecks = %v", got)
	}
}
