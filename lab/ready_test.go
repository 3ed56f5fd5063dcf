package lab

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestReady(t *testing.T) {
	readyTrue := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	for _, tc := range []struct {
		name string
		node corev1.Node
		want bool
	}{
		{"no conditions yet", corev1.Node{}, false},
		{"Ready=False", corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}}}, false},
		{"Ready", corev1.Node{Status: corev1.NodeStatus{Conditions: readyTrue}}, true},
		{"Ready, not-ready taint not lifted yet", corev1.Node{
			Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{Conditions: readyTrue}}, false},
		{"Ready, unreachable taint", corev1.Node{
			Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}},
			Status: corev1.NodeStatus{Conditions: readyTrue}}, false},
		{"Ready, the master's own taint", corev1.Node{
			Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{Conditions: readyTrue}}, true},
	} {
		if got := ready(&tc.node); got != tc.want {
			t.Errorf("%s: ready = %v, want %v", tc.name, got, tc.want)
		}
	}
}
