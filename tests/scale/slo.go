package scale

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// SLO is one of upstream's scalability SLOs judged on a run.
type SLO struct {
	Name  string
	Limit time.Duration
	// P99 is the worst p99 among the calls the SLO covers (each must meet it), and Worst the
	// call it belongs to; for pod start-up, the p99 over all pods.
	P99   time.Duration
	Worst string
	Pass  bool
}

func (s SLO) String() string {
	verdict := "pass"
	if !s.Pass {
		verdict = "FAIL"
	}
	return fmt.Sprintf("%s: p99 %s <= %s: %s (%s)", s.Name, round(s.P99), s.Limit, verdict, s.Worst)
}

// apiSLO is upstream's API call latency SLO for one class of call
// (sig-scalability/slos/api_call_latency.md).
type apiSLO struct {
	name   string
	limit  time.Duration
	covers func(Call) bool
}

var apiSLOs = []apiSLO{
	{"mutating call, one object", time.Second, func(c Call) bool {
		return c.Scope == "resource" && (c.Verb == "POST" || c.Verb == "PUT" || c.Verb == "PATCH" || c.Verb == "DELETE" || c.Verb == "APPLY")
	}},
	{"read, one object", time.Second, func(c Call) bool { return c.Scope == "resource" && c.Verb == "GET" }},
	{"read, a namespace", 5 * time.Second, func(c Call) bool { return c.Scope == "namespace" && c.Verb == "LIST" }},
	{"read, the cluster", 30 * time.Second, func(c Call) bool { return c.Scope == "cluster" && c.Verb == "LIST" }},
}

// streaming subresources are long-running, outside the SLO as upstream's SLI excludes them.
var streaming = map[string]bool{"log": true, "exec": true, "attach": true, "portforward": true, "proxy": true}

func isStreaming(resource string) bool {
	for i := len(resource) - 1; i >= 0; i-- {
		if resource[i] == '/' {
			return streaming[resource[i+1:]]
		}
	}
	return false
}

// APISLOs judges the server's request histograms (the requests of the measured window)
// against upstream's API call latency SLOs: every call of a class must have its p99 within
// the class's limit. A class with no calls passes with a zero p99 and says so.
func APISLOs(reqs map[Call]Histogram) []SLO {
	calls := make([]Call, 0, len(reqs))
	for c := range reqs {
		calls = append(calls, c)
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].String() < calls[j].String() })
	var out []SLO
	for _, s := range apiSLOs {
		r := SLO{Name: s.name, Limit: s.limit, Worst: "no calls", Pass: true}
		for _, c := range calls {
			if !s.covers(c) || isStreaming(c.Resource) {
				continue
			}
			q := reqs[c].Quantile(0.99)
			if math.IsNaN(q) {
				continue
			}
			p99 := time.Duration(q * float64(time.Second))
			if r.Worst == "no calls" || p99 > r.P99 {
				r.P99, r.Worst = p99, fmt.Sprintf("%s, %d calls", c, int(reqs[c].Count))
			}
		}
		r.Pass = r.P99 <= r.Limit
		out = append(out, r)
	}
	return out
}

// PodStartupSLO judges pod start-up (creation to Running, as seen by a watch) against
// upstream's 5 s p99 for stateless pods whose image is present.
func PodStartupSLO(l Latency) SLO {
	return SLO{Name: "pod start-up", Limit: 5 * time.Second, P99: l.P99,
		Worst: fmt.Sprintf("%d pods", l.Count), Pass: l.Count > 0 && l.P99 <= 5*time.Second}
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	default:
		return d.Round(time.Millisecond)
	}
}
