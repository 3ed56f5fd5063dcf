package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
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

// TestHeartbeatLease: the node's Lease is made in kube-node-lease, held by the node, owned by
// its Node (so it is collected with it), and renewed.
func TestHeartbeatLease(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1"}}
	c := fake.NewClientset(n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go Heartbeat(ctx, c, Options{Name: "n1"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var l *coordinationv1.Lease
	for ctx.Err() == nil {
		got, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "n1", metav1.GetOptions{})
		if err == nil && got.Spec.RenewTime != nil && len(got.OwnerReferences) == 1 {
			l = got
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if l == nil {
		t.Fatal("no lease")
	}
	if *l.Spec.HolderIdentity != "n1" || *l.Spec.LeaseDurationSeconds != 40 {
		t.Errorf("lease spec %+v", l.Spec)
	}
	if o := l.OwnerReferences[0]; o.Kind != "Node" || o.Name != "n1" || o.UID != "uid-1" {
		t.Errorf("owner %+v", o)
	}
}
