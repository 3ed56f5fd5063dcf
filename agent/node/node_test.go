package node

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func readyCondition(t *testing.T, st corev1.NodeStatus) corev1.NodeCondition {
	t.Helper()
	for _, c := range st.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	t.Fatal("no Ready condition")
	return corev1.NodeCondition{}
}

// TestReadyFollowsHealth: a node whose agent has a part down is NotReady, and says which and
// why, as the kubelet's KubeletNotReady does; healthy (or without a health check) it is Ready.
func TestReadyFollowsHealth(t *testing.T) {
	if c := readyCondition(t, Status(Options{Name: "n"})); c.Status != corev1.ConditionTrue || c.Reason != "KubeletReady" {
		t.Fatalf("no health check: %+v", c)
	}
	if c := readyCondition(t, Status(Options{Name: "n", Health: func() error { return nil }})); c.Status != corev1.ConditionTrue {
		t.Fatalf("healthy: %+v", c)
	}
	c := readyCondition(t, Status(Options{Name: "n", Health: func() error {
		return errors.New("bgp: listen tcp :179: address already in use (restarted 2 times)")
	}}))
	if c.Status != corev1.ConditionFalse || c.Reason != "KubeletNotReady" ||
		c.Message != "skiff agent: bgp: listen tcp :179: address already in use (restarted 2 times)" {
		t.Fatalf("unhealthy: %+v", c)
	}
}
