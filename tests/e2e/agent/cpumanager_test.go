package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/cpuset"

	"github.com/skiff-sh/skiff/agent/cgroups"
	"github.com/skiff-sh/skiff/agent/cpumanager"
	"github.com/skiff-sh/skiff/internal/layout"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestStaticCPUManager runs an agent with --cpu-manager-policy static --reserved-cpus 0, as an
// operator pinning a network function would: the node offers every CPU but the reserved one;
// a Guaranteed pod asking for one whole CPU runs on it alone, the pod that was running there
// already moves off it before the pinned pod starts, a pod started after it runs on what is
// left; and once the pinned pod is deleted the others get every CPU back. Each check reads
// the kernel's own answer, the Cpus_allowed_list of the container's process.
func TestStaticCPUManager(t *testing.T) {
	topo, err := cpumanager.Discover("/sys")
	if err != nil {
		t.Fatal(err)
	}
	all := topo.All()
	if all.Size() < 2 {
		t.Skipf("the static policy needs a CPU to reserve and one to give out; this machine has %s", all)
	}
	reserved := cpuset.New(all.List()[0])
	pinnedWant, err := cpumanager.Take(topo, all.Difference(reserved), 1)
	if err != nil {
		t.Fatal(err)
	}
	shared := all.Difference(pinnedWant)

	_, nsPath := framework.Netns(t)
	dir := t.TempDir()
	n := newTestNode(t, dir, nsPath, "--cpu-manager-policy", "static", "--reserved-cpus", reserved.String(), "--cpu-manager-reconcile-period", "2s")
	n.untaint()
	if got := n.kubectl("", "get", "node", n.name, "-o", "jsonpath={.status.allocatable.cpu}"); got != resource.NewQuantity(int64(all.Size()-1), resource.DecimalSI).String() {
		t.Errorf("allocatable cpu %q with %d CPUs, %s reserved", got, all.Size(), reserved)
	}

	run := func(name string, r corev1.ResourceList) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: n.name,
			Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullNever,
				Args: []string{"sleep"}, Resources: corev1.ResourceRequirements{Requests: r, Limits: r}}}}}
		if _, err := n.c.CoreV1().Pods("default").Create(n.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		n.waitPhase(name, corev1.PodRunning)
	}
	// allowed is where the kernel lets the pod's container process run.
	allowed := func(name string) string {
		t.Helper()
		p, err := n.c.CoreV1().Pods("default").Get(n.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
		parent := cgroups.Parent(n.s.CgroupRoot, p, true)
		procs := strings.Fields(readCgroup(filepath.Join(parent, id), "cgroup.procs"))
		if len(procs) == 0 {
			t.Fatalf("no process in %s's container cgroup", name)
		}
		b, err := os.ReadFile("/proc/" + procs[0] + "/status")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
				return strings.TrimSpace(v)
			}
		}
		t.Fatalf("no Cpus_allowed_list in /proc/%s/status", procs[0])
		return ""
	}

	run("early", nil)
	if got := allowed("early"); got != all.String() {
		t.Errorf("early pod before any pinning on %s, want every CPU %s", got, all)
	}
	whole := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	run("pinned", whole)
	if got := allowed("pinned"); got != pinnedWant.String() {
		t.Errorf("pinned pod on %s, want %s to itself", got, pinnedWant)
	}
	// Its CPU is its own: no CFS quota throttles it there, on its container or its pod.
	pinnedPod, err := n.c.CoreV1().Pods("default").Get(n.ctx, "pinned", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podCgroup := cgroups.Parent(n.s.CgroupRoot, pinnedPod, true)
	for what, cg := range map[string]string{"pod": podCgroup,
		"container": filepath.Join(podCgroup, strings.TrimPrefix(pinnedPod.Status.ContainerStatuses[0].ContainerID, "containerd://"))} {
		if q := readCgroup(cg, "cpu.cfs_quota_us", "cpu.max"); q != "-1" && !strings.HasPrefix(q, "max") {
			t.Errorf("pinned %s's CPU quota %q, want none", what, q)
		}
	}
	// No waiting: the early pod left the CPU before the pinned pod started.
	if got := allowed("early"); got != shared.String() {
		t.Errorf("early pod on %s once a CPU is pinned, want the shared pool %s", got, shared)
	}
	// A Guaranteed pod asking for part of a CPU shares the pool.
	half := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	if all.Size() > 2 {
		half[corev1.ResourceCPU] = resource.MustParse("1500m")
	} else {
		half[corev1.ResourceCPU] = resource.MustParse("0") // nothing left to request on two CPUs
		delete(half, corev1.ResourceCPU)
	}
	run("late", half)
	if got := allowed("late"); got != shared.String() {
		t.Errorf("late pod on %s, want the shared pool %s", got, shared)
	}

	// The assignment is in the kubelet's checkpoint format, for a restart and for the operator.
	b, err := os.ReadFile(layout.Agent{Dir: filepath.Join(dir, "agent")}.CPUManagerCheckpoint())
	if err != nil {
		t.Fatal(err)
	}
	var cp struct {
		PolicyName    string                       `json:"policyName"`
		DefaultCPUSet string                       `json:"defaultCpuSet"`
		Entries       map[string]map[string]string `json:"entries"`
	}
	pinned, err := n.c.CoreV1().Pods("default").Get(n.ctx, "pinned", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cp); err != nil || cp.PolicyName != "static" || cp.DefaultCPUSet != shared.String() ||
		len(cp.Entries) != 1 || cp.Entries[string(pinned.UID)]["c"] != pinnedWant.String() {
		t.Errorf("checkpoint %s (%v)", b, err)
	}

	// The pod resources API tells node agents the same, as the kubelet's does.
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "agent", "pod-resources", "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pr := podresourcesv1.NewPodResourcesListerClient(conn)
	list, err := pr.List(n.ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	exclusive := map[string]string{}
	for _, p := range list.PodResources {
		for _, c := range p.Containers {
			var ids []int
			for _, id := range c.CpuIds {
				ids = append(ids, int(id))
			}
			exclusive[p.Name] = cpuset.New(ids...).String()
		}
	}
	if want := map[string]string{"early": "", "pinned": pinnedWant.String(), "late": ""}; !reflect.DeepEqual(exclusive, want) {
		t.Errorf("pod resources List: %v, want %v", exclusive, want)
	}
	if alloc, err := pr.GetAllocatableResources(n.ctx, &podresourcesv1.AllocatableResourcesRequest{}); err != nil || len(alloc.CpuIds) != all.Size()-1 {
		t.Errorf("pod resources GetAllocatableResources: %v %v, want every CPU but %s", alloc, err, reserved)
	}

	// Its CPU cannot be resized in place: that would move it between CPUs of its own.
	n.kubectl("", "patch", "pod", "pinned", "--subresource", "resize", "-p",
		`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"500m"},"limits":{"cpu":"500m"}}}]}}`)
	eventually(t, 30*time.Second, "the pinned pod's resize infeasible", func() (bool, string) {
		got := n.kubectl("", "get", "pod", "pinned", "-o", `jsonpath={range .status.conditions[?(@.type=="PodResizePending")]}{.reason}: {.message}{end}`)
		return got == `Infeasible: Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`, got
	})
	if got := allowed("pinned"); got != pinnedWant.String() {
		t.Errorf("pinned pod on %s after a refused resize, want %s", got, pinnedWant)
	}

	n.kubectl("", "delete", "pod", "pinned", "--grace-period=1")
	eventually(t, 60*time.Second, "the shared pool's pods back on every CPU", func() (bool, string) {
		e, l := allowed("early"), allowed("late")
		return e == all.String() && l == all.String(), "early on " + e + ", late on " + l
	})
}
