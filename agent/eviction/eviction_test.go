package eviction

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseHard(t *testing.T) {
	ths, err := ParseHard(DefaultHard)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, th := range ths {
		got = append(got, th.String())
	}
	if strings.Join(got, ",") != DefaultHard {
		t.Errorf("defaults round-trip to %v", got)
	}
	if ths[0].Min(1<<30) != 100<<20 || ths[1].Min(1000) != 100 || ths[1].Min(1001) != 101 {
		t.Errorf("Min: %d %d %d", ths[0].Min(1<<30), ths[1].Min(1000), ths[1].Min(1001))
	}
	// 0 and 0% turn a signal off; the empty string is no thresholds.
	if ths, err := ParseHard("memory.available<0, nodefs.available<0%,pid.available<1000"); err != nil || len(ths) != 1 || ths[0].String() != "pid.available<1k" {
		t.Errorf("zeroes: %v %v", ths, err)
	}
	if ths, err := ParseHard(""); err != nil || len(ths) != 0 {
		t.Errorf("empty: %v %v", ths, err)
	}
	for in, want := range map[string]string{
		"memory.available>100Mi":                    "only < is supported",
		"memory.free<100Mi":                         `unknown signal "memory.free"`,
		"memory.available<lots":                     "not a quantity",
		"nodefs.available<101%":                     "between 0% and 100%",
		"nodefs.available<-1%":                      "between 0% and 100%",
		"memory.available<-1Mi":                     "must not be negative",
		"memory.available<1Mi,memory.available<2Mi": "given twice",
	} {
		if _, err := ParseHard(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseHard(%q) = %v, want an error with %q", in, err, want)
		}
	}
}

func FuzzParseHard(f *testing.F) {
	for _, s := range []string{DefaultHard, "", "pid.available<10%", "memory.available<1e3", "x<", "<", ",,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ths, err := ParseHard(s)
		if err != nil {
			return
		}
		// What parses prints back to statements that parse to the same thresholds.
		var parts []string
		for _, th := range ths {
			if th.Quantity == nil && (th.Percentage <= 0 || th.Percentage > 1) {
				t.Fatalf("%q: percentage %v out of range", s, th.Percentage)
			}
			parts = append(parts, th.String())
		}
		again, err := ParseHard(strings.Join(parts, ","))
		if err != nil || len(again) != len(ths) {
			t.Fatalf("%q printed as %q does not parse back: %v", s, strings.Join(parts, ","), err)
		}
	})
}

func TestMetAndTracker(t *testing.T) {
	ths, _ := ParseHard("memory.available<100Mi,nodefs.available<10%,pid.available<100")
	obs := Observations{
		MemoryAvailable: {Available: 50 << 20, Capacity: 1 << 30},
		NodeFsAvailable: {Available: 100, Capacity: 1000}, // exactly at 10%: not below
		// pid.available not observed: never met
	}
	met := Met(ths, obs)
	if len(met) != 1 || met[0].Signal != MemoryAvailable {
		t.Fatalf("Met = %v", met)
	}
	tr := &Tracker{Period: time.Minute}
	t0 := time.Unix(1000, 0)
	c := tr.Observe(t0, met)
	if !c[corev1.NodeMemoryPressure] || c[corev1.NodeDiskPressure] || c[corev1.NodePIDPressure] {
		t.Fatalf("conditions %v", c)
	}
	// Relieved, but within the transition period: still under pressure.
	if c := tr.Observe(t0.Add(59*time.Second), nil); !c[corev1.NodeMemoryPressure] {
		t.Fatalf("memory pressure dropped inside the transition period: %v", c)
	}
	if c := tr.Observe(t0.Add(61*time.Second), nil); c[corev1.NodeMemoryPressure] {
		t.Fatalf("memory pressure held past the transition period: %v", c)
	}
	// No period: the condition follows the signal.
	tr = &Tracker{}
	obs[NodeFsAvailable] = Observation{Available: 99, Capacity: 1000}
	if c := tr.Observe(t0, Met(ths, obs)); !c[corev1.NodeDiskPressure] || !c[corev1.NodeMemoryPressure] {
		t.Fatalf("conditions %v", c)
	}
	if c := tr.Observe(t0.Add(time.Second), nil); len(c.Pressures()) != 0 {
		t.Fatalf("conditions %v", c)
	}
}

func pod(name string, prio int32, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{}},
		Spec: corev1.PodSpec{Priority: &prio, Containers: []corev1.Container{{Name: "c"}}}}
	for _, m := range mods {
		m(p)
	}
	return p
}

func requests(mem, disk string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{}
		if mem != "" {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		if disk != "" {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse(disk)
		}
	}
}

func TestAdmit(t *testing.T) {
	mem := Conditions{corev1.NodeMemoryPressure: true}
	disk := Conditions{corev1.NodeDiskPressure: true}
	both := Conditions{corev1.NodeMemoryPressure: true, corev1.NodeDiskPressure: true}
	be := pod("be", 0)
	burst := pod("burst", 0, requests("64Mi", ""))
	tolerating := pod("tol", 0, func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	})
	critical := pod("crit", 2000001000)
	static := pod("static", 0, func(p *corev1.Pod) { p.Annotations["kubernetes.io/config.source"] = "file" })
	for _, c := range []struct {
		pod  *corev1.Pod
		cond Conditions
		want string
	}{
		{be, nil, ""},
		{be, Conditions{corev1.NodeMemoryPressure: false}, ""},
		{be, mem, "The node had condition: [MemoryPressure]. "},
		{burst, mem, ""},
		{tolerating, mem, ""},
		{burst, disk, "The node had condition: [DiskPressure]. "},
		{tolerating, both, "The node had condition: [MemoryPressure DiskPressure]. "},
		{critical, both, ""},
		{static, disk, ""},
	} {
		r := Admit(c.pod, c.cond)
		got := ""
		if r != nil {
			if r.Reason != "Evicted" {
				t.Errorf("%s under %v: reason %q", c.pod.Name, c.cond, r.Reason)
			}
			got = r.Message
		}
		if got != c.want {
			t.Errorf("%s under %v: %q, want %q", c.pod.Name, c.cond, got, c.want)
		}
	}
}

func TestVictim(t *testing.T) {
	memTh, _ := ParseHard("memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,pid.available<10")
	mem, disk, inodes, pids := memTh[0], memTh[1], memTh[2], memTh[3]
	use := func(p *corev1.Pod, memory, d, ino, procs int64) PodUsage {
		return PodUsage{Pod: p, Memory: memory, Disk: d, Inodes: ino, Processes: procs}
	}
	const Mi = 1 << 20
	within := use(pod("within", 0, requests("500Mi", "1Gi")), 400*Mi, 100*Mi, 10, 3)       // below its requests
	greedyLow := use(pod("greedy-low", -10, requests("100Mi", "")), 300*Mi, 300*Mi, 50, 2) // exceeds, low priority
	greedyHigh := use(pod("greedy-high", 1000), 900*Mi, 50*Mi, 5000, 1)                    // exceeds most, high priority
	critical := use(pod("critical", 2000000000), 4000*Mi, 4000*Mi, 90000, 900)
	all := []PodUsage{within, greedyHigh, critical, greedyLow}
	for _, c := range []struct {
		th   Threshold
		pods []PodUsage
		want string
	}{
		{mem, all, "greedy-low"},                                                                   // exceeding first, then lower priority
		{mem, []PodUsage{within, greedyHigh}, "greedy-high"},                                       // the one exceeding, despite priority
		{disk, []PodUsage{within, greedyHigh}, "greedy-high"},                                      // 50Mi used, none requested: exceeds
		{inodes, []PodUsage{within, greedyHigh}, "within"},                                         // no inode requests: priority decides
		{pids, []PodUsage{greedyHigh, within}, "within"},                                           // priority first
		{pids, []PodUsage{use(pod("a", 0), 0, 0, 0, 2), use(pod("b", 0), 0, 0, 0, 7)}, "b"},        // then processes
		{mem, []PodUsage{use(pod("x", 0), 10*Mi, 0, 0, 0), use(pod("y", 0), 20*Mi, 0, 0, 0)}, "y"}, // most used
	} {
		v, ok := Victim(c.th, c.pods)
		if !ok || v.Pod.Name != c.want {
			t.Errorf("%s: victim %v (%v), want %s", c.th, v.Pod, ok, c.want)
		}
	}
	if _, ok := Victim(mem, []PodUsage{critical}); ok {
		t.Error("a critical pod was picked")
	}
}

func TestMessage(t *testing.T) {
	ths, _ := ParseHard("memory.available<100Mi,nodefs.available<10%")
	obs := Observations{MemoryAvailable: {Available: 50 << 20, Capacity: 1 << 30}, NodeFsAvailable: {Available: 1 << 20, Capacity: 100 << 20}}
	p := pod("hog", 0, requests("10Mi", ""))
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "quiet"})
	u := PodUsage{Pod: p, ContainerMemory: map[string]int64{"c": 300 << 20, "quiet": 0}, ContainerDisk: map[string]int64{"c": 5 << 20, "quiet": 1 << 20}}
	if got, want := Message(ths[0], obs, u), "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container c was using 300Mi, request is 10Mi, has larger consumption of memory. "; got != want {
		t.Errorf("memory message\n got %q\nwant %q", got, want)
	}
	if got, want := Message(ths[1], obs, u), "The node was low on resource: ephemeral-storage. Threshold quantity: 10Mi, available: 1Mi. Container c was using 5Mi, request is 0, has larger consumption of ephemeral-storage. Container quiet was using 1Mi, request is 0, has larger consumption of ephemeral-storage. "; got != want {
		t.Errorf("disk message\n got %q\nwant %q", got, want)
	}
}

func TestLocalStorageExceeded(t *testing.T) {
	limit := func(q string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(q)}
		}
	}
	sized := func(q string, medium corev1.StorageMedium) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			size := resource.MustParse(q)
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
				EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size, Medium: medium}}})
		}
	}
	second := func(q string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "d", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(q)}}})
		}
	}
	const Mi = 1 << 20
	for _, c := range []struct {
		name      string
		pod       *corev1.Pod
		ctr, dirs map[string]int64
		want      string
	}{
		{"no limits", pod("p", 0), map[string]int64{"c": 900 * Mi}, map[string]int64{"data": 900 * Mi}, ""},
		{"emptyDir within", pod("p", 0, sized("8Mi", "")), nil, map[string]int64{"data": 8 * Mi}, ""},
		{"emptyDir over", pod("p", 0, sized("8Mi", "")), nil, map[string]int64{"data": 8*Mi + 4096}, `Usage of EmptyDir volume "data" exceeds the limit "8Mi". `},
		{"memory emptyDir is the tmpfs's to limit", pod("p", 0, sized("8Mi", corev1.StorageMediumMemory)), nil, map[string]int64{"data": 80 * Mi}, ""},
		// One container alone: its limit is the pod's, and the pod's message comes first.
		{"sole container over", pod("p", 0, limit("8Mi")), map[string]int64{"c": 9 * Mi}, nil, "Pod ephemeral local storage usage exceeds the total limit of containers 8Mi. "},
		{"container over, pod within", pod("p", 0, limit("8Mi"), second("100Mi")), map[string]int64{"c": 9 * Mi, "d": 0}, nil, `Container c exceeded its local ephemeral storage limit "8Mi". `},
		// Each container within its own, the pod's emptyDir tips the sum of limits.
		{"pod total over", pod("p", 0, limit("8Mi"), second("4Mi"), func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}), map[string]int64{"c": 7 * Mi, "d": 3 * Mi}, map[string]int64{"data": 3 * Mi}, "Pod ephemeral local storage usage exceeds the total limit of containers 12Mi. "},
		{"pod total within", pod("p", 0, limit("8Mi"), second("4Mi")), map[string]int64{"c": 7 * Mi, "d": 3 * Mi}, nil, ""},
	} {
		msg, over := LocalStorageExceeded(PodUsage{Pod: c.pod, ContainerDisk: c.ctr, EmptyDirs: c.dirs})
		if msg != c.want || over != (c.want != "") {
			t.Errorf("%s: %q %v, want %q", c.name, msg, over, c.want)
		}
		if HasLocalStorageLimits([]*corev1.Pod{c.pod}) != (c.name != "no limits" && c.name != "memory emptyDir is the tmpfs's to limit") {
			t.Errorf("%s: HasLocalStorageLimits = %v", c.name, !(c.name != "no limits"))
		}
	}
}

func TestParseSoft(t *testing.T) {
	ths, err := ParseSoft("memory.available<1Gi,nodefs.available<15%", "memory.available=1m30s, nodefs.available=0s")
	if err != nil {
		t.Fatal(err)
	}
	if len(ths) != 2 || !ths[0].Soft || ths[0].GracePeriod != 90*time.Second || ths[1].GracePeriod != 0 || ths[1].String() != "nodefs.available<15%" {
		t.Fatalf("ParseSoft = %+v", ths)
	}
	if ths, err := ParseSoft("", ""); err != nil || len(ths) != 0 {
		t.Errorf("empty: %v %v", ths, err)
	}
	for _, c := range []struct{ ths, grace, want string }{
		{"memory.available<1Gi", "", "has no grace period"},
		{"memory.available<1Gi", "memory.available=1m,nodefs.available=1m", "nodefs.available has no soft threshold"},
		{"memory.available<1Gi", "memory.available", "want SIGNAL=DURATION"},
		{"memory.available<1Gi", "memory.available=soon", "not a duration"},
		{"memory.available<1Gi", "memory.available=-1s", "not a duration"},
		{"memory.available<1Gi", "disk=1m", `unknown signal "disk"`},
		{"memory.available>1Gi", "memory.available=1m", "only < is supported"},
	} {
		if _, err := ParseSoft(c.ths, c.grace); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseSoft(%q, %q) = %v, want %q", c.ths, c.grace, err, c.want)
		}
	}
}

func TestDueAndGracePeriod(t *testing.T) {
	hard, _ := ParseHard("memory.available<100Mi")
	soft, _ := ParseSoft("memory.available<1Gi", "memory.available=1m")
	all := append(hard, soft...)
	var tr Tracker
	t0 := time.Unix(5000, 0)
	// Only the soft one crossed: due after its grace period, not before, and a break restarts it.
	obs := Observations{MemoryAvailable: {Available: 500 << 20, Capacity: 8 << 30}}
	if due := tr.Due(t0, Met(all, obs)); len(due) != 0 {
		t.Fatalf("due at once: %v", due)
	}
	if due := tr.Due(t0.Add(59*time.Second), Met(all, obs)); len(due) != 0 {
		t.Fatalf("due inside the grace period: %v", due)
	}
	if due := tr.Due(t0.Add(60*time.Second), Met(all, obs)); len(due) != 1 || !due[0].Soft {
		t.Fatalf("not due after the grace period: %v", due)
	}
	tr.Due(t0.Add(61*time.Second), nil) // relieved
	if due := tr.Due(t0.Add(62*time.Second), Met(all, obs)); len(due) != 0 {
		t.Fatalf("a crossing after a break inherited the old start: %v", due)
	}
	// The hard one is due at once.
	obs[MemoryAvailable] = Observation{Available: 50 << 20, Capacity: 8 << 30}
	if due := tr.Due(t0.Add(63*time.Second), Met(all, obs)); len(due) != 1 || due[0].Soft {
		t.Fatalf("hard threshold: %v", due)
	}

	p := pod("p", 0)
	if g := GracePeriod(&hard[0], p, 0); g != 1 {
		t.Errorf("hard: %d", g)
	}
	if g := GracePeriod(nil, p, 0); g != 1 {
		t.Errorf("local storage: %d", g)
	}
	if g := GracePeriod(&soft[0], p, 0); g != 0 {
		t.Errorf("soft, no maximum: %d, want 0 (the kubelet's default)", g)
	}
	if g := GracePeriod(&soft[0], p, 45); g != 45 {
		t.Errorf("soft, maximum 45, pod's default: %d", g)
	}
	p.Spec.TerminationGracePeriodSeconds = ptrTo(int64(20))
	if g := GracePeriod(&soft[0], p, 45); g != 20 {
		t.Errorf("soft, the pod's shorter own: %d", g)
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestMinimumReclaim(t *testing.T) {
	hard, err := ParseHard("memory.available<100Mi,nodefs.available<10%")
	if err != nil {
		t.Fatal(err)
	}
	ths, err := ParseMinReclaim("memory.available=50Mi, nodefs.available=5%", hard)
	if err != nil {
		t.Fatal(err)
	}
	if hard[0].MinReclaim != nil {
		t.Error("ParseMinReclaim changed the thresholds it was given")
	}
	mem, disk := ths[0], ths[1]
	if got := mem.Target(1 << 30); got != 150<<20 {
		t.Errorf("memory target %d, want 150Mi", got)
	}
	if got := disk.Target(1000); got != 150 {
		t.Errorf("nodefs target of 1000 bytes %d, want 150 (10%% + 5%%)", got)
	}
	// A look: crossed (90Mi < 100Mi). Recovering to 120Mi is past the threshold but not by
	// 50Mi: still met, as the kubelet's. At 150Mi it is cleared.
	gi := int64(1 << 30)
	prev := Merge(Met(ths, Observations{MemoryAvailable: {90 << 20, gi}}), nil)
	if len(prev) != 1 || prev[0].Signal != MemoryAvailable {
		t.Fatalf("met at 90Mi: %v", prev)
	}
	for avail, want := range map[int64]int{120 << 20: 1, 149 << 20: 1, 150 << 20: 0, 1 << 30: 0} {
		obs := Observations{MemoryAvailable: {avail, gi}}
		got := Merge(Met(ths, obs), Unresolved(prev, obs))
		if len(got) != want {
			t.Errorf("after crossing, at %d MiB available: %d thresholds met, want %d", avail>>20, len(got), want)
		}
		// Without a prior crossing only the threshold itself counts.
		if got := Merge(Met(ths, obs), Unresolved(nil, obs)); len(got) != 0 {
			t.Errorf("never crossed, at %d MiB: %v met", avail>>20, got)
		}
	}
	// No minimum reclaim: cleared as soon as the threshold is.
	if got := Unresolved(hard[:1], Observations{MemoryAvailable: {100 << 20, gi}}); len(got) != 0 {
		t.Errorf("no minimum reclaim, at the threshold: %v", got)
	}
	// Merge keeps one of each (signal, soft).
	soft := hard[0]
	soft.Soft = true
	if got := Merge([]Threshold{hard[0], hard[1]}, []Threshold{hard[0], soft}); len(got) != 3 {
		t.Errorf("merge: %v", got)
	}

	for in, msg := range map[string]string{
		"memory.available":                          `eviction minimum reclaim "memory.available": want SIGNAL=QUANTITY or SIGNAL=PERCENT%`,
		"memory.free=1Mi":                           `eviction minimum reclaim "memory.free=1Mi": unknown signal "memory.free" (known: imagefs.available, imagefs.inodesFree, memory.available, nodefs.available, nodefs.inodesFree, pid.available)`,
		"memory.available=1Mi,memory.available=2Mi": `eviction minimum reclaim "memory.available=2Mi": signal "memory.available" given twice`,
		"memory.available=120%":                     `eviction minimum reclaim "memory.available=120%": "120%" is not a percentage between 0% and 100%`,
		"memory.available=lots":                     `eviction minimum reclaim "memory.available=lots": "lots" is not a quantity (e.g. 100Mi) or a percentage`,
		"memory.available=-1Mi":                     `eviction minimum reclaim "memory.available=-1Mi": must not be negative`,
		"pid.available=100":                         `eviction minimum reclaim "pid.available=100": pid.available has no eviction threshold`,
	} {
		if _, err := ParseMinReclaim(in, hard); err == nil || err.Error() != msg {
			t.Errorf("ParseMinReclaim(%q) = %v, want %q", in, err, msg)
		}
	}
}

func FuzzParseMinReclaim(f *testing.F) {
	for _, s := range []string{"memory.available=50Mi", "nodefs.available=5%", "", "x=y", "memory.available=1e3,nodefs.available=0", "memory.available=9e18"} {
		f.Add(s)
	}
	hard, err := ParseHard(DefaultHard)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ths, err := ParseMinReclaim(s, hard)
		if err != nil {
			return
		}
		for _, th := range ths {
			if th.Target(1<<30) < th.Min(1<<30) {
				t.Fatalf("%q: %s target below its threshold", s, th)
			}
		}
	})
}
