package agent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/agent/cgroups"
	"github.com/skiff-sh/skiff/agent/runtime"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestPodCgroupsPerQOS runs a Guaranteed, a Burstable and a BestEffort pod on an agent with
// --pod-max-pids and checks each pod's cgroup is in its class's tier with the limits the
// kubelet gives it — CPU weight from requests, quota and memory from limits, the PID limit —
// that the tiers weigh what their pods request, and that an in-place resize of the
// Burstable pod's CPU limit up and then down reaches the pod's cgroup (up before the
// container's: cgroup v1 refuses a container quota above its pod's, so the order matters).
func TestPodCgroupsPerQOS(t *testing.T) {
	_, nsPath := framework.Netns(t)
	n := newTestNode(t, t.TempDir(), nsPath, "--pod-max-pids", "256")
	n.untaint()
	rl := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	pods := map[string]corev1.ResourceRequirements{
		"guaranteed": {Requests: rl("cpu", "500m", "memory", "64Mi"), Limits: rl("cpu", "500m", "memory", "64Mi")},
		"burstable":  {Requests: rl("cpu", "250m", "memory", "32Mi"), Limits: rl("cpu", "1", "memory", "128Mi")},
		"besteffort": {},
	}
	uids := map[string]string{}
	for name, r := range pods {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: n.name,
			Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullNever,
				Args: []string{"sleep"}, Resources: r}}}}
		created, err := n.c.CoreV1().Pods("default").Create(n.ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[name] = string(created.UID)
	}
	for name := range pods {
		n.waitPhase(name, corev1.PodRunning)
	}
	// kubectl shows the classes the tiers are named for.
	if out := n.kubectl("", "get", "pods", "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.qosClass} {end}"); out != "besteffort=BestEffort burstable=Burstable guaranteed=Guaranteed " {
		t.Fatalf("QoS classes: %q", out)
	}

	weight := func(shares string) string { // "512|20": v1 shares or the v2 weight runc maps them to
		return shares + "|" + map[string]string{"2": "1", "256": "10", "512": "20"}[shares]
	}
	root := n.s.CgroupRoot
	check := func(what, cgroup, want string, files ...string) {
		t.Helper()
		if got := readCgroup(cgroup, files...); !strings.Contains("|"+want+"|", "|"+got+"|") || got == "" {
			t.Errorf("%s (%s %v): %q, want %s", what, cgroup, files, got, want)
		}
	}
	g := cgroups.PodParent(root, corev1.PodQOSGuaranteed, uids["guaranteed"])
	b := cgroups.PodParent(root, corev1.PodQOSBurstable, uids["burstable"])
	be := cgroups.PodParent(root, corev1.PodQOSBestEffort, uids["besteffort"])
	check("guaranteed weight", g, weight("512"), "cpu.shares", "cpu.weight")
	check("guaranteed quota", g, "50000|50000 100000", "cpu.cfs_quota_us", "cpu.max")
	check("guaranteed memory", g, "67108864", "memory.limit_in_bytes", "memory.max")
	check("burstable weight", b, weight("256"), "cpu.shares", "cpu.weight")
	check("burstable quota", b, "100000|100000 100000", "cpu.cfs_quota_us", "cpu.max")
	check("burstable memory", b, "134217728", "memory.limit_in_bytes", "memory.max")
	check("besteffort weight", be, weight("2"), "cpu.shares", "cpu.weight")
	check("besteffort quota", be, "-1|max 100000", "cpu.cfs_quota_us", "cpu.max")
	for name, c := range map[string]string{"guaranteed": g, "burstable": b, "besteffort": be} {
		check(name+" pids", c, "256", "pids.max")
	}
	check("the burstable tier's weight: its pods' requests", filepath.Join(root, cgroups.BurstableTier), weight("256"), "cpu.shares", "cpu.weight")
	check("the besteffort tier's weight: the least", filepath.Join(root, cgroups.BestEffortTier), weight("2"), "cpu.shares", "cpu.weight")

	// The pods' processes are in those cgroups: the container's cgroup is the pod's child.
	bp, err := n.c.CoreV1().Pods("default").Get(n.ctx, "burstable", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	container := filepath.Join(b, strings.TrimPrefix(bp.Status.ContainerStatuses[0].ContainerID, "containerd://"))
	if procs := readCgroup(container, "cgroup.procs"); procs == "" {
		t.Errorf("no process in the burstable pod's container cgroup %s", container)
	}

	// The kernel's OOM killer takes BestEffort pods first and Guaranteed ones last, a Burstable
	// container by the share of the node's memory it requests, as the kubelet sets them.
	node, err := n.c.CoreV1().Nodes().Get(n.ctx, n.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	burstableAdj := 1000 - 1000*(32<<20)/node.Status.Capacity.Memory().Value()
	guaranteedAdj := int64(-997)
	if !runtime.CanLowerOOMScores() {
		// Without CAP_SYS_RESOURCE (a root in a container, as CI's) containerd raises scores
		// below its own to its own, which the agent could not lower either.
		guaranteedAdj = 0
	}
	for name, want := range map[string]int64{"guaranteed": guaranteedAdj, "besteffort": 1000, "burstable": burstableAdj} {
		p, err := n.c.CoreV1().Pods("default").Get(n.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ctr := filepath.Join(cgroups.Parent(root, p, true), strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://"))
		procs := strings.Fields(readCgroup(ctr, "cgroup.procs"))
		if len(procs) == 0 {
			t.Fatalf("no process in %s's container", name)
		}
		b, err := os.ReadFile("/proc/" + procs[0] + "/oom_score_adj")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != strconv.FormatInt(want, 10) {
			t.Errorf("%s container's oom_score_adj %s, want %d", name, got, want)
		}
	}

	// Resized up: the pod's quota first, then the container's.
	n.kubectl("", "patch", "pod", "burstable", "--subresource", "resize", "-p", `{"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"2"}}}]}}`)
	eventually(t, 30*time.Second, "the pod and its container at a 2-CPU quota", func() (bool, string) {
		pod, ctr := readCgroup(b, "cpu.cfs_quota_us", "cpu.max"), readCgroup(container, "cpu.cfs_quota_us", "cpu.max")
		return strings.HasPrefix(pod, "200000") && strings.HasPrefix(ctr, "200000"), "pod " + pod + ", container " + ctr
	})
	// And down: the container's first, then the pod's.
	n.kubectl("", "patch", "pod", "burstable", "--subresource", "resize", "-p", `{"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"500m"}}}]}}`)
	eventually(t, 30*time.Second, "the pod and its container at a half-CPU quota", func() (bool, string) {
		pod, ctr := readCgroup(b, "cpu.cfs_quota_us", "cpu.max"), readCgroup(container, "cpu.cfs_quota_us", "cpu.max")
		return strings.HasPrefix(pod, "50000") && strings.HasPrefix(ctr, "50000"), "pod " + pod + ", container " + ctr
	})
	if events := n.kubectl("", "get", "events", "--field-selector", "reason=ResizeFailed", "-o", "name"); events != "" {
		t.Errorf("resize failures: %s", events)
	}

	// Deleted, the pods' cgroups go; the burstable tier's weight falls back to the least.
	n.kubectl("", "delete", "pods", "--all", "--grace-period=1")
	eventually(t, 60*time.Second, "the pods' cgroups removed and the burstable tier reweighed", func() (bool, string) {
		for _, uid := range uids {
			if cgroups.Exists(cgroups.Mounts(), root, uid) {
				return false, "pod " + uid + "'s cgroup is still there"
			}
		}
		w := readCgroup(filepath.Join(root, cgroups.BurstableTier), "cpu.shares", "cpu.weight")
		return w == "2" || w == "1", "burstable tier weight " + w
	})
}

// TestNoCPUCFSQuota runs a Guaranteed pod on an agent with --cpu-cfs-quota=false: neither the
// pod's cgroup nor its container's has a CFS quota, so nothing is throttled, while the CPU
// weight and the memory limit still hold.
func TestNoCPUCFSQuota(t *testing.T) {
	_, nsPath := framework.Netns(t)
	n := newTestNode(t, t.TempDir(), nsPath, "--cpu-cfs-quota=false")
	n.untaint()
	q := func(s string) resource.Quantity { return resource.MustParse(s) }
	r := corev1.ResourceList{corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q("64Mi")}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unthrottled"}, Spec: corev1.PodSpec{NodeName: n.name,
		Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullNever,
			Args: []string{"sleep"}, Resources: corev1.ResourceRequirements{Requests: r, Limits: r}}}}}
	if _, err := n.c.CoreV1().Pods("default").Create(n.ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitPhase("unthrottled", corev1.PodRunning)
	got, err := n.c.CoreV1().Pods("default").Get(n.ctx, "unthrottled", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := cgroups.PodParent(n.s.CgroupRoot, corev1.PodQOSGuaranteed, string(got.UID))
	container := filepath.Join(pod, strings.TrimPrefix(got.Status.ContainerStatuses[0].ContainerID, "containerd://"))
	for _, c := range []struct{ what, cgroup, want string }{
		{"pod quota", pod, "-1|max 100000"}, {"container quota", container, "-1|max 100000"},
		{"pod weight", pod, "512|20"}, {"container weight", container, "512|20"},
		{"pod memory", pod, "67108864"}, {"container memory", container, "67108864"},
	} {
		files := map[string][]string{"quota": {"cpu.cfs_quota_us", "cpu.max"}, "weight": {"cpu.shares", "cpu.weight"},
			"memory": {"memory.limit_in_bytes", "memory.max"}}[strings.Fields(c.what)[1]]
		if v := readCgroup(c.cgroup, files...); v == "" || !strings.Contains("|"+c.want+"|", "|"+v+"|") {
			t.Errorf("%s: %q, want %s", c.what, v, c.want)
		}
	}
}

// readCgroup is the first of a cgroup's files found in any hierarchy (v1's name first, then
// v2's): "" when none is.
func readCgroup(cgroup string, files ...string) string {
	for _, f := range files {
		for _, m := range cgroups.Mounts() {
			if b, err := os.ReadFile(filepath.Join(m, cgroup, f)); err == nil {
				return strings.TrimSpace(string(b))
			}
		}
	}
	return ""
}

// TestResizeDeferred resizes a pod beyond what the node has left: the node does not take it
// on (the container keeps its CPU weight) and says why, as the kubelet does — a
// PodResizePending condition with reason Deferred and the admission message, a
// ResizeDeferred event — and takes it on by itself once the pod in the way is deleted.
func TestResizeDeferred(t *testing.T) {
	_, nsPath := framework.Netns(t)
	n := newTestNode(t, t.TempDir(), nsPath)
	n.untaint()
	node, err := n.c.CoreV1().Nodes().Get(n.ctx, n.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	free := node.Status.Allocatable.Cpu().MilliValue()
	list, err := n.c.CoreV1().Pods("").List(n.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		for _, c := range p.Spec.Containers {
			free -= c.Resources.Requests.Cpu().MilliValue()
		}
	}
	req := func(milli int64) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(milli, resource.DecimalSI)}}
	}
	filler, small := free/2, int64(250)
	for name, r := range map[string]corev1.ResourceRequirements{"filler": req(filler), "resized": req(small)} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: n.name,
			Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullNever,
				Args: []string{"sleep"}, Resources: r}}}}
		if _, err := n.c.CoreV1().Pods("default").Create(n.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	n.waitPhase("filler", corev1.PodRunning)
	n.waitPhase("resized", corev1.PodRunning)
	p, err := n.c.CoreV1().Pods("default").Get(n.ctx, "resized", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	container := filepath.Join(cgroups.Parent(n.s.CgroupRoot, p, true), strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://"))
	// weighs says whether the container's CPU weight is that of milli CPUs: v1 shares or the
	// v2 weight runc maps them to.
	weighs := func(milli int64) (bool, string) {
		shares := cgroups.SharesFromMilliCPU(milli)
		got := readCgroup(container, "cpu.shares", "cpu.weight")
		return got == strconv.FormatUint(shares, 10) || got == strconv.FormatUint(cgroups.WeightFromShares(shares), 10), got
	}
	if ok, got := weighs(small); !ok {
		t.Fatalf("container weight %q, want %dm's", got, small)
	}

	// Beyond the whole node, the API refuses the resize at once (PodResizeValidator).
	allocatable := node.Status.Allocatable.Cpu().MilliValue()
	cmd := exec.CommandContext(n.ctx, framework.Kubectl(t, 33), "--kubeconfig", n.s.Kubeconfig, "patch", "pod", "resized", "--subresource", "resize", "-p",
		fmt.Sprintf(`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"%dm"}}}]}}`, allocatable+1000))
	out, err := cmd.CombinedOutput()
	if want := fmt.Sprintf("node didn't have enough allocatable resources: cpu, requested: %d, allocatable: %d", allocatable+1000, allocatable); err == nil || !strings.Contains(string(out), want) || !strings.Contains(string(out), "Forbidden") {
		t.Errorf("a resize beyond the node: %v %s, want Forbidden: %s", err, out, want)
	}

	big := free - filler + 100 // 100m more than is left once filler's share is taken
	n.kubectl("", "patch", "pod", "resized", "--subresource", "resize", "-p",
		fmt.Sprintf(`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"%dm"}}}]}}`, big))
	want := fmt.Sprintf("Deferred: Node didn't have enough resource: cpu, requested: %d, used: %d, capacity: %d",
		big, node.Status.Allocatable.Cpu().MilliValue()-free+filler, node.Status.Allocatable.Cpu().MilliValue())
	eventually(t, 30*time.Second, "the resize deferred", func() (bool, string) {
		got := n.kubectl("", "get", "pod", "resized", "-o", `jsonpath={range .status.conditions[?(@.type=="PodResizePending")]}{.reason}: {.message}{end}`)
		return got == want, got
	})
	time.Sleep(3 * time.Second) // a resync or two: still not taken on
	if ok, got := weighs(small); !ok {
		t.Errorf("a deferred resize reached the container: weight %q, want %dm's", got, small)
	}
	if ev := n.kubectl("", "get", "events", "--field-selector", "reason=ResizeDeferred,involvedObject.name=resized", "-o", "name"); ev == "" {
		t.Error("no ResizeDeferred event")
	}

	n.kubectl("", "delete", "pod", "filler", "--grace-period=1")
	eventually(t, 60*time.Second, "the deferred resize taken on once the filler is gone", func() (bool, string) {
		cond := n.kubectl("", "get", "pod", "resized", "-o", `jsonpath={.status.conditions[?(@.type=="PodResizePending")].reason}`)
		ok, got := weighs(big)
		return cond == "" && ok, "condition " + cond + ", weight " + got
	})
}
