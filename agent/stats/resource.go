package stats

import (
	"bytes"
	"fmt"
	"strconv"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Resource renders a Summary as the kubelet's /metrics/resource: Prometheus text with the
// stable metric names metrics-server and skiff's own metrics API scrape, each sample
// stamped with the time it was measured (milliseconds). failed sets resource_scrape_error,
// which says the container figures could not be read.
func Resource(sum *statsapi.Summary, failed bool) []byte {
	var b bytes.Buffer
	family := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s [STABLE] %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	sample := func(name string, labels []string, v float64, ms int64) {
		b.WriteString(name)
		if len(labels) > 0 {
			b.WriteByte('{')
			for i := 0; i < len(labels); i += 2 {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, "%s=%s", labels[i], strconv.Quote(labels[i+1]))
			}
			b.WriteByte('}')
		}
		fmt.Fprintf(&b, " %s %d\n", strconv.FormatFloat(v, 'g', -1, 64), ms)
	}
	type ctr struct {
		pod statsapi.PodReference
		c   statsapi.ContainerStats
	}
	var ctrs []ctr
	if sum != nil {
		for _, p := range sum.Pods {
			for _, c := range p.Containers {
				ctrs = append(ctrs, ctr{p.PodRef, c})
			}
		}
	}
	ctrLabels := func(x ctr) []string {
		return []string{"container", x.c.Name, "namespace", x.pod.Namespace, "pod", x.pod.Name}
	}

	family("container_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the container in core-seconds")
	for _, x := range ctrs {
		if c := x.c.CPU; c != nil && c.UsageCoreNanoSeconds != nil {
			sample("container_cpu_usage_seconds_total", ctrLabels(x), seconds(*c.UsageCoreNanoSeconds), c.Time.UnixMilli())
		}
	}
	family("container_memory_working_set_bytes", "gauge", "Current working set of the container in bytes")
	for _, x := range ctrs {
		if m := x.c.Memory; m != nil && m.WorkingSetBytes != nil {
			sample("container_memory_working_set_bytes", ctrLabels(x), float64(*m.WorkingSetBytes), m.Time.UnixMilli())
		}
	}
	family("container_start_time_seconds", "gauge", "Start time of the container since unix epoch in seconds")
	for _, x := range ctrs {
		sample("container_start_time_seconds", ctrLabels(x), float64(x.c.StartTime.UnixNano())/1e9, x.c.StartTime.UnixMilli())
	}
	if sum != nil {
		n := sum.Node
		family("node_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the node in core-seconds")
		if n.CPU != nil && n.CPU.UsageCoreNanoSeconds != nil {
			sample("node_cpu_usage_seconds_total", nil, seconds(*n.CPU.UsageCoreNanoSeconds), n.CPU.Time.UnixMilli())
		}
		family("node_memory_working_set_bytes", "gauge", "Current working set of the node in bytes")
		if n.Memory != nil && n.Memory.WorkingSetBytes != nil {
			sample("node_memory_working_set_bytes", nil, float64(*n.Memory.WorkingSetBytes), n.Memory.Time.UnixMilli())
		}
		family("pod_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the pod in core-seconds")
		for _, p := range sum.Pods {
			if p.CPU != nil && p.CPU.UsageCoreNanoSeconds != nil {
				sample("pod_cpu_usage_seconds_total", []string{"namespace", p.PodRef.Namespace, "pod", p.PodRef.Name},
					seconds(*p.CPU.UsageCoreNanoSeconds), p.CPU.Time.UnixMilli())
			}
		}
		family("pod_memory_working_set_bytes", "gauge", "Current working set of the pod in bytes")
		for _, p := range sum.Pods {
			if p.Memory != nil && p.Memory.WorkingSetBytes != nil {
				sample("pod_memory_working_set_bytes", []string{"namespace", p.PodRef.Namespace, "pod", p.PodRef.Name},
					float64(*p.Memory.WorkingSetBytes), p.Memory.Time.UnixMilli())
			}
		}
	}
	family("resource_scrape_error", "gauge", "1 if there was an error while getting container metrics, 0 otherwise")
	v := "0"
	if failed {
		v = "1"
	}
	b.WriteString("resource_scrape_error " + v + "\n")
	return b.Bytes()
}

func seconds(ns uint64) float64 { return float64(ns) / 1e9 }
