package scale

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// LoadLabel marks every object the load driver makes; pods carry it from their templates.
const LoadLabel = "scale.skiff.sh/load"

// podTimes is when a watch first saw a pod, saw it bound to a node, and saw it Running.
type podTimes struct {
	seen, scheduled, running time.Time
}

// PodTracker watches the load's pods and records each one's start-up as a client sees it
// (upstream's pod start-up SLI is creation to Running observed through a watch; creation
// timestamps have whole seconds only, so the first sight of the pod stands for its creation).
type PodTracker struct {
	mu   sync.Mutex
	pods map[types.UID]*podTimes
	// running is the pods Running now (deleted ones leave), by namespace/name.
	running map[types.UID]string
}

// TrackPods starts a pod informer over the load's pods; it stops with ctx.
func TrackPods(ctx context.Context, c kubernetes.Interface) (*PodTracker, error) {
	t := &PodTracker{pods: map[types.UID]*podTimes{}, running: map[types.UID]string{}}
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = LoadLabel
	}))
	inf := f.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { t.observe(o) },
		UpdateFunc: func(_, o any) { t.observe(o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if p, ok := o.(*corev1.Pod); ok {
				t.mu.Lock()
				delete(t.running, p.UID)
				t.mu.Unlock()
			}
		},
	})
	if err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("pod informer did not sync")
	}
	return t, nil
}

func (t *PodTracker) observe(o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	pt := t.pods[p.UID]
	if pt == nil {
		pt = &podTimes{seen: now}
		t.pods[p.UID] = pt
	}
	if pt.scheduled.IsZero() && p.Spec.NodeName != "" {
		pt.scheduled = now
	}
	running := p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil
	if running && pt.running.IsZero() {
		pt.running = now
	}
	if running {
		t.running[p.UID] = p.Namespace + "/" + p.Name
	} else {
		delete(t.running, p.UID)
	}
}

// Running is the number of the load's pods Running now.
func (t *PodTracker) Running() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.running)
}

// AnyRunning names a Running pod of the load ("" when there is none).
func (t *PodTracker) AnyRunning() (namespace, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, key := range t.running {
		namespace, name, _ = strings.Cut(key, "/")
		return namespace, name
	}
	return "", ""
}

// Startup summarises the pods first seen in [from, to): seen→scheduled, seen→Running, and
// the rates the scheduler bound them and they came up at over that window (first sight to
// last binding or last Running).
type Startup struct {
	Scheduled, Running         Latency
	SchedulePerSec, RunsPerSec float64
}

// Startup summarises the pods first seen in [from, to).
func (t *PodTracker) Startup(from, to time.Time) Startup {
	t.mu.Lock()
	defer t.mu.Unlock()
	var sched, run []time.Duration
	var first, lastSched, lastRun time.Time
	for _, pt := range t.pods {
		if pt.seen.Before(from) || !pt.seen.Before(to) {
			continue
		}
		if first.IsZero() || pt.seen.Before(first) {
			first = pt.seen
		}
		if !pt.scheduled.IsZero() {
			sched = append(sched, pt.scheduled.Sub(pt.seen))
			if pt.scheduled.After(lastSched) {
				lastSched = pt.scheduled
			}
		}
		if !pt.running.IsZero() {
			run = append(run, pt.running.Sub(pt.seen))
			if pt.running.After(lastRun) {
				lastRun = pt.running
			}
		}
	}
	s := Startup{Scheduled: latencyOf(sched), Running: latencyOf(run)}
	if d := lastSched.Sub(first).Seconds(); d > 0 {
		s.SchedulePerSec = float64(len(sched)) / d
	}
	if d := lastRun.Sub(first).Seconds(); d > 0 {
		s.RunsPerSec = float64(len(run)) / d
	}
	return s
}

// Sample is the processes' memory and CPU at one moment of a run.
type Sample struct {
	At time.Duration `json:"at"`
	// RSS and Anon are resident and anonymous resident bytes (VmRSS, RssAnon), summed.
	RSS  uint64        `json:"rss"`
	Anon uint64        `json:"anon"`
	CPU  time.Duration `json:"cpu"`
}

// Sampler reads /proc for a set of processes every interval.
type Sampler struct {
	mu      sync.Mutex
	start   time.Time
	samples []Sample
}

// Sample starts sampling pids until ctx ends.
func SampleProcesses(ctx context.Context, pids []int, every time.Duration) *Sampler {
	s := &Sampler{start: time.Now()}
	take := func() {
		var sum Sample
		for _, pid := range pids {
			p, err := ReadProc(pid)
			if err != nil {
				continue
			}
			sum.RSS += p.RSS
			sum.Anon += p.Anon
			sum.CPU += p.CPU
		}
		sum.At = time.Since(s.start)
		s.mu.Lock()
		s.samples = append(s.samples, sum)
		s.mu.Unlock()
	}
	take()
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				take()
			}
		}
	}()
	return s
}

// Samples returns a copy of the samples so far.
func (s *Sampler) Samples() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.samples...)
}

// Last is the latest sample.
func (s *Sampler) Last() Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples[len(s.samples)-1]
}

// Peak is the highest RSS and anonymous memory seen.
func (s *Sampler) Peak() (rss, anon uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.samples {
		rss, anon = max(rss, x.RSS), max(anon, x.Anon)
	}
	return rss, anon
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every Linux this runs on.
const clockTicks = 100

// ReadProc reads one process's resident and anonymous memory and CPU time from /proc.
func ReadProc(pid int) (Sample, error) {
	var s Sample
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			s.RSS = kb << 10
		case "RssAnon":
			s.Anon = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The command name may hold spaces: fields count from after its closing parenthesis.
	rest := string(stat)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) > 12 {
		utime, _ := strconv.ParseUint(fields[11], 10, 64)
		stime, _ := strconv.ParseUint(fields[12], 10, 64)
		s.CPU = time.Duration(utime+stime) * time.Second / clockTicks
	}
	return s, nil
}

// DirBytes is the size of the first file named name under dir (etcd's member/snap/db).
func DirBytes(dir, name string) int64 {
	var size int64
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || size > 0 {
			return nil
		}
		if !d.IsDir() && d.Name() == name && filepath.Base(filepath.Dir(path)) == "snap" {
			if info, err := d.Info(); err == nil {
				size = info.Size()
			}
		}
		return nil
	})
	return size
}
