package pods

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
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
