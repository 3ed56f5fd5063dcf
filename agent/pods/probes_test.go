package pods

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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

// startedRuntime answers ContainerStatus with a start time; nothing else is called.
type startedRuntime struct {
	runtimeapi.RuntimeServiceClient
	startedAt time.Time
}

func (r startedRuntime) ContainerStatus(context.Context, *runtimeapi.ContainerStatusRequest, ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{StartedAt: r.startedAt.UnixNano()}}, nil
}

// TestProbeDelayFromRuntimeStart: the manager takes a running container's start from the
// runtime's status, not from its creation. Created a minute ago but started 5 s ago, a
// container with a 15 s initial delay is not probed yet (counting from creation, it was).
func TestProbeDelayFromRuntimeStart(t *testing.T) {
	dials := 0
	rt := startedRuntime{startedAt: time.Now().Add(-5 * time.Second)}
	m := &Manager{runtime: rt, recorder: record.NewFakeRecorder(10), prober: newProber(rt, func(context.Context, string, string) (net.Conn, error) {
		dials++
		return nil, errors.New("refused")
	})}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Status: corev1.PodStatus{PodIP: "192.0.2.7"}}
	c := corev1.Container{Name: "c", ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}},
		InitialDelaySeconds: 15, PeriodSeconds: 1}}
	rc := &runtimeapi.Container{Id: "c1", State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: time.Now().Add(-time.Minute).UnixNano()}
	m.probe(context.Background(), pod, c, rc)
	if dials != 0 {
		t.Fatalf("probed %d times 5 s after the start, inside the 15 s initial delay", dials)
	}
	rt.startedAt = time.Now().Add(-16 * time.Second)
	m.runtime = rt
	rc.Id = "c2" // a new instance, started 16 s ago
	m.probe(context.Background(), pod, c, rc)
	if dials != 1 {
		t.Fatalf("%d probes 16 s after the start, want 1", dials)
	}
}
