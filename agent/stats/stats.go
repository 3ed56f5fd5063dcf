// Package stats is the node agent's resource usage, served as the kubelet serves it: the
// Summary API (/stats/summary) and the resource metrics endpoint (/metrics/resource) that the
// API server's metrics.k8s.io, `kubectl top` and the HPA controller read.
//
// Containers' figures come from the runtime's CRI stats (ListContainerStats); a pod's are the
// sum of its containers' (the sandbox's pause process is left out, as the kubelet's CRI stats
// provider does when the runtime has no pod sandbox stats). The node's come from /proc: CPU
// time from /proc/stat, memory from /proc/meminfo, the root file system from statfs.
package stats

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Pod-identifying labels the agent puts on every sandbox and container it creates.
const (
	labelPodName      = "io.kubernetes.pod.name"
	labelPodNamespace = "io.kubernetes.pod.namespace"
	labelPodUID       = "io.kubernetes.pod.uid"
	labelContainer    = "io.kubernetes.container.name"
)

// userHZ is the unit of /proc/stat's CPU times: USER_HZ, 100 on every Linux architecture
// Kubernetes runs on.
const userHZ = 100

// Source gathers a node's usage.
type Source struct {
	Runtime  runtimeapi.RuntimeServiceClient
	NodeName string
	// Proc is procfs' mount point ("/proc" when empty); RootFS the file system reported as
	// the node's ("/" when empty).
	Proc   string
	RootFS string
}

// Summary reads the runtime's and the host's figures now.
func (s *Source) Summary(ctx context.Context) (*statsapi.Summary, error) {
	node, err := s.node(time.Now())
	if err != nil {
		return nil, fmt.Errorf("node stats: %w", err)
	}
	ctrs, err := s.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	st, err := s.Runtime.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
	if err != nil {
		return nil, fmt.Errorf("container stats: %w", err)
	}
	sum := Build(node, ctrs.Containers, st.Stats)
	return &sum, nil
}

// Build assembles a Summary from the node's figures and the running containers with their
// CRI stats. Containers without pod labels (not the agent's) and stats of containers not
// running are left out. Pods and containers are sorted by name so the output is stable.
func Build(node statsapi.NodeStats, containers []*runtimeapi.Container, stats []*runtimeapi.ContainerStats) statsapi.Summary {
	byID := make(map[string]*runtimeapi.ContainerStats, len(stats))
	for _, s := range stats {
		if s.GetAttributes() != nil {
			byID[s.Attributes.Id] = s
		}
	}
	pods := map[string]*statsapi.PodStats{}
	for _, c := range containers {
		ns, name, uid := c.Labels[labelPodNamespace], c.Labels[labelPodName], c.Labels[labelPodUID]
		if ns == "" || name == "" {
			continue
		}
		ctrName := c.Labels[labelContainer]
		if ctrName == "" {
			ctrName = c.GetMetadata().GetName()
		}
		key := ns + "/" + name + "/" + uid
		p := pods[key]
		if p == nil {
			p = &statsapi.PodStats{PodRef: statsapi.PodReference{Name: name, Namespace: ns, UID: uid}}
			pods[key] = p
		}
		started := metav1.NewTime(time.Unix(0, c.CreatedAt))
		if p.StartTime.IsZero() || started.Before(&p.StartTime) {
			p.StartTime = started
		}
		cs := statsapi.ContainerStats{Name: ctrName, StartTime: started}
		if s := byID[c.Id]; s != nil {
			cs.CPU = cpuStats(s.Cpu)
			cs.Memory = memoryStats(s.Memory)
		}
		p.Containers = append(p.Containers, cs)
	}
	out := statsapi.Summary{Node: node, Pods: make([]statsapi.PodStats, 0, len(pods))}
	for _, p := range pods {
		sort.Slice(p.Containers, func(i, j int) bool { return p.Containers[i].Name < p.Containers[j].Name })
		p.CPU, p.Memory = podTotals(p.Containers)
		out.Pods = append(out.Pods, *p)
	}
	sort.Slice(out.Pods, func(i, j int) bool {
		a, b := out.Pods[i].PodRef, out.Pods[j].PodRef
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out
}

func cpuStats(c *runtimeapi.CpuUsage) *statsapi.CPUStats {
	if c == nil || c.UsageCoreNanoSeconds == nil {
		return nil
	}
	out := &statsapi.CPUStats{Time: metav1.NewTime(time.Unix(0, c.Timestamp)), UsageCoreNanoSeconds: ptr(c.UsageCoreNanoSeconds.Value)}
	if c.UsageNanoCores != nil {
		out.UsageNanoCores = ptr(c.UsageNanoCores.Value)
	}
	return out
}

func memoryStats(m *runtimeapi.MemoryUsage) *statsapi.MemoryStats {
	if m == nil || m.WorkingSetBytes == nil {
		return nil
	}
	out := &statsapi.MemoryStats{Time: metav1.NewTime(time.Unix(0, m.Timestamp)), WorkingSetBytes: ptr(m.WorkingSetBytes.Value)}
	if m.UsageBytes != nil {
		out.UsageBytes = ptr(m.UsageBytes.Value)
	}
	if m.RssBytes != nil {
		out.RSSBytes = ptr(m.RssBytes.Value)
	}
	if m.AvailableBytes != nil {
		out.AvailableBytes = ptr(m.AvailableBytes.Value)
	}
	return out
}

// podTotals sums the containers' CPU and memory; a pod has a figure only when every
// container has one (a partial sum would under-report it).
func podTotals(cs []statsapi.ContainerStats) (*statsapi.CPUStats, *statsapi.MemoryStats) {
	var cpu, mem uint64
	var cpuTime, memTime metav1.Time
	cpuOK, memOK := len(cs) > 0, len(cs) > 0
	for _, c := range cs {
		if c.CPU == nil || c.CPU.UsageCoreNanoSeconds == nil {
			cpuOK = false
		} else {
			cpu += *c.CPU.UsageCoreNanoSeconds
			if c.CPU.Time.After(cpuTime.Time) {
				cpuTime = c.CPU.Time
			}
		}
		if c.Memory == nil || c.Memory.WorkingSetBytes == nil {
			memOK = false
		} else {
			mem += *c.Memory.WorkingSetBytes
			if c.Memory.Time.After(memTime.Time) {
				memTime = c.Memory.Time
			}
		}
	}
	var pc *statsapi.CPUStats
	var pm *statsapi.MemoryStats
	if cpuOK {
		pc = &statsapi.CPUStats{Time: cpuTime, UsageCoreNanoSeconds: ptr(cpu)}
	}
	if memOK {
		pm = &statsapi.MemoryStats{Time: memTime, WorkingSetBytes: ptr(mem)}
	}
	return pc, pm
}

// node reads the host's CPU time, memory and root file system.
func (s *Source) node(now time.Time) (statsapi.NodeStats, error) {
	proc := s.Proc
	if proc == "" {
		proc = "/proc"
	}
	root := s.RootFS
	if root == "" {
		root = "/"
	}
	stat, err := os.ReadFile(filepath.Join(proc, "stat"))
	if err != nil {
		return statsapi.NodeStats{}, err
	}
	meminfo, err := os.ReadFile(filepath.Join(proc, "meminfo"))
	if err != nil {
		return statsapi.NodeStats{}, err
	}
	n, err := ParseNode(stat, meminfo, now)
	if err != nil {
		return statsapi.NodeStats{}, err
	}
	n.NodeName = s.NodeName
	var fs unix.Statfs_t
	if err := unix.Statfs(root, &fs); err == nil {
		bs := uint64(fs.Bsize)
		n.Fs = &statsapi.FsStats{Time: metav1.NewTime(now), CapacityBytes: ptr(fs.Blocks * bs), AvailableBytes: ptr(fs.Bavail * bs),
			UsedBytes: ptr((fs.Blocks - fs.Bfree) * bs), Inodes: ptr(fs.Files), InodesFree: ptr(fs.Ffree), InodesUsed: ptr(fs.Files - fs.Ffree)}
	}
	return n, nil
}

// ParseNode reads the node's CPU time and memory from /proc/stat and /proc/meminfo.
//
// CPU is the busy time of every CPU: user, nice, system, irq, softirq and steal (guest time
// is already in user). Memory's working set is what the kernel could not hand out without
// reclaiming in use pages — MemTotal − MemAvailable — and its usage MemTotal − MemFree.
func ParseNode(stat, meminfo []byte, now time.Time) (statsapi.NodeStats, error) {
	var n statsapi.NodeStats
	var busy uint64
	cpuSeen := false
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "cpu":
			if len(f) < 5 {
				return n, fmt.Errorf("/proc/stat: cpu line has %d fields", len(f))
			}
			for i, v := range f[1:] {
				if i == 3 || i == 4 || i >= 8 { // idle, iowait, guest, guest_nice
					continue
				}
				x, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return n, fmt.Errorf("/proc/stat: cpu field %d: %w", i+1, err)
				}
				busy += x
			}
			cpuSeen = true
		case "btime":
			if len(f) == 2 {
				if t, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					n.StartTime = metav1.NewTime(time.Unix(t, 0))
				}
			}
		}
	}
	if !cpuSeen {
		return n, fmt.Errorf("/proc/stat: no cpu line")
	}
	n.CPU = &statsapi.CPUStats{Time: metav1.NewTime(now), UsageCoreNanoSeconds: ptr(busy * uint64(time.Second/userHZ))}

	m, err := ParseMemory(meminfo, now)
	if err != nil {
		return n, err
	}
	n.Memory = m
	return n, nil
}

// ParseMemory reads the node's memory from /proc/meminfo: available is MemAvailable, the
// working set MemTotal − MemAvailable, usage MemTotal − MemFree.
func ParseMemory(meminfo []byte, now time.Time) (*statsapi.MemoryStats, error) {
	mem := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		if len(f) == 3 && f[2] == "kB" {
			v *= 1024
		}
		mem[strings.TrimSuffix(f[0], ":")] = v
	}
	total, okT := mem["MemTotal"]
	avail, okA := mem["MemAvailable"]
	if !okT || !okA || avail > total {
		return nil, fmt.Errorf("/proc/meminfo: no MemTotal and MemAvailable")
	}
	return &statsapi.MemoryStats{Time: metav1.NewTime(now), AvailableBytes: ptr(avail), WorkingSetBytes: ptr(total - avail),
		UsageBytes: ptr(total - mem["MemFree"])}, nil
}

func ptr(v uint64) *uint64 { return &v }
