package scale

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sampleResult(target string, anonEnd uint64, cpu time.Duration) Result {
	r := Result{Target: target, Nodes: 100, Pods: 3000, Services: 200, Burst: 40 * time.Second,
		BurstStartup: Startup{RunsPerSec: 75, SchedulePerSec: 90, Running: Latency{P50: 10 * time.Second, P99: 14 * time.Second, Count: 3000}},
		Idle:         Sample{Anon: 100 << 20}, End: Sample{RSS: anonEnd + 100<<20, Anon: anonEnd}, PeakAnon: anonEnd, CPU: cpu,
		EtcdDB: 96 << 20, Watchers: 90,
		SLOs:   []SLO{{Name: "pod start-up", Limit: 5 * time.Second, P99: 2 * time.Second, Worst: "600 pods", Pass: true}},
		Server: []CallLatency{{Call: "POST pods (resource)", P50: 50 * time.Millisecond, P99: 400 * time.Millisecond, Count: 3000}},
		Phases: []Phase{{Name: "burst", At: 5 * time.Second}}}
	for i := 0; i <= 60; i++ {
		r.Samples = append(r.Samples, Sample{At: time.Duration(i) * time.Second, Anon: uint64(i) * anonEnd / 60, CPU: time.Duration(i) * cpu / 60})
	}
	return r
}

// TestReport: the table, the ratios and the plot say what the results hold.
func TestReport(t *testing.T) {
	rs := []Result{sampleResult("skiff", 700<<20, 60*time.Second), sampleResult("upstream", 1300<<20, 120*time.Second)}
	if got := rs[0].AnonPerPod() / 1024; int(got) != 204 {
		t.Fatalf("anon per pod = %.1f KiB, want (700-100) MiB / 3000 = 204.8", got)
	}
	md := Markdown(rs)
	for _, want := range []string{"| skiff | 100 | 3000 | 200 |", "| upstream | 100 |", "anonymous memory per pod 0.50x, CPU 0.50x",
		"| skiff | 100 | pod start-up | 5s | 2s | pass |", "POST pods (resource) 50ms / 400ms (3000)"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	svg := PlotSVG(rs)
	if strings.Count(svg, "<polyline") != 4 || !strings.Contains(svg, ">skiff<") || !strings.Contains(svg, ">upstream<") || !strings.Contains(svg, ">burst<") {
		t.Errorf("plot lacks a line or a label:\n%s", svg)
	}
	dir := t.TempDir()
	if err := WriteResults(dir, rs); err != nil {
		t.Fatal(err)
	}
	var back []Result
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &back); err != nil || len(back) != 2 || back[1].End.Anon != 1300<<20 {
		t.Fatalf("results.json round trip: %v, %+v", err, back)
	}
	if _, err := os.Stat(filepath.Join(dir, "memory-100.svg")); err != nil {
		t.Fatal(err)
	}
}
