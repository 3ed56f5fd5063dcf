package scale

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Call names one kind of API request the way upstream's SLOs do: verb (LIST for a GET of a
// collection, APPLY for server-side apply), resource with its subresource, and scope
// ("resource" for one object, "namespace" or "cluster" for a collection).
type Call struct {
	Verb, Resource, Scope string
}

func (c Call) String() string { return c.Verb + " " + c.Resource + " (" + c.Scope + ")" }

// Histogram is a cumulative Prometheus histogram: Counts[i] requests took at most Bounds[i]
// seconds; Count is every request, those above the last bound included.
type Histogram struct {
	Bounds []float64
	Counts []float64
	Count  float64
}

// Quantile estimates the q-quantile by linear interpolation inside the bucket it falls in, as
// Prometheus's histogram_quantile does; a quantile beyond the last finite bound is reported as
// that bound (the most the histogram can say).
func (h Histogram) Quantile(q float64) float64 {
	if h.Count == 0 || len(h.Bounds) == 0 {
		return math.NaN()
	}
	rank := q * h.Count
	lower, below := 0.0, 0.0
	for i, b := range h.Bounds {
		if h.Counts[i] >= rank {
			in := h.Counts[i] - below
			if in <= 0 {
				return b
			}
			return lower + (b-lower)*(rank-below)/in
		}
		lower, below = b, h.Counts[i]
	}
	return h.Bounds[len(h.Bounds)-1]
}

// sub returns h - before (the requests made between two scrapes).
func (h Histogram) sub(before Histogram) Histogram {
	out := Histogram{Bounds: h.Bounds, Counts: make([]float64, len(h.Counts)), Count: h.Count - before.Count}
	for i := range h.Counts {
		out.Counts[i] = h.Counts[i]
		if i < len(before.Counts) {
			out.Counts[i] -= before.Counts[i]
		}
	}
	return out
}

func (h *Histogram) add(o Histogram) {
	if h.Bounds == nil {
		h.Bounds = o.Bounds
		h.Counts = make([]float64, len(o.Counts))
	}
	for i := range h.Counts {
		if i < len(o.Counts) {
			h.Counts[i] += o.Counts[i]
		}
	}
	h.Count += o.Count
}

// ServerMetrics is what the harness reads off an API server's /metrics.
type ServerMetrics struct {
	// Requests is apiserver_request_duration_seconds summed over its other labels (group,
	// version, component, dry_run) per Call.
	Requests map[Call]Histogram
	// Watchers is apiserver_longrunning_requests{verb="WATCH"} summed over resources: the
	// watches the server holds open (its request filters count them, whatever the storage).
	Watchers float64
}

// ParseServerMetrics reads the Prometheus text format.
func ParseServerMetrics(r io.Reader) (ServerMetrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return ServerMetrics{}, fmt.Errorf("parsing /metrics: %w", err)
	}
	m := ServerMetrics{Requests: map[Call]Histogram{}}
	if f := families["apiserver_request_duration_seconds"]; f != nil {
		for _, s := range f.GetMetric() {
			l := labels(s)
			resource := l["resource"]
			if sub := l["subresource"]; sub != "" {
				resource += "/" + sub
			}
			c := Call{Verb: l["verb"], Resource: resource, Scope: l["scope"]}
			h := m.Requests[c]
			h.add(histogramOf(s.GetHistogram()))
			m.Requests[c] = h
		}
	}
	if f := families["apiserver_longrunning_requests"]; f != nil {
		for _, s := range f.GetMetric() {
			if labels(s)["verb"] == "WATCH" {
				m.Watchers += s.GetGauge().GetValue()
			}
		}
	}
	return m, nil
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, p := range m.GetLabel() {
		out[p.GetName()] = p.GetValue()
	}
	return out
}

func histogramOf(h *dto.Histogram) Histogram {
	out := Histogram{Count: float64(h.GetSampleCount())}
	for _, b := range h.GetBucket() {
		if math.IsInf(b.GetUpperBound(), 1) {
			continue
		}
		out.Bounds = append(out.Bounds, b.GetUpperBound())
		out.Counts = append(out.Counts, float64(b.GetCumulativeCount()))
	}
	return out
}

// Since is the requests made after before was scraped.
func (m ServerMetrics) Since(before ServerMetrics) ServerMetrics {
	out := ServerMetrics{Requests: map[Call]Histogram{}, Watchers: m.Watchers}
	for c, h := range m.Requests {
		d := h.sub(before.Requests[c])
		if d.Count > 0 {
			out.Requests[c] = d
		}
	}
	return out
}

// Recorder measures every API call a client makes, from the client's side.
type Recorder struct {
	mu    sync.Mutex
	calls map[Call][]time.Duration
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{calls: map[Call][]time.Duration{}} }

// Wrap is a rest.Config WrapTransport: it times each request except watches.
func (r *Recorder) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		c, ok := Classify(req.Method, req.URL)
		start := time.Now()
		resp, err := rt.RoundTrip(req)
		if ok && err == nil {
			r.mu.Lock()
			r.calls[c] = append(r.calls[c], time.Since(start))
			r.mu.Unlock()
		}
		return resp, err
	})
}

// Quantiles returns p50 and p99 and the count per Call.
func (r *Recorder) Quantiles() map[Call]Latency {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[Call]Latency{}
	for c, ds := range r.calls {
		out[c] = latencyOf(ds)
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Classify names a request as the server's metrics do, from its method and path; watches and
// non-resource paths are not API calls of the SLOs.
func Classify(method string, u *url.URL) (Call, bool) {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	// /api/v1/... or /apis/group/version/...
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return Call{}, false
	}
	if u.Query().Get("watch") == "true" || u.Query().Get("watch") == "1" {
		return Call{}, false
	}
	namespaced := false
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) != 2 {
		// namespaces/NS/resource[/name[/sub]]; "namespaces/NS" alone is the Namespace object.
		parts = parts[2:]
		namespaced = true
	}
	if len(parts) == 0 {
		return Call{}, false
	}
	c := Call{Resource: parts[0]}
	switch {
	case len(parts) == 1 && namespaced:
		c.Scope = "namespace"
	case len(parts) == 1:
		c.Scope = "cluster"
	default:
		c.Scope = "resource"
		if len(parts) >= 3 {
			c.Resource += "/" + parts[2]
		}
	}
	if method == http.MethodPost {
		// A create names one object, as the server's metrics label it (scope "resource").
		c.Scope = "resource"
	}
	switch method {
	case http.MethodGet:
		c.Verb = "GET"
		if c.Scope != "resource" {
			c.Verb = "LIST"
		}
	case http.MethodPatch:
		c.Verb = "PATCH"
	default:
		c.Verb = method
	}
	return c, true
}

// Latency is a distribution's summary.
type Latency struct {
	P50, P99 time.Duration
	Count    int
}

func latencyOf(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) time.Duration {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		if i < 0 {
			i = 0
		}
		return s[i]
	}
	return Latency{P50: at(0.50), P99: at(0.99), Count: len(s)}
}
