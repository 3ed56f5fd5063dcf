package metrics

import (
	"fmt"
	"io"
	"math"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Parse reads a node agent's (or a kubelet's) /metrics/resource. A sample without its
// timestamp is stamped with now; one that is not a finite, non-negative number is an error, as
// is resource_scrape_error 1 (the agent could not read its runtime).
func Parse(r io.Reader, now time.Time) (Scrape, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Scrape{}, fmt.Errorf("resource metrics: %w", err)
	}
	if f := families["resource_scrape_error"]; f != nil && len(f.Metric) > 0 && value(f.Metric[0]) != 0 {
		return Scrape{}, fmt.Errorf("resource metrics: the node could not read its containers' usage")
	}
	sc := Scrape{Containers: map[ContainerKey]Sample{}}
	stamp := func(m *dto.Metric) time.Time {
		if m.TimestampMs != nil {
			return time.UnixMilli(*m.TimestampMs)
		}
		return now
	}
	var bad error
	each := func(name string, fn func(m *dto.Metric, v float64)) {
		f := families[name]
		if f == nil {
			return
		}
		for _, m := range f.Metric {
			v := value(m)
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				bad = fmt.Errorf("resource metrics: %s = %v", name, v)
				return
			}
			fn(m, v)
		}
	}
	key := func(m *dto.Metric) (ContainerKey, bool) {
		var k ContainerKey
		for _, l := range m.Label {
			switch l.GetName() {
			case "namespace":
				k.Namespace = l.GetValue()
			case "pod":
				k.Pod = l.GetValue()
			case "container":
				k.Container = l.GetValue()
			}
		}
		return k, k.Namespace != "" && k.Pod != "" && k.Container != ""
	}
	cpu := map[ContainerKey]Sample{}
	each("container_cpu_usage_seconds_total", func(m *dto.Metric, v float64) {
		if k, ok := key(m); ok {
			cpu[k] = Sample{CPU: v, CPUTime: stamp(m)}
		}
	})
	mem := map[ContainerKey]float64{}
	each("container_memory_working_set_bytes", func(m *dto.Metric, v float64) {
		if k, ok := key(m); ok {
			mem[k] = v
		}
	})
	start := map[ContainerKey]time.Time{}
	each("container_start_time_seconds", func(m *dto.Metric, v float64) {
		if k, ok := key(m); ok {
			start[k] = time.Unix(0, int64(v*1e9)).Truncate(time.Millisecond)
		}
	})
	// A container is reported only with both figures: kubectl top and the HPA need both.
	for k, s := range cpu {
		m, ok := mem[k]
		if !ok {
			continue
		}
		s.Memory, s.Start = uint64(m), start[k]
		sc.Containers[k] = s
	}
	var node Sample
	nodeCPU, nodeMem := false, false
	each("node_cpu_usage_seconds_total", func(m *dto.Metric, v float64) { node.CPU, node.CPUTime, nodeCPU = v, stamp(m), true })
	each("node_memory_working_set_bytes", func(m *dto.Metric, v float64) { node.Memory, nodeMem = uint64(v), true })
	if bad != nil {
		return Scrape{}, bad
	}
	if nodeCPU && nodeMem {
		sc.Node = &node
	}
	return sc, nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return math.NaN()
}
