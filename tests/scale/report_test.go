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
	rs[0].Fanout = &FanoutResult{Agents: 100, Streams: 300, Before: Sample{Anon: 600 << 20}, Open: Sample{Anon: 603 << 20},
		Delivery: Latency{P50: 40 * time.Millisecond, P99: 50 * time.Millisecond, Count: 1000}, Slowest: 55 * time.Millisecond, Bytes: 10 << 20}
	md := Markdown(rs)
	for _, want := range []string{"| skiff | 100 | 100 | 300 | 600 MiB → 603 MiB | 10.2 KiB | 10 MiB | 0 | 40ms / 50ms / 55ms |",
		"- skiff, 100 nodes: scheduled ", "| skiff | 100 | 3000 | 200 |", "| upstream | 100 |", "anonymous memory per pod 0.50x, CPU 0.50x",
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

// The agent's table: per remote pod is the memory the cluster added over its pods.
func TestAgentReport(t *testing.T) {
	r := AgentResult{Nodes: 1000, Pods: 10000, Routes: 5000, Idle: Sample{RSS: 100 << 20, Anon: 20 << 20}, Loaded: Sample{RSS: 200 << 20, Anon: 120 << 20},
		Programming: Latency{P50: 30 * time.Millisecond, P99: 90 * time.Millisecond, Count: 40}, Learn: 1100 * time.Millisecond}
	if got := r.PerRemotePod() / 1024; int(got*10) != 102 {
		t.Fatalf("per remote pod = %.2f KiB, want 100 MiB / 10,000 = 10.24", got)
	}
	md := r.Markdown()
	for _, want := range []string{"| anonymous memory per remote pod | 10.2 KiB |", "| EndpointSlice → service map, p50 / p99 (n) | 30ms / 90ms (40) | p99 < 100 ms |",
		"| 5000 BGP routes from the ToR → node's kernel table | 1.1s | < 2 s |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the agent's table lacks %q:\n%s", want, md)
		}
	}
}
