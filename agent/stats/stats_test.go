package stats

import (
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

const procStat = `cpu  1000 20 300 50000 400 5 6 7 99 1
cpu0 500 10 150 25000 200 2 3 3 0 0
intr 12345
btime 1700000000
`

const procMeminfo = `MemTotal:        8000000 kB
MemFree:         1000000 kB
MemAvailable:    6000000 kB
Buffers:          100000 kB
`

func TestParseNode(t *testing.T) {
	now := time.Unix(1700001000, 0)
	n, err := ParseNode([]byte(procStat), []byte(procMeminfo), now)
	if err != nil {
		t.Fatal(err)
	}
	// user+nice+system+irq+softirq+steal = 1000+20+300+5+6+7 jiffies of 10 ms.
	if got, want := *n.CPU.UsageCoreNanoSeconds, uint64(1338)*10_000_000; got != want {
		t.Errorf("cpu = %d ns, want %d", got, want)
	}
	if got, want := *n.Memory.WorkingSetBytes, uint64(2000000*1024); got != want {
		t.Errorf("working set = %d, want %d", got, want)
	}
	if got, want := *n.Memory.UsageBytes, uint64(7000000*1024); got != want {
		t.Errorf("usage = %d, want %d", got, want)
	}
	if got := n.StartTime.Unix(); got != 1700000000 {
		t.Errorf("start time = %d", got)
	}
	if !n.CPU.Time.Time.Equal(now) {
		t.Errorf("cpu time = %v", n.CPU.Time)
	}
}

func TestParseNodeRejects(t *testing.T) {
	for name, c := range map[string][2]string{
		"no cpu line":     {"intr 1\n", procMeminfo},
		"short cpu line":  {"cpu 1 2\n", procMeminfo},
		"bad number":      {"cpu 1 x 3 4 5\n", procMeminfo},
		"no MemAvailable": {procStat, "MemTotal: 10 kB\n"},
		"avail > total":   {procStat, "MemTotal: 10 kB\nMemAvailable: 20 kB\n"},
	} {
		if _, err := ParseNode([]byte(c[0]), []byte(c[1]), time.Now()); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func u64(v uint64) *runtimeapi.UInt64Value { return &runtimeapi.UInt64Value{Value: v} }

func ctr(id, ns, pod, uid, name string, created int64) *runtimeapi.Container {
	return &runtimeapi.Container{Id: id, CreatedAt: created, Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Labels: map[string]string{labelPodNamespace: ns, labelPodName: pod, labelPodUID: uid, labelContainer: name}}
}

func ctrStats(id string, cpuNs, mem uint64, ts int64) *runtimeapi.ContainerStats {
	return &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{Id: id},
		Cpu:    &runtimeapi.CpuUsage{Timestamp: ts, UsageCoreNanoSeconds: u64(cpuNs)},
		Memory: &runtimeapi.MemoryUsage{Timestamp: ts, WorkingSetBytes: u64(mem)}}
}

func TestBuild(t *testing.T) {
	ts := time.Unix(1700001000, 0).UnixNano()
	containers := []*runtimeapi.Container{
		ctr("b2", "default", "web", "u1", "sidecar", 200),
		ctr("b1", "default", "web", "u1", "app", 100),
		ctr("a1", "apps", "db", "u2", "db", 300),
		ctr("c1", "apps", "half", "u3", "one", 300),
		ctr("c2", "apps", "half", "u3", "two", 300),
		{Id: "foreign", Labels: map[string]string{}},
	}
	stats := []*runtimeapi.ContainerStats{
		ctrStats("b1", 2e9, 100, ts), ctrStats("b2", 1e9, 50, ts), ctrStats("a1", 5e8, 10, ts),
		ctrStats("c1", 1e9, 1, ts), // c2 has none
		ctrStats("gone", 1, 1, ts),
	}
	sum := Build(statsapi.NodeStats{NodeName: "n1"}, containers, stats)
	if len(sum.Pods) != 3 {
		t.Fatalf("%d pods, want 3: %+v", len(sum.Pods), sum.Pods)
	}
	if p := sum.Pods[0]; p.PodRef.Name != "db" || p.PodRef.Namespace != "apps" {
		t.Errorf("first pod %v, want apps/db", p.PodRef)
	}
	web := sum.Pods[2]
	if web.PodRef != (statsapi.PodReference{Name: "web", Namespace: "default", UID: "u1"}) {
		t.Fatalf("third pod %v", web.PodRef)
	}
	if len(web.Containers) != 2 || web.Containers[0].Name != "app" || web.Containers[1].Name != "sidecar" {
		t.Errorf("web's containers %+v", web.Containers)
	}
	if *web.CPU.UsageCoreNanoSeconds != 3e9 || *web.Memory.WorkingSetBytes != 150 {
		t.Errorf("web totals cpu=%d mem=%d", *web.CPU.UsageCoreNanoSeconds, *web.Memory.WorkingSetBytes)
	}
	if web.StartTime.UnixNano() != 100 {
		t.Errorf("web started %d, want its first container's 100", web.StartTime.UnixNano())
	}
	half := sum.Pods[1]
	if half.CPU != nil || half.Memory != nil {
		t.Errorf("a pod with a container lacking stats has totals: %+v %+v", half.CPU, half.Memory)
	}
}

func TestResource(t *testing.T) {
	ts := time.Unix(1700001000, 0).UnixNano()
	n, _ := ParseNode([]byte(procStat), []byte(procMeminfo), time.Unix(1700001000, 0))
	sum := Build(n, []*runtimeapi.Container{ctr("b1", "default", "web", "u1", "app", ts)}, []*runtimeapi.ContainerStats{ctrStats("b1", 2500e6, 4096, ts)})
	out := string(Resource(&sum, false))
	for _, want := range []string{
		"# TYPE container_cpu_usage_seconds_total counter\n",
		`container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 2.5 1700001000000` + "\n",
		`container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 4096 1700001000000` + "\n",
		`container_start_time_seconds{container="app",namespace="default",pod="web"} 1.700001e+09 1700001000000` + "\n",
		"node_cpu_usage_seconds_total 13.38 1700001000000\n",
		"node_memory_working_set_bytes 2.048e+09 1700001000000\n",
		`pod_cpu_usage_seconds_total{namespace="default",pod="web"} 2.5 1700001000000` + "\n",
		`pod_memory_working_set_bytes{namespace="default",pod="web"} 4096 1700001000000` + "\n",
		"resource_scrape_error 0\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if out := string(Resource(nil, true)); !strings.Contains(out, "resource_scrape_error 1\n") || strings.Contains(out, "node_cpu") {
		t.Errorf("a failed read:\n%s", out)
	}
}
