package endpointslice

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEndpointsChanged: every field Desired reads makes an update relevant; status updates
// that touch none of them do not.
func TestEndpointsChanged(t *testing.T) {
	base := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u", Labels: map[string]string{"app": "a"}},
		Spec: corev1.PodSpec{NodeName: "n1", Hostname: "h", Subdomain: "s"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}}
	irrelevant := map[string]func(p *corev1.Pod){
		"annotation":     func(p *corev1.Pod) { p.Annotations = map[string]string{"x": "y"} },
		"scheduled cond": func(p *corev1.Pod) { p.Status.Conditions[1].Status = corev1.ConditionFalse },
		"container state": func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: 3}}
		},
		"resource version": func(p *corev1.Pod) { p.ResourceVersion = "9" },
	}
	for name, f := range irrelevant {
		cur := base.DeepCopy()
		f(cur)
		if EndpointsChanged(base, cur) {
			t.Errorf("%s: relevant, want not", name)
		}
	}
	relevant := map[string]func(p *corev1.Pod){
		"label":       func(p *corev1.Pod) { p.Labels["app"] = "b" },
		"label added": func(p *corev1.Pod) { p.Labels["tier"] = "x" },
		"ip":          func(p *corev1.Pod) { p.Status.PodIP = "10.0.0.2" },
		"phase":       func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded },
		"ready":       func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse },
		"deleting":    func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now },
		"node":        func(p *corev1.Pod) { p.Spec.NodeName = "n2" },
		"hostname":    func(p *corev1.Pod) { p.Spec.Hostname = "h2" },
		"subdomain":   func(p *corev1.Pod) { p.Spec.Subdomain = "s2" },
		"uid":         func(p *corev1.Pod) { p.UID = "u2" },
	}
	for name, f := range relevant {
		cur := base.DeepCopy()
		f(cur)
		if !EndpointsChanged(base, cur) {
			t.Errorf("%s: not relevant, want relevant", name)
		}
	}
}
