package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// gcRun is what one server did: its idle memory, and the cost of a fixed burst of API work.
type gcRun struct {
	idleRSS, idleAnon float64 // MiB, a minute after start
	loadCPU, loadWall float64 // seconds of the server's CPU, and of the clock, for the burst
	peakRSS           float64 // MiB, the high-water mark after the burst
}

// BenchmarkGCTarget weighs garbage collector targets for `skiff server` against Go's default
// (GOGC=100 in the environment, which also turns skiff's idle tuner off) in the same run: idle
// RSS, and the server's CPU and wall time for the same burst of creates, gets and lists from 8
// clients. Two candidates: skiff as it runs by default (GOGC 25 while idle, 100 within a
// second of load: internal/gctune; metrics prefixed idle-gc-), and a fixed lower target
// (GOGC=50, the setting docs/architecture.md offers memory-tight sites). A lower target means a smaller
// heap between collections and more collections.
//
// GOGC in this process's environment replaces the fixed candidate's target, so `GOGC=75 make
// bench` weighs another one against the same baseline (and leaves the idle tuner off in the
// idle-gc run too: the operator's GOGC stands).
func BenchmarkGCTarget(b *testing.B) {
	for i := 0; i < b.N; i++ {
		base := gcTargetRun(b, []string{"GOGC=100"})
		tuned := gcTargetRun(b, nil)
		cand := gcTargetRun(b, candidateGOGC())
		b.ReportMetric(base.idleRSS, "base-MiB-rss-idle")
		b.ReportMetric(base.loadCPU, "base-cpu-s-burst")
		for _, r := range []struct {
			prefix string
			run    gcRun
		}{{"", cand}, {"idle-gc-", tuned}} {
			b.ReportMetric(r.run.idleRSS, r.prefix+"MiB-rss-idle")
			b.ReportMetric(r.run.idleAnon, r.prefix+"MiB-rss-anon-idle")
			b.ReportMetric(r.run.loadCPU, r.prefix+"cpu-s-burst")
			b.ReportMetric(r.run.peakRSS, r.prefix+"MiB-hwm-burst")
			b.ReportMetric(r.run.idleRSS/base.idleRSS, r.prefix+"rss-idle/base")
			b.ReportMetric(r.run.idleAnon/base.idleAnon, r.prefix+"anon-idle/base")
			b.ReportMetric(r.run.loadCPU/base.loadCPU, r.prefix+"cpu-burst/base")
			b.ReportMetric(r.run.loadWall/base.loadWall, r.prefix+"wall-burst/base")
			b.ReportMetric(r.run.peakRSS/base.peakRSS, r.prefix+"hwm-burst/base")
		}
	}
}

// candidateGOGC is the environment for the server under test: GOGC=50 unless this process's
// environment (which the server inherits) already sets a target.
func candidateGOGC() []string {
	if os.Getenv("GOGC") != "" {
		return nil
	}
	return []string{"GOGC=50"}
}

func gcTargetRun(b *testing.B, env []string) gcRun {
	s := framework.NewServer(b, b.TempDir())
	s.Env = env
	s.Start()
	defer s.Stop()
	var r gcRun
	time.Sleep(60 * time.Second) // as BenchmarkIdle's minute: start-up's garbage returned
	r.idleRSS = mib(b, s.PID(), "VmRSS")
	r.idleAnon = mib(b, s.PID(), "RssAnon")

	c := protobufClient(b, s)
	ctx := context.Background()
	payload := map[string]string{"v": strings.Repeat("x", 1024)}
	// A namespace of 100 objects to list (from the watch cache, as informers and kubectl get do).
	for i := 0; i < 100; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("l", i)}, Data: payload}
		if _, err := c.CoreV1().ConfigMaps("kube-public").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	// The high-water mark from here on, not start-up's (writing 5 to clear_refs resets it).
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", s.PID()), []byte("5"), 0); err != nil {
		b.Fatal(err)
	}
	cpu0, start := cpuSeconds(b, s.PID()), time.Now()
	const workers, each = 8, 150
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			cms := c.CoreV1().ConfigMaps("default")
			for j := 0; j < each; j++ {
				name := fmt.Sprintf("burst-%d-%d", w, j)
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: payload}
				if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
				if _, err := cms.Get(ctx, name, metav1.GetOptions{}); err != nil {
					errs <- err
					return
				}
				if _, err := c.CoreV1().ConfigMaps("kube-public").List(ctx, metav1.ListOptions{ResourceVersion: "0"}); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	r.loadWall = time.Since(start).Seconds()
	r.loadCPU = cpuSeconds(b, s.PID()) - cpu0
	r.peakRSS = mib(b, s.PID(), "VmHWM")
	return r
}

func mib(b *testing.B, pid int, field string) float64 {
	kib, err := rssKiB(pid, field)
	if err != nil {
		b.Fatal(err)
	}
	return float64(kib) / 1024
}

// cpuSeconds is the process's user and system CPU time from /proc/PID/stat (in clock ticks
// of 1/100 s, the USER_HZ every Linux build reports).
func cpuSeconds(b *testing.B, pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name (field 2) may hold spaces; the fields after its closing paren are fixed.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(fields) < 13 {
		b.Fatalf("/proc/%d/stat: %d fields after the command name, want at least 13", pid, len(fields))
	}
	var utime, stime float64
	if _, err := fmt.Sscan(fields[11], &utime); err != nil {
		b.Fatal(err)
	}
	if _, err := fmt.Sscan(fields[12], &stime); err != nil {
		b.Fatal(err)
	}
	return (utime + stime) / 100
}
