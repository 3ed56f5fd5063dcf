// Package pressure is the node agent's eviction manager. Every Interval (10 s, the kubelet's
// housekeeping period) it observes the node's memory, file systems and PIDs, turns them into
// pressure conditions with agent/eviction (reported on the Node and used by pod admission),
// evicts a pod that uses more local ephemeral storage than its spec allows, and while a hard
// threshold is crossed evicts one pod at a time — the one agent/eviction
// ranks first, measured only for the resource that is short — waiting for it to end before
// looking again, as the kubelet does.
package pressure

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/agent/cgroups"
	"github.com/skiff-sh/skiff/agent/eviction"
	"github.com/skiff-sh/skiff/agent/stats"
)

// Options say what to watch and where the node keeps what its pods use.
type Options struct {
	// Thresholds are the hard and soft eviction thresholds; none means pressure is never
	// reported. MaxPodGracePeriod caps a soft eviction's grace period (seconds; 0: none).
	Thresholds        []eviction.Threshold
	MaxPodGracePeriod int64
	// TransitionPeriod holds a condition after its last crossing; Interval is the time
	// between observations (10 s when zero).
	TransitionPeriod, Interval time.Duration
	// NodeFs is a directory on the node's file system (the agent's data directory): the
	// nodefs signals are its file system's.
	NodeFs string
	// PodLogDir holds pods' logs (<ns>_<name>_<uid>/<container>/), PodsDir their volumes
	// (<uid>/volumes/empty-dir/<name>), CgroupPath the unified hierarchy's directory of pod
	// cgroups (pod<uid>/pids.current, in its QoS tier: burstable/pod<uid>/…).
	PodLogDir, PodsDir, CgroupPath string
	// Proc is procfs' mount point ("/proc" when empty).
	Proc string
	// Changed, if set, receives (without blocking) when the conditions change, so the
	// node's status is posted at once.
	Changed chan<- struct{}
	// Reclaim, if set, frees node-level disk (unused images) before a pod is evicted for
	// disk, and returns the bytes freed; when that relieves the pressure, no pod goes.
	Reclaim func(context.Context) (int64, error)
	// Event, if set, is told each condition's change by the kubelet's event reason
	// (NodeHasDiskPressure, NodeHasNoDiskPressure, …).
	Event func(reason string)
}

// Evictor is the pod manager: the pods the node runs, and ending one.
type Evictor interface {
	ActivePods() []*corev1.Pod
	Evict(ctx context.Context, pod *corev1.Pod, message string, reclaimDisk bool, grace int64) error
}

// Manager observes and evicts.
type Manager struct {
	opts    Options
	runtime runtimeapi.RuntimeServiceClient
	images  runtimeapi.ImageServiceClient
	pods    Evictor
	log     *slog.Logger
	tracker eviction.Tracker
	// lastMet are the thresholds met at the last look (Run's goroutine only).
	lastMet []eviction.Threshold

	mu    sync.Mutex
	conds eviction.Conditions
}

// New builds a manager; nothing is observed until Run.
func New(o Options, rt runtimeapi.RuntimeServiceClient, img runtimeapi.ImageServiceClient, pods Evictor, log *slog.Logger) *Manager {
	if o.Interval == 0 {
		o.Interval = 10 * time.Second
	}
	if o.Proc == "" {
		o.Proc = "/proc"
	}
	return &Manager{opts: o, runtime: rt, images: img, pods: pods, log: log.With("component", "eviction"),
		tracker: eviction.Tracker{Period: o.TransitionPeriod}}
}

// Conditions are the pressure conditions now (none under pressure before the first look).
func (m *Manager) Conditions() eviction.Conditions {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := eviction.Conditions{}
	for k, v := range m.conds {
		out[k] = v
	}
	return out
}

// Run observes every Interval until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	t := time.NewTicker(m.opts.Interval)
	defer t.Stop()
	for {
		m.synchronize(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// synchronize is one look: observe, report, and evict one pod if a threshold is crossed.
func (m *Manager) synchronize(ctx context.Context) {
	obs := m.observe(ctx)
	// A threshold crossed at the last look stays met until the signal has recovered past it
	// by its minimum reclaim.
	met := eviction.Merge(eviction.Met(m.opts.Thresholds, obs), eviction.Unresolved(m.lastMet, obs))
	m.lastMet = met
	now := time.Now()
	// Every crossed threshold, soft ones inside their grace period too, sets its condition;
	// only those due are acted on.
	m.publish(m.tracker.Observe(now, met))
	due := m.tracker.Due(now, met)
	pods := m.pods.ActivePods()
	if m.localStorageEvictions(ctx, pods) || len(due) == 0 {
		return
	}
	th := mostUrgent(due)
	if isDisk(th.Signal) && m.opts.Reclaim != nil {
		freed, err := m.opts.Reclaim(ctx)
		if err != nil {
			m.log.Warn("eviction: reclaiming unused images", "err", err)
		}
		if freed > 0 {
			m.log.Info("eviction: unused images removed", "threshold", th.String(), "freedBytes", freed)
			obs = m.observe(ctx)
			if !crossed(eviction.Unresolved([]eviction.Threshold{th}, obs), th.Signal) {
				return
			}
		}
	}
	usage, err := m.podUsage(ctx, th.Signal, pods)
	if err != nil {
		m.log.Warn("eviction: measuring pods", "signal", th.Signal, "err", err)
		return
	}
	victim, ok := eviction.Victim(th, usage)
	if !ok {
		m.log.Warn("eviction threshold crossed and no pod to evict", "threshold", th.String(), "observed", obs[th.Signal].Available)
		return
	}
	m.log.Info("eviction threshold crossed", "threshold", th.String(), "soft", th.Soft, "observed", obs[th.Signal].Available)
	m.evict(ctx, victim.Pod, eviction.Message(th, obs, victim), isDisk(th.Signal), eviction.GracePeriod(&th, victim.Pod, m.opts.MaxPodGracePeriod))
}

// localStorageEvictions evicts every pod using more local ephemeral storage than its spec
// allows, whatever the thresholds (the kubelet's local storage isolation), and says whether
// it evicted any: the kubelet then looks again before acting on thresholds.
func (m *Manager) localStorageEvictions(ctx context.Context, pods []*corev1.Pod) bool {
	if !eviction.HasLocalStorageLimits(pods) {
		return false
	}
	usage, err := m.podUsage(ctx, eviction.NodeFsAvailable, pods)
	if err != nil {
		m.log.Warn("eviction: measuring pods' local storage", "err", err)
		return false
	}
	evicted := false
	for _, u := range usage {
		msg, over := eviction.LocalStorageExceeded(u)
		if !over || eviction.IsCritical(u.Pod) {
			continue
		}
		m.evict(ctx, u.Pod, msg, true, eviction.GracePeriod(nil, u.Pod, 0))
		evicted = true
	}
	return evicted
}

// evict ends a pod and waits for it (the kubelet waits up to 30 s for its resources to be
// reclaimed) before the next look measures the node again.
func (m *Manager) evict(ctx context.Context, pod *corev1.Pod, msg string, reclaimDisk bool, grace int64) {
	m.log.Info("evicting pod", "pod", pod.Namespace+"/"+pod.Name, "gracePeriod", grace, "message", msg)
	ectx, cancel := context.WithTimeout(ctx, 30*time.Second+time.Duration(grace)*time.Second)
	defer cancel()
	if err := m.pods.Evict(ectx, pod, msg, reclaimDisk, grace); err != nil && ctx.Err() == nil {
		m.log.Warn("eviction", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
}

func (m *Manager) publish(c eviction.Conditions) {
	m.mu.Lock()
	prev := m.conds
	m.conds = c
	m.mu.Unlock()
	same := true
	for _, t := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		if prev[t] == c[t] {
			continue
		}
		same = false
		if m.opts.Event != nil && (prev != nil || c[t]) {
			m.opts.Event(eventReasons[t][c[t]])
		}
	}
	if same {
		return
	}
	m.log.Info("node pressure", "conditions", fmt.Sprint(c.Pressures()))
	if m.opts.Changed != nil {
		select {
		case m.opts.Changed <- struct{}{}:
		default:
		}
	}
}

// eventReasons are the kubelet's event reasons for each condition, off and on.
var eventReasons = map[corev1.NodeConditionType]map[bool]string{
	corev1.NodeMemoryPressure: {false: "NodeHasSufficientMemory", true: "NodeHasInsufficientMemory"},
	corev1.NodeDiskPressure:   {false: "NodeHasNoDiskPressure", true: "NodeHasDiskPressure"},
	corev1.NodePIDPressure:    {false: "NodeHasSufficientPID", true: "NodeHasInsufficientPID"},
}

// mostUrgent picks the threshold to act on: memory first, then disk space, then inodes,
// then PIDs, as the kubelet orders its signals.
func mostUrgent(met []eviction.Threshold) eviction.Threshold {
	order := []eviction.Signal{eviction.MemoryAvailable, eviction.NodeFsAvailable, eviction.ImageFsAvailable,
		eviction.NodeFsInodesFree, eviction.ImageFsInodesFree, eviction.PIDAvailable}
	for _, s := range order {
		for _, t := range met {
			if t.Signal == s {
				return t
			}
		}
	}
	return met[0]
}

func crossed(met []eviction.Threshold, s eviction.Signal) bool {
	for _, t := range met {
		if t.Signal == s {
			return true
		}
	}
	return false
}

func isDisk(s eviction.Signal) bool {
	return s != eviction.MemoryAvailable && s != eviction.PIDAvailable
}

// observe reads every signal it can; one that cannot be read is left out (and so never
// crosses its threshold) and logged.
func (m *Manager) observe(ctx context.Context) eviction.Observations {
	obs := eviction.Observations{}
	if mem, err := m.memory(); err == nil {
		obs[eviction.MemoryAvailable] = mem
	} else {
		m.log.Warn("eviction: memory", "err", err)
	}
	if space, inodes, err := statfs(m.opts.NodeFs); err == nil {
		obs[eviction.NodeFsAvailable], obs[eviction.NodeFsInodesFree] = space, inodes
	} else {
		m.log.Warn("eviction: node file system", "dir", m.opts.NodeFs, "err", err)
	}
	// The image file system is where the runtime keeps images: its own, or the node's when
	// they are the same file system (both signals then watch one).
	if resp, err := m.images.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{}); err == nil && len(resp.ImageFilesystems) > 0 {
		if mp := resp.ImageFilesystems[0].GetFsId().GetMountpoint(); mp != "" {
			if space, inodes, err := statfs(mp); err == nil {
				obs[eviction.ImageFsAvailable], obs[eviction.ImageFsInodesFree] = space, inodes
			}
		}
	}
	if pids, err := m.pids(); err == nil {
		obs[eviction.PIDAvailable] = pids
	}
	return obs
}

// memory is what the kernel can hand out without swapping (MemAvailable) of MemTotal: the
// node's working set is the rest.
func (m *Manager) memory() (eviction.Observation, error) {
	meminfo, err := os.ReadFile(filepath.Join(m.opts.Proc, "meminfo"))
	if err != nil {
		return eviction.Observation{}, err
	}
	mem, err := stats.ParseMemory(meminfo, time.Now())
	if err != nil {
		return eviction.Observation{}, err
	}
	avail, ws := *mem.AvailableBytes, *mem.WorkingSetBytes
	return eviction.Observation{Available: int64(avail), Capacity: int64(avail + ws)}, nil
}

func statfs(dir string) (space, inodes eviction.Observation, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return space, inodes, err
	}
	bs := int64(st.Bsize)
	return eviction.Observation{Available: int64(st.Bavail) * bs, Capacity: int64(st.Blocks) * bs},
		eviction.Observation{Available: int64(st.Ffree), Capacity: int64(st.Files)}, nil
}

// pids is the kernel's limit on tasks (PIDLimit) less the tasks there are now
// (/proc/loadavg's fourth field, "running/total": every thread takes a PID), as the kubelet
// reads them.
func (m *Manager) pids() (eviction.Observation, error) {
	limit, err := PIDLimit(m.opts.Proc)
	if err != nil {
		return eviction.Observation{}, err
	}
	b, err := os.ReadFile(filepath.Join(m.opts.Proc, "loadavg"))
	if err != nil {
		return eviction.Observation{}, err
	}
	tasks, err := parseLoadavgTasks(string(b))
	if err != nil {
		return eviction.Observation{}, err
	}
	return eviction.Observation{Available: limit - tasks, Capacity: limit}, nil
}

// PIDLimit is how many tasks the kernel allows (the lesser of pid_max and threads-max under
// proc, "/proc"): the node's PID capacity, as the kubelet takes it.
func PIDLimit(proc string) (int64, error) {
	limit := int64(math.MaxInt64)
	for _, f := range []string{"sys/kernel/pid_max", "sys/kernel/threads-max"} {
		b, err := os.ReadFile(filepath.Join(proc, f))
		if err != nil {
			return 0, err
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", f, err)
		}
		limit = min(limit, n)
	}
	return limit, nil
}

// parseLoadavgTasks reads the total of "running/total" in /proc/loadavg.
func parseLoadavgTasks(s string) (int64, error) {
	f := strings.Fields(s)
	if len(f) < 4 {
		return 0, fmt.Errorf("/proc/loadavg: %q has no running/total field", strings.TrimSpace(s))
	}
	_, total, ok := strings.Cut(f[3], "/")
	n, err := strconv.ParseInt(total, 10, 64)
	if !ok || err != nil {
		return 0, fmt.Errorf("/proc/loadavg: %q is not running/total", f[3])
	}
	return n, nil
}

// podUsage measures the active pods' use of the signal's resource only.
func (m *Manager) podUsage(ctx context.Context, sig eviction.Signal, pods []*corev1.Pod) ([]eviction.PodUsage, error) {
	out := make([]eviction.PodUsage, len(pods))
	byUID := map[string]*eviction.PodUsage{}
	for i, p := range pods {
		out[i] = eviction.PodUsage{Pod: p, ContainerMemory: map[string]int64{}, ContainerDisk: map[string]int64{}, EmptyDirs: map[string]int64{}}
		byUID[string(p.UID)] = &out[i]
	}
	if sig == eviction.PIDAvailable {
		for i := range out {
			dir := cgroups.Find(m.opts.CgroupPath, "/", string(out[i].Pod.UID))
			if dir == "" {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, "pids.current"))
			if err == nil {
				out[i].Processes, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			}
		}
		return out, nil
	}
	resp, err := m.runtime.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
	if err != nil {
		return nil, fmt.Errorf("container stats: %w", err)
	}
	for _, s := range resp.Stats {
		u := byUID[s.GetAttributes().GetLabels()["io.kubernetes.pod.uid"]]
		if u == nil {
			continue
		}
		name := s.GetAttributes().GetMetadata().GetName()
		if sig == eviction.MemoryAvailable {
			ws := int64(s.GetMemory().GetWorkingSetBytes().GetValue())
			u.Memory += ws
			u.ContainerMemory[name] += ws
			continue
		}
		layer := int64(s.GetWritableLayer().GetUsedBytes().GetValue())
		u.Disk += layer
		u.ContainerDisk[name] += layer
		u.Inodes += int64(s.GetWritableLayer().GetInodesUsed().GetValue())
	}
	if sig == eviction.MemoryAvailable {
		return out, nil
	}
	// Logs (each container's share) and disk-backed emptyDirs (the pod's).
	for i := range out {
		u := &out[i]
		p := u.Pod
		logs := filepath.Join(m.opts.PodLogDir, fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID))
		if entries, err := os.ReadDir(logs); err == nil {
			for _, e := range entries {
				if e.IsDir() {
					bytes, files := du(filepath.Join(logs, e.Name()))
					u.Disk += bytes
					u.Inodes += files
					u.ContainerDisk[e.Name()] += bytes
				}
			}
		}
		for _, v := range p.Spec.Volumes {
			if v.EmptyDir == nil || v.EmptyDir.Medium == corev1.StorageMediumMemory {
				continue
			}
			bytes, files := du(filepath.Join(m.opts.PodsDir, string(p.UID), "volumes", "empty-dir", v.Name))
			u.Disk += bytes
			u.Inodes += files
			u.EmptyDirs[v.Name] = bytes
		}
	}
	return out, nil
}

// du is the disk a directory tree takes (allocated blocks, as du(1)) and its entries.
func du(dir string) (bytes, entries int64) {
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone meanwhile, or unreadable: count what can be read
		}
		var st unix.Stat_t
		if unix.Lstat(path, &st) == nil {
			bytes += st.Blocks * 512
			entries++
		}
		return nil
	})
	return bytes, entries
}
