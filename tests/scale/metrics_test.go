package scale

import (
	"math"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         Call
		ok           bool
	}{
		{"GET", "/api/v1/namespaces/a/pods/p", Call{"GET", "pods", "resource"}, true},
		{"GET", "/api/v1/namespaces/a/pods", Call{"LIST", "pods", "namespace"}, true},
		{"GET", "/api/v1/pods", Call{"LIST", "pods", "cluster"}, true},
		{"GET", "/api/v1/namespaces", Call{"LIST", "namespaces", "cluster"}, true},
		{"GET", "/api/v1/namespaces/a", Call{"GET", "namespaces", "resource"}, true},
		{"POST", "/api/v1/namespaces/a/pods", Call{"POST", "pods", "resource"}, true},
		{"POST", "/api/v1/namespaces/a/pods/p/binding", Call{"POST", "pods/binding", "resource"}, true},
		{"PATCH", "/api/v1/nodes/n/status", Call{"PATCH", "nodes/status", "resource"}, true},
		{"PUT", "/apis/apps/v1/namespaces/a/deployments/d/scale", Call{"PUT", "deployments/scale", "resource"}, true},
		{"DELETE", "/apis/apps/v1/namespaces/a/deployments/d", Call{"DELETE", "deployments", "resource"}, true},
		{"GET", "/apis/discovery.k8s.io/v1/endpointslices", Call{"LIST", "endpointslices", "cluster"}, true},
		{"GET", "/api/v1/namespaces/a/pods?watch=true", Call{}, false},
		{"GET", "/metrics", Call{}, false},
		{"GET", "/apis", Call{}, false},
	} {
		u, _ := url.Parse(tc.path)
		got, ok := Classify(tc.method, u)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s %s = %v, %v; want %v, %v", tc.method, tc.path, got, ok, tc.want, tc.ok)
		}
	}
}

func TestHistogramQuantile(t *testing.T) {
	h := Histogram{Bounds: []float64{0.1, 0.5, 1, 5}, Counts: []float64{50, 90, 99, 100}, Count: 100}
	for _, tc := range []struct{ q, want float64 }{
		{0.5, 0.1},
		{0.25, 0.05},
		{0.7, 0.3},
		{0.99, 1},
		{0.995, 3},
	} {
		if got := h.Quantile(tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("q%.3f = %v, want %v", tc.q, got, tc.want)
		}
	}
	over := Histogram{Bounds: []float64{1}, Counts: []float64{1}, Count: 10}
	if got := over.Quantile(0.99); got != 1 {
		t.Errorf("beyond the last bound = %v, want the last bound", got)
	}
	if got := (Histogram{}).Quantile(0.99); !math.IsNaN(got) {
		t.Errorf("empty = %v, want NaN", got)
	}
}

const metricsText = `# HELP apiserver_request_duration_seconds x
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1",le="0.1"} 90
apiserver_request_duration_seconds_bucket{component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1",le="2"} 100
apiserver_request_duration_seconds_bucket{component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1",le="+Inf"} 100
apiserver_request_duration_seconds_sum{component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 5
apiserver_request_duration_seconds_count{component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 100
apiserver_request_duration_seconds_bucket{component="apiserver",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1",le="0.1"} 10
apiserver_request_duration_seconds_bucket{component="apiserver",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1",le="2"} 10
apiserver_request_duration_seconds_bucket{component="apiserver",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1",le="+Inf"} 10
apiserver_request_duration_seconds_sum{component="apiserver",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 0.5
apiserver_request_duration_seconds_count{component="apiserver",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 10
apiserver_request_duration_seconds_bucket{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1",le="0.1"} 3
apiserver_request_duration_seconds_bucket{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1",le="2"} 3
apiserver_request_duration_seconds_bucket{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1",le="+Inf"} 3
apiserver_request_duration_seconds_sum{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1"} 0.1
apiserver_request_duration_seconds_count{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1"} 3
# HELP apiserver_longrunning_requests x
# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 7
apiserver_longrunning_requests{component="apiserver",group="",resource="nodes",scope="cluster",subresource="",verb="WATCH",version="v1"} 5
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="resource",subresource="log",verb="CONNECT",version="v1"} 3
`

func TestParseServerMetricsAndSLOs(t *testing.T) {
	before, err := ParseServerMetrics(strings.NewReader(metricsText))
	if err != nil {
		t.Fatal(err)
	}
	if before.Watchers != 12 {
		t.Fatalf("watchers = %v, want 12", before.Watchers)
	}
	post := Call{"POST", "pods", "resource"}
	if h := before.Requests[post]; h.Count != 100 || len(h.Bounds) != 2 {
		t.Fatalf("POST pods = %+v", h)
	}
	// Twenty more creates, all slow: the window's p99 is theirs, not the whole history's.
	after, _ := ParseServerMetrics(strings.NewReader(strings.NewReplacer(
		`verb="POST",version="v1",le="2"} 100`, `verb="POST",version="v1",le="2"} 120`,
		`verb="POST",version="v1",le="+Inf"} 100`, `verb="POST",version="v1",le="+Inf"} 120`,
		`subresource="",verb="POST",version="v1"} 100`, `subresource="",verb="POST",version="v1"} 120`,
	).Replace(metricsText)))
	window := after.Since(before)
	if h := window.Requests[post]; h.Count != 20 || h.Quantile(0.5) <= 0.1 {
		t.Fatalf("window POST pods = %+v (p50 %v)", h, h.Quantile(0.5))
	}
	if _, ok := window.Requests[Call{"LIST", "pods", "cluster"}]; ok {
		t.Fatal("a call with no requests in the window is kept")
	}
	slos := APISLOs(window.Requests)
	if len(slos) != 4 {
		t.Fatalf("%d SLOs", len(slos))
	}
	if slos[0].Pass || !strings.Contains(slos[0].Worst, "POST pods") || slos[0].P99 < time.Second {
		t.Errorf("mutating SLO = %v, want a failure on POST pods", slos[0])
	}
	for _, s := range slos[1:] {
		if !s.Pass || s.Worst != "no calls" {
			t.Errorf("%v, want a pass with no calls", s)
		}
	}
	whole := APISLOs(before.Requests)
	// 90 of 100 creates within 0.1 s, the other 10 within 2 s: p99 = 0.1 + 1.9 × 9/10.
	if whole[0].Pass || whole[0].P99.Round(time.Millisecond) != 1810*time.Millisecond || !whole[3].Pass || !strings.Contains(whole[3].Worst, "LIST pods (cluster)") {
		t.Errorf("whole history SLOs = %v", whole)
	}
}

func TestPodStartupSLO(t *testing.T) {
	if s := PodStartupSLO(Latency{}); s.Pass {
		t.Error("no pods passes")
	}
	if s := PodStartupSLO(Latency{P99: 4 * time.Second, Count: 10}); !s.Pass {
		t.Error("4 s fails")
	}
	if s := PodStartupSLO(Latency{P99: 6 * time.Second, Count: 10}); s.Pass {
		t.Error("6 s passes")
	}
}

func TestLatencyOf(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	l := latencyOf(ds)
	if l.P50 != 50*time.Millisecond || l.P99 != 99*time.Millisecond || l.Count != 100 {
		t.Fatalf("%+v", l)
	}
}
