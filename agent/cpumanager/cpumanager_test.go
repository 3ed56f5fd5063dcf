package cpumanager

import (
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"
)

// dualSocketHT is two sockets of four cores of two threads, numbered as Linux numbers them:
// CPU i and i+8 are one core's threads, 0-3 and 8-11 the first socket.
func dualSocketHT() Topology {
	var t Topology
	for id := 0; id < 16; id++ {
		c := id % 8
		t.CPUs = append(t.CPUs, CPU{ID: id, Core: c % 4, Socket: c / 4, NUMA: c / 4})
	}
	return t
}

// flat is n single-thread cores on one socket, as this machine and most VMs.
func flat(n int) Topology {
	var t Topology
	for id := 0; id < n; id++ {
		t.CPUs = append(t.CPUs, CPU{ID: id, Core: id})
	}
	return t
}

func set(s string) cpuset.CPUSet {
	c, err := cpuset.Parse(s)
	if err != nil {
		panic(err)
	}
	return c
}

func TestTake(t *testing.T) {
	ht := dualSocketHT()
	for _, c := range []struct {
		name  string
		topo  Topology
		avail string
		n     int
		want  string
	}{
		{"a whole socket", ht, "0-15", 8, "0-3,8-11"},
		{"the free socket when the other is in use", ht, "1-7,9-15", 8, "4-7,12-15"},
		{"a socket and a core", ht, "0-15", 10, "0-4,8-12"},
		{"a whole core, on the fuller socket", ht, "1-15", 2, "1,9"},
		{"a thread beside a used one", ht, "1-15", 1, "8"},
		{"a core then a lone thread", ht, "1-15", 3, "1,8-9"},
		{"nothing", ht, "0-15", 0, ""},
		{"the lowest of a flat machine", flat(4), "1-3", 2, "1-2"},
		{"all that is left", flat(2), "1", 1, "1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Take(c.topo, set(c.avail), c.n)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equals(set(c.want)) {
				t.Errorf("Take(%s, %d) = %s, want %s", c.avail, c.n, got, c.want)
			}
		})
	}
	_, err := Take(ht, set("1-3"), 4)
	if err == nil || err.Error() != "not enough cpus available to satisfy request: requested=4, available=3" {
		t.Errorf("Take of 4 from 3: %v", err)
	}
}

// TestTakeProperties takes random amounts from random topologies until they are used up:
// every answer has exactly the CPUs asked for, all of them free, and whole cores are taken
// whole where a request covers one.
func TestTakeProperties(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for round := 0; round < 300; round++ {
		sockets, cores, threads := 1+r.Intn(3), 1+r.Intn(6), 1+r.Intn(2)
		var topo Topology
		for s := 0; s < sockets; s++ {
			for c := 0; c < cores; c++ {
				for th := 0; th < threads; th++ {
					topo.CPUs = append(topo.CPUs, CPU{ID: th*sockets*cores + s*cores + c, Core: c, Socket: s})
				}
			}
		}
		free := topo.All()
		for !free.IsEmpty() {
			n := 1 + r.Intn(free.Size())
			got, err := Take(topo, free, n)
			if err != nil {
				t.Fatalf("round %d: Take(%s, %d): %v", round, free, n, err)
			}
			if got.Size() != n || !got.IsSubsetOf(free) {
				t.Fatalf("round %d: Take(%s, %d) = %s", round, free, n, got)
			}
			if threads == 2 && n%2 == 0 && free.Equals(topo.All()) {
				// From a fresh node an even request is whole cores: no thread without its sibling.
				for _, id := range got.List() {
					if sib := (id + sockets*cores) % (2 * sockets * cores); !got.Contains(sib) {
						t.Fatalf("round %d: Take(%d) = %s splits the core of %d", round, n, got, id)
					}
				}
			}
			free = free.Difference(got)
		}
	}
}

func guaranteed(name string, cpu string, init ...corev1.Container) *corev1.Pod {
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")}
	return &corev1.Pod{Spec: corev1.PodSpec{InitContainers: init, Containers: []corev1.Container{{Name: name,
		Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl}}}}}
}

func container(name, cpu string, always bool) corev1.Container {
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")}
	c := corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl}}
	if always {
		p := corev1.ContainerRestartPolicyAlways
		c.RestartPolicy = &p
	}
	return c
}

func TestExclusive(t *testing.T) {
	p := guaranteed("c", "2")
	if n := Exclusive(p, &p.Spec.Containers[0]); n != 2 {
		t.Errorf("Guaranteed 2 CPUs: %d", n)
	}
	p = guaranteed("c", "1500m")
	if n := Exclusive(p, &p.Spec.Containers[0]); n != 0 {
		t.Errorf("Guaranteed 1.5 CPUs: %d, want the shared pool", n)
	}
	p = guaranteed("c", "1")
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	if n := Exclusive(p, &p.Spec.Containers[0]); n != 0 {
		t.Errorf("Burstable 1 CPU: %d, want the shared pool", n)
	}
	p = guaranteed("c", "1")
	p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	if n := Exclusive(p, &p.Spec.Containers[0]); n != 0 {
		t.Errorf("pod-level resources: %d, want the shared pool", n)
	}
}

func TestPlan(t *testing.T) {
	topo := flat(8)
	s := State{Reserved: set("0"), Pods: map[string]Assignment{"other": {"c": set("1-2")}}}
	a, err := Plan(topo, s, guaranteed("app", "2", container("init", "3", false), container("sidecar", "1", true)))
	if err != nil {
		t.Fatal(err)
	}
	// init takes 3-5 and finishes; the sidecar, started after it, reuses 3 and keeps it while
	// the app runs beside it on init's other two.
	want := Assignment{"init": set("3-5"), "sidecar": set("3"), "app": set("4-5")}
	if len(a) != len(want) {
		t.Fatalf("Plan = %v, want %v", a, want)
	}
	for k, v := range want {
		if !a[k].Equals(v) {
			t.Errorf("%s: %s, want %s", k, a[k], v)
		}
	}
	if a, err := Plan(topo, s, guaranteed("app", "500m")); a != nil || err != nil {
		t.Errorf("a pod on the shared pool: %v %v", a, err)
	}
	_, err = Plan(topo, s, guaranteed("app", "6"))
	if err == nil || err.Error() != "not enough cpus available to satisfy request: requested=6, available=5" {
		t.Errorf("too many: %v", err)
	}
	if got := s.Shared(topo); !got.Equals(set("0,3-7")) {
		t.Errorf("shared pool %s", got)
	}
}

func TestManager(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cpu_manager_state")
	topo := flat(4)
	if _, err := New(topo, cpuset.New(), file); err == nil || !strings.Contains(err.Error(), "--reserved-cpus") {
		t.Errorf("no reserved CPUs: %v", err)
	}
	if _, err := New(topo, set("0-3"), file); err == nil {
		t.Error("every CPU reserved: no error")
	}
	if _, err := New(topo, set("4"), file); err == nil {
		t.Error("a reserved CPU the node lacks: no error")
	}
	m, err := New(topo, set("0"), file)
	if err != nil {
		t.Fatal(err)
	}
	p := guaranteed("app", "2")
	p.UID = "pod-a"
	if took, err := m.Admit(p); !took || err != nil {
		t.Fatalf("Admit: %v %v", took, err)
	}
	if took, err := m.Admit(p); took || err != nil {
		t.Fatalf("Admit again: %v %v, want nothing more taken", took, err)
	}
	if got := m.CPUs("pod-a", "app"); !got.Equals(set("1-2")) {
		t.Errorf("app on %s", got)
	}
	if got := m.CPUs("pod-b", "x"); !got.Equals(set("0,3")) {
		t.Errorf("a shared container on %s", got)
	}
	q := guaranteed("big", "2")
	q.UID = "pod-b"
	if _, err := m.Admit(q); err == nil || !strings.Contains(err.Error(), "requested=2, available=1") {
		t.Errorf("Admit beyond the free CPUs: %v", err)
	}
	b, err := os.ReadFile(file)
	if err != nil || string(b) != `{"policyName":"static","defaultCpuSet":"0,3","entries":{"pod-a":{"app":"1-2"}}}` {
		t.Errorf("checkpoint %s %v", b, err)
	}

	// A restart finds the assignment; a node whose reserved CPUs now overlap it refuses.
	m2, err := New(topo, set("0"), file)
	if err != nil {
		t.Fatal(err)
	}
	if got := m2.CPUs("pod-a", "app"); !got.Equals(set("1-2")) {
		t.Errorf("after a restart app on %s", got)
	}
	if _, err := New(topo, set("0-1"), file); err == nil || !strings.Contains(err.Error(), "remove the file") {
		t.Errorf("reserved CPUs over an assignment: %v", err)
	}
	if took, err := m2.Retain(func(uid types.UID) bool { return uid != "pod-a" }); !took || err != nil {
		t.Errorf("Retain: %v %v", took, err)
	}
	if got := m2.Shared(); !got.Equals(set("0-3")) {
		t.Errorf("shared pool after release: %s", got)
	}
	if err := os.WriteFile(file, []byte(`{"policyName":"none","defaultCpuSet":"0-3"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(topo, set("0"), file); err == nil || !strings.Contains(err.Error(), `policy "none"`) {
		t.Errorf("another policy's checkpoint: %v", err)
	}
	if err := os.WriteFile(file, []byte(`{"policyName":"static","entries":{"a":{"c":"1"},"b":{"c":"1"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(topo, set("0"), file); err == nil || !strings.Contains(err.Error(), "CPU 1 is given to pods") {
		t.Errorf("a CPU given twice: %v", err)
	}
}

func TestDiscover(t *testing.T) {
	sys := t.TempDir()
	write := func(p, v string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(sys, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sys, p), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("devices/system/cpu/online", "0-2")
	for id, cs := range [][2]string{{"0", "0"}, {"1", "0"}, {"0", "1"}} {
		dir := "devices/system/cpu/cpu" + string(rune('0'+id)) + "/topology/"
		write(dir+"core_id", cs[0])
		write(dir+"physical_package_id", cs[1])
	}
	write("devices/system/node/node0/cpulist", "0-1")
	write("devices/system/node/node1/cpulist", "2")
	topo, err := Discover(sys)
	if err != nil {
		t.Fatal(err)
	}
	want := []CPU{{0, 0, 0, 0}, {1, 1, 0, 0}, {2, 0, 1, 1}}
	if len(topo.CPUs) != 3 {
		t.Fatalf("%v", topo.CPUs)
	}
	for i, c := range want {
		if topo.CPUs[i] != c {
			t.Errorf("CPU %d: %+v, want %+v", i, topo.CPUs[i], c)
		}
	}
	// This machine's own topology reads too.
	if real, err := Discover("/sys"); err != nil || len(real.CPUs) == 0 {
		t.Errorf("Discover(/sys): %v %v", real, err)
	}
}

// FuzzCheckpoint feeds New any checkpoint: it is refused with an error or restored with
// every assignment on CPUs that may be given out, never a panic.
func FuzzCheckpoint(f *testing.F) {
	f.Add(`{"policyName":"static","defaultCpuSet":"0,3","entries":{"pod-a":{"app":"1-2"}}}`)
	f.Add(`{"policyName":"static","entries":{"a":{"c":"1"},"b":{"c":"1"}}}`)
	f.Add(`{"policyName":"static","entries":{"a":{"c":"9-"}}}`)
	f.Add(`{"policyName":"none"}`)
	f.Add(`{`)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data string) {
		file := filepath.Join(dir, "state")
		if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		topo := flat(4)
		m, err := New(topo, set("0"), file)
		if err != nil {
			return
		}
		if got := m.state.Assigned(); !got.IsSubsetOf(set("1-3")) {
			t.Errorf("restored %s, outside 1-3", got)
		}
	})
}
