package cgroups

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func rl(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func container(name string, req, lim corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
}

func podOf(cs ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Spec: corev1.PodSpec{Containers: cs}}
}

func TestPodParent(t *testing.T) {
	for qos, want := range map[corev1.PodQOSClass]string{
		corev1.PodQOSGuaranteed: "/skiff/podu1", corev1.PodQOSBurstable: "/skiff/burstable/podu1",
		corev1.PodQOSBestEffort: "/skiff/besteffort/podu1",
	} {
		if got := PodParent("skiff", qos, "u1"); got != want {
			t.Errorf("%s: %s, want %s", qos, got, want)
		}
	}
	p := podOf(container("a", nil, nil))
	if got := Parent("/skiff", p, true); got != "/skiff/besteffort/podu1" {
		t.Errorf("per QoS: %s", got)
	}
	if got := Parent("/skiff", p, false); got != "/skiff/podu1" {
		t.Errorf("flat: %s", got)
	}
	p.Status.QOSClass = corev1.PodQOSBurstable // the API server's record wins
	if got := Parent("/skiff", p, true); got != "/skiff/burstable/podu1" {
		t.Errorf("recorded class: %s", got)
	}
}

func TestResourcesForPod(t *testing.T) {
	sidecar := container("proxy", rl("cpu", "100m", "memory", "64Mi"), rl("cpu", "200m", "memory", "128Mi"))
	always := corev1.ContainerRestartPolicyAlways
	sidecar.RestartPolicy = &always
	withSidecar := podOf(container("app", rl("cpu", "1", "memory", "1Gi"), rl("cpu", "2", "memory", "2Gi")))
	withSidecar.Spec.InitContainers = []corev1.Container{sidecar, container("init", rl("cpu", "3"), rl("cpu", "3", "memory", "3Gi"))}
	withOverhead := podOf(container("app", rl("cpu", "500m", "memory", "256Mi"), rl("cpu", "500m", "memory", "256Mi")))
	withOverhead.Spec.Overhead = rl("cpu", "250m", "memory", "64Mi")
	podLevel := podOf(container("a", rl("cpu", "100m"), nil), container("b", nil, nil))
	podLevel.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("cpu", "2", "memory", "2Gi")}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		maxPIDs int64
		want    PodResources
	}{
		{"best effort: least weight, no limits", podOf(container("a", nil, nil)), 0, PodResources{CPUShares: 2}},
		{"best effort with a pid limit", podOf(container("a", nil, nil)), 1024, PodResources{CPUShares: 2, PIDs: 1024}},
		{"guaranteed: weight, quota and memory", podOf(container("a", rl("cpu", "1500m", "memory", "1Gi"), rl("cpu", "1500m", "memory", "1Gi"))), -1,
			PodResources{CPUShares: 1536, CPUQuota: 150000, Memory: 1 << 30}},
		// Requests as the API server defaults them from limits.
		{"guaranteed, two containers sum", podOf(container("a", rl("cpu", "1", "memory", "1Gi"), rl("cpu", "1", "memory", "1Gi")),
			container("b", rl("cpu", "250m", "memory", "512Mi"), rl("cpu", "250m", "memory", "512Mi"))), 0,
			PodResources{CPUShares: 1280, CPUQuota: 125000, Memory: 1536 << 20}},
		{"burstable, requests only: weight alone", podOf(container("a", rl("cpu", "250m", "memory", "64Mi"), nil)), 0, PodResources{CPUShares: 256}},
		{"burstable, memory limit on every container", podOf(container("a", rl("cpu", "100m"), rl("memory", "128Mi")), container("b", nil, rl("memory", "64Mi"))), 0,
			PodResources{CPUShares: 102, Memory: 192 << 20}},
		{"burstable, one container without a cpu limit: no quota", podOf(container("a", rl("cpu", "100m"), rl("cpu", "1")), container("b", rl("cpu", "100m"), nil)), 0,
			PodResources{CPUShares: 204}},
		{"tiny cpu limit: the least quota", podOf(container("a", rl("cpu", "1m"), rl("cpu", "5m"))), 0, PodResources{CPUShares: 2, CPUQuota: 1000}},
		{"sidecars add, init containers take the max", withSidecar, 0,
			// requests: max(app 1 + sidecar 0.1, init 3 + sidecar 0.1) = 3.1 CPU; every
			// container declares both limits: max(2 + 0.2, 3 + 0.2) CPU, max(2Gi + 128Mi, 3Gi + 128Mi).
			PodResources{CPUShares: 3174, CPUQuota: 320000, Memory: (3 << 30) + (128 << 20)}},
		{"runtime class overhead added", withOverhead, 0, PodResources{CPUShares: 768, CPUQuota: 75000, Memory: 320 << 20}},
		{"pod-level resources", podLevel, 0, PodResources{CPUShares: 1024, CPUQuota: 200000, Memory: 2 << 30}},
	} {
		if got := ResourcesForPod(tc.pod, PodPolicy{MaxPIDs: tc.maxPIDs}); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestResourcesForPodWithoutCFSQuota(t *testing.T) {
	p := podOf(container("a", rl("cpu", "1", "memory", "1Gi"), rl("cpu", "1", "memory", "1Gi")))
	want := PodResources{CPUShares: 1024, Memory: 1 << 30, PIDs: 100}
	if got := ResourcesForPod(p, PodPolicy{MaxPIDs: 100, NoCFSQuota: true}); got != want {
		t.Errorf("%+v, want %+v: no quota, the rest as ever", got, want)
	}
}

func TestBurstableShares(t *testing.T) {
	pods := []*corev1.Pod{
		podOf(container("a", rl("cpu", "500m"), nil)),
		podOf(container("a", rl("cpu", "250m"), rl("cpu", "1"))),
		podOf(container("a", rl("cpu", "2", "memory", "1Gi"), rl("cpu", "2", "memory", "1Gi"))), // Guaranteed
		podOf(container("a", nil, nil)),                                                         // BestEffort
	}
	if got := BurstableShares(pods); got != 768 {
		t.Errorf("%d, want 768 (750m)", got)
	}
	if got := BurstableShares(nil); got != 2 {
		t.Errorf("no pods: %d, want the least, 2", got)
	}
}

func TestQuotaFromMilliCPU(t *testing.T) {
	for milli, want := range map[int64]int64{0: 0, -5: 0, 1: 1000, 10: 1000, 11: 1100, 1000: 100000, 2500: 250000} {
		if got := QuotaFromMilliCPU(milli); got != want {
			t.Errorf("%dm: %d, want %d", milli, got, want)
		}
	}
}

func TestLooser(t *testing.T) {
	for _, tc := range []struct {
		file, cur, next string
		want            bool
	}{
		{"memory.limit_in_bytes", "1048576", "2097152", true},
		{"memory.limit_in_bytes", "2097152", "1048576", false},
		{"memory.limit_in_bytes", "9223372036854771712", "1048576", false},
		{"memory.limit_in_bytes", "1048576", "-1", true},
		{"memory.max", "max", "1048576", false},
		{"memory.max", "1048576", "max", true},
		{"cpu.cfs_quota_us", "-1", "50000", false},
		{"cpu.cfs_quota_us", "50000", "-1", true},
		{"cpu.cfs_quota_us", "50000", "100000", true},
		{"cpu.max", "50000 100000", "100000 100000", true},
		{"cpu.max", "max 100000", "100000 100000", false},
		{"pids.max", "10", "10", false},
		{"cpu.shares", "1024", "2", true},
		{"cpu.weight", "100", "1", true},
	} {
		if got := looser(tc.file, tc.cur, tc.next); got != tc.want {
			t.Errorf("%s %s → %s: %v, want %v", tc.file, tc.cur, tc.next, got, tc.want)
		}
	}
}

// TestApplyPodFiles writes into stand-in hierarchies (directories with the interface files a
// v1 cpu, a v1 memory and a v2 hierarchy have) and checks each gets its own files, and that
// loosenOnly raises but never lowers.
func TestApplyPodFiles(t *testing.T) {
	v1cpu, v1mem, v2 := t.TempDir(), t.TempDir(), t.TempDir()
	parent := PodParent("/skiff", corev1.PodQOSBurstable, "u1")
	touch := func(dir string, files map[string]string) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	touch(filepath.Join(v1cpu, parent), map[string]string{"cpu.shares": "1024", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "-1"})
	touch(filepath.Join(v1mem, parent), map[string]string{"memory.limit_in_bytes": "9223372036854771712"})
	// A v2 hierarchy: cgroup.controllers at every level, subtree_control to enable.
	for _, d := range []string{"", "skiff", "skiff/burstable"} {
		touch(filepath.Join(v2, d), map[string]string{"cgroup.controllers": "cpu memory pids", "cgroup.subtree_control": ""})
	}
	touch(filepath.Join(v2, parent), map[string]string{"cgroup.controllers": "cpu memory pids", "cpu.weight": "100", "cpu.max": "max 100000", "memory.max": "max", "pids.max": "max"})
	mounts := []string{v1cpu, v1mem, v2}
	read := func(m, f string) string {
		b, err := os.ReadFile(filepath.Join(m, parent, f))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	if err := ApplyPod(mounts, parent, PodResources{CPUShares: 512, CPUQuota: 50000, Memory: 64 << 20, PIDs: 100}, false); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ m, f, want string }{
		{v1cpu, "cpu.shares", "512"}, {v1cpu, "cpu.cfs_quota_us", "50000"}, {v1mem, "memory.limit_in_bytes", "67108864"},
		{v2, "cpu.weight", "20"}, {v2, "cpu.max", "50000 100000"}, {v2, "memory.max", "67108864"}, {v2, "pids.max", "100"},
	} {
		if got := read(c.m, c.f); got != c.want {
			t.Errorf("%s: %q, want %q", c.f, got, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(v1cpu, parent, "memory.limit_in_bytes")); err == nil {
		t.Error("wrote a memory file into the cpu hierarchy")
	}

	// Loosening toward more CPU and less memory: the quota rises, the memory stays.
	if err := ApplyPod(mounts, parent, PodResources{CPUShares: 1024, CPUQuota: 100000, Memory: 32 << 20, PIDs: 100}, true); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ m, f, want string }{
		{v1cpu, "cpu.shares", "1024"}, {v1cpu, "cpu.cfs_quota_us", "100000"}, {v1mem, "memory.limit_in_bytes", "67108864"},
		{v2, "cpu.max", "100000 100000"}, {v2, "memory.max", "67108864"},
	} {
		if got := read(c.m, c.f); got != c.want {
			t.Errorf("loosened %s: %q, want %q", c.f, got, c.want)
		}
	}
	// Then the whole of it: memory comes down, the limits lifted where unset.
	if err := ApplyPod(mounts, parent, PodResources{CPUShares: 1024, Memory: 32 << 20}, false); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ m, f, want string }{
		{v1cpu, "cpu.cfs_quota_us", "-1"}, {v1mem, "memory.limit_in_bytes", "33554432"}, {v2, "cpu.max", "max 100000"}, {v2, "pids.max", "max"},
	} {
		if got := read(c.m, c.f); got != c.want {
			t.Errorf("applied %s: %q, want %q", c.f, got, c.want)
		}
	}
}

// TestEnsureQOSFiles makes the tiers in a stand-in v2 hierarchy and a v1 cpu one: the weights
// are written, the controllers enabled down to the root, and nothing else is created.
func TestEnsureQOSFiles(t *testing.T) {
	v1cpu, v2 := t.TempDir(), t.TempDir()
	for _, d := range []string{"", "skiff"} {
		if err := os.MkdirAll(filepath.Join(v2, d), 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range map[string]string{"cgroup.controllers": "cpu memory pids io", "cgroup.subtree_control": ""} {
			if err := os.WriteFile(filepath.Join(v2, d, f), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The kernel would make a new cgroup's interface files; stand in for it.
	for _, m := range []string{v1cpu, v2} {
		for _, tier := range []string{BurstableTier, BestEffortTier} {
			dir := filepath.Join(m, "skiff", tier)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			f := "cpu.shares"
			if m == v2 {
				f = "cpu.weight"
			}
			if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A stand-in file keeps only its last write; the kernel's subtree_control adds each
	// controller written to it. Record the writes.
	enabled := map[string][]string{}
	writeFile = func(name string, data []byte, perm os.FileMode) error {
		if filepath.Base(name) == "cgroup.subtree_control" {
			rel, _ := filepath.Rel(v2, filepath.Dir(name))
			enabled[rel] = append(enabled[rel], string(data))
		}
		return os.WriteFile(name, data, perm)
	}
	t.Cleanup(func() { writeFile = os.WriteFile })
	if err := EnsureQOS([]string{v1cpu, v2}, "/skiff", 768); err != nil {
		t.Fatal(err)
	}
	// Down to the tiers' parent, once per tier: the stand-in never shows them on. Not io, which
	// the hierarchy has but pods are not limited by; nothing in the tiers themselves.
	want := map[string][]string{".": {"+cpu", "+memory", "+pids", "+cpu", "+memory", "+pids"}, "skiff": {"+cpu", "+memory", "+pids", "+cpu", "+memory", "+pids"}}
	if !reflect.DeepEqual(enabled, want) {
		t.Errorf("controllers enabled: %v, want %v", enabled, want)
	}
	for _, c := range []struct{ file, want string }{
		{filepath.Join(v1cpu, "skiff/burstable/cpu.shares"), "768"}, {filepath.Join(v1cpu, "skiff/besteffort/cpu.shares"), "2"},
		{filepath.Join(v2, "skiff/burstable/cpu.weight"), "30"}, {filepath.Join(v2, "skiff/besteffort/cpu.weight"), "1"},
	} {
		if b, err := os.ReadFile(c.file); err != nil || string(b) != c.want {
			t.Errorf("%s: %q %v, want %q", c.file, b, err, c.want)
		}
	}
	entries, err := os.ReadDir(filepath.Join(v2, "skiff", BurstableTier))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			t.Errorf("EnsureQOS made %s under the burstable tier", e.Name())
		}
	}
}
