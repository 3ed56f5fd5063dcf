package agent

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/agent/node"
	"github.com/skiff-sh/skiff/dataplane/services"
)

// TestServiceMapsCondition: the node says nothing before the proxy's first sync or without
// the proxy, False while every frontend fits, and True naming the full map once one does
// not; the condition is posted beside the kubelet's own.
func TestServiceMapsCondition(t *testing.T) {
	if c := serviceMapsCondition(true, nil); c != nil {
		t.Fatalf("before the first sync: %+v", c)
	}
	roomy := &services.MapStatus{Fill: []services.MapFill{{Map: "skiff_backends", Entries: 3, Capacity: 10}}}
	if c := serviceMapsCondition(false, roomy); c != nil {
		t.Fatalf("without the proxy: %+v", c)
	}
	c := serviceMapsCondition(true, roomy)
	if len(c) != 1 || c[0].Type != ServiceMapsFull || c[0].Status != corev1.ConditionFalse {
		t.Fatalf("room: %+v", c)
	}
	full := &services.MapStatus{Fill: []services.MapFill{{Map: "skiff_backends", Entries: 12, Capacity: 10}},
		Dropped: []string{"ns/web:80/TCP at 10.96.0.9:80/TCP"}}
	c = serviceMapsCondition(true, full)
	if len(c) != 1 || c[0].Status != corev1.ConditionTrue || c[0].Reason != "ServiceMapFull" ||
		!strings.Contains(c[0].Message, "skiff_backends (10 entries)") || !strings.Contains(c[0].Message, "ns/web:80/TCP") {
		t.Fatalf("full: %+v", c)
	}
	st := node.Status(node.Options{Name: "n", Conditions: func() []corev1.NodeCondition { return c }})
	found := false
	for _, cond := range st.Conditions {
		found = found || cond.Type == ServiceMapsFull && cond.Status == corev1.ConditionTrue
	}
	if !found || len(st.Conditions) != 6 {
		t.Fatalf("node status conditions %+v", st.Conditions)
	}
}
