package pressure

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/agent/eviction"
)

// noImageFs is an image service with no image file system to report.
type noImageFs struct{ runtimeapi.ImageServiceClient }

func (noImageFs) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest, ...grpc.CallOption) (*runtimeapi.ImageFsInfoResponse, error) {
	return nil, errors.New("no image file system here")
}

// recordingEvictor runs the given pods and records which were evicted.
type recordingEvictor struct {
	pods    []*corev1.Pod
	evicted []string
}

func (r *recordingEvictor) ActivePods() []*corev1.Pod { return r.pods }

func (r *recordingEvictor) Evict(_ context.Context, p *corev1.Pod, _ string, _ bool, _ int64) error {
	r.evicted = append(r.evicted, p.Name)
	return nil
}

// TestSynchronizeHoldsThresholdUntilMinimumReclaim drives the manager's looks over a fake
// /proc (pid.available: a 1000-task limit less /proc/loadavg's tasks) and fake pod cgroups:
// with pid.available<100 and a minimum reclaim of 50, a node back at 120 available is still
// under the threshold and evicts again; at 160 it is not. Without the minimum reclaim, 120
// is enough.
func TestSynchronizeHoldsThresholdUntilMinimumReclaim(t *testing.T) {
	for _, c := range []struct {
		reclaim    string
		evictAt120 bool
	}{{"pid.available=50", true}, {"", false}} {
		proc, cgroup := t.TempDir(), t.TempDir()
		if err := os.MkdirAll(filepath.Join(proc, "sys/kernel"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"sys/kernel/pid_max", "sys/kernel/threads-max"} {
			if err := os.WriteFile(filepath.Join(proc, f), []byte("1000\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(proc, "meminfo"), []byte("MemTotal: 1048576 kB\nMemAvailable: 524288 kB\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		tasks := func(n int) {
			if err := os.WriteFile(filepath.Join(proc, "loadavg"), []byte("0.00 0.00 0.00 1/"+strconv.Itoa(n)+" 100\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var pods []*corev1.Pod
		for i, name := range []string{"forky", "forkier", "quiet"} {
			uid := types.UID("uid-" + name)
			pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: uid}})
			// No requests: BestEffort pods, in that tier as the pod manager places them.
			dir := filepath.Join(cgroup, "besteffort", "pod"+string(uid))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			procs := []string{"300", "400", "1"}[i]
			if err := os.WriteFile(filepath.Join(dir, "pids.current"), []byte(procs+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		hard, err := eviction.ParseHard("pid.available<100")
		if err != nil {
			t.Fatal(err)
		}
		ths, err := eviction.ParseMinReclaim(c.reclaim, hard)
		if err != nil {
			t.Fatal(err)
		}
		ev := &recordingEvictor{pods: pods}
		m := New(Options{Thresholds: ths, NodeFs: t.TempDir(), Proc: proc, CgroupPath: cgroup}, nil, noImageFs{}, ev,
			slog.New(slog.NewTextHandler(io.Discard, nil)))
		ctx := context.Background()

		tasks(950) // 50 available: crossed
		m.synchronize(ctx)
		if len(ev.evicted) != 1 || ev.evicted[0] != "forkier" {
			t.Fatalf("reclaim %q, 50 available: evicted %v, want the pod with the most processes, forkier", c.reclaim, ev.evicted)
		}
		if !m.Conditions()[corev1.NodePIDPressure] {
			t.Errorf("reclaim %q: no PIDPressure at 50 available", c.reclaim)
		}
		ev.pods = []*corev1.Pod{pods[0], pods[2]}
		tasks(880) // 120 available: past the threshold, short of the minimum reclaim
		m.synchronize(ctx)
		if got := len(ev.evicted) == 2; got != c.evictAt120 {
			t.Errorf("reclaim %q, 120 available: evicted %v; another eviction wanted: %v", c.reclaim, ev.evicted, c.evictAt120)
		}
		evicted := len(ev.evicted)
		tasks(840) // 160 available: cleared either way
		m.synchronize(ctx)
		if len(ev.evicted) != evicted {
			t.Errorf("reclaim %q, 160 available: evicted %v after %d, want no more", c.reclaim, ev.evicted, evicted)
		}
		// The condition is held for the transition period after the last crossing, whatever
		// the reclaim (TransitionPeriod 0 here clears it at once).
		if m.Conditions()[corev1.NodePIDPressure] {
			t.Errorf("reclaim %q: PIDPressure still reported at 160 available with no transition period", c.reclaim)
		}
	}
}
