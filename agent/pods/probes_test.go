package pods

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestTally(t *testing.T) {
	p := &corev1.Probe{SuccessThreshold: 2, FailureThreshold: 3}
	st := &probeState{}
	steps := []struct {
		success bool
		want    bool
	}{{true, false}, {true, true}, {false, true}, {false, true}, {false, false}, {true, false}, {true, true}}
	for i, s := range steps {
		if got := Tally(st, p, s.success); got != s.want {
			t.Fatalf("step %d (success=%v): verdict %v, want %v", i, s.success, got, s.want)
		}
	}
	// Zero thresholds behave as 1.
	st = &probeState{ok: true}
	if Tally(st, &corev1.Probe{}, false) {
		t.Fatal("one failure with threshold 0 (defaulted 1) must fail")
	}
}

// TestInitialDelayFromStart: a probe's initial delay counts from the container's start (what
// its status reports and upstream's conformance test measures from), read once per container
// instance, not from its creation.
func TestInitialDelayFromStart(t *testing.T) {
	dials := 0
	pr := newProber(nil, func(context.Context, string, string) (net.Conn, error) {
		dials++
		return nil, errors.New("refused")
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Status: corev1.PodStatus{PodIP: "192.0.2.7"}}
	c := corev1.Container{Name: "c"}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}},
		InitialDelaySeconds: 15, PeriodSeconds: 1, FailureThreshold: 1}
	reads := 0
	startedAgo := func(d time.Duration) func() time.Time {
		return func() time.Time { reads++; return time.Now().Add(-d) }
	}
	// Started 10 s ago (created long before, say): not due yet, however often it is asked.
	for range 3 {
		if ok, _, _ := pr.check(context.Background(), pod, c, "c1", startedAgo(10*time.Second), readiness, probe); ok {
			t.Fatal("ready before the initial delay")
		}
	}
	if dials != 0 || reads != 1 {
		t.Fatalf("before the delay: %d probes, start read %d times (want 0 and 1)", dials, reads)
	}
	// A new instance of the container, started 16 s ago: due at once.
	pr.check(context.Background(), pod, c, "c2", startedAgo(16*time.Second), readiness, probe)
	if dials != 1 || reads != 2 {
		t.Fatalf("after the delay: %d probes, start read %d times (want 1 and 2)", dials, reads)
	}
}
