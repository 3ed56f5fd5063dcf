package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/agent/cgroups"
	"github.com/skiff-sh/skiff/agent/pressure"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestNodeAllocatable runs an agent with --kube-reserved and --system-reserved, as an operator
// keeps room for skiff, containerd and the system: the Node's allocatable (what kubectl shows
// and the scheduler fills) is the capacity less both reservations and the hard eviction
// threshold, and the cgroup holding every pod is limited to the capacity less the
// reservations — memory, CPU weight and tasks — with a pod running under it.
func TestNodeAllocatable(t *testing.T) {
	pidLimit, err := pressure.PIDLimit("/proc")
	if err != nil {
		t.Fatal(err)
	}
	// Leave the pods 4096 tasks of the kernel's limit.
	systemPIDs := pidLimit - 4096
	_, nsPath := framework.Netns(t)
	n := newTestNode(t, t.TempDir(), nsPath, "--kube-reserved", "cpu=250m,memory=256Mi,ephemeral-storage=1Gi",
		"--system-reserved", "memory=128Mi,pid="+strconv.FormatInt(systemPIDs, 10))
	node, err := n.c.CoreV1().Nodes().Get(n.ctx, n.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	capacity, alloc := node.Status.Capacity, node.Status.Allocatable
	// The framework's agents run with --eviction-hard=memory.available<100Mi (lab.EvictionHard).
	for name, reserved := range map[corev1.ResourceName]string{corev1.ResourceCPU: "250m", corev1.ResourceMemory: "484Mi", corev1.ResourceEphemeralStorage: "1Gi"} {
		want := capacity[name].DeepCopy()
		want.Sub(resource.MustParse(reserved))
		if got := alloc[name]; got.Cmp(want) != 0 {
			t.Errorf("allocatable %s %s, want capacity %s less %s = %s", name, got.String(), capacity.Name(name, "").String(), reserved, want.String())
		}
	}
	// kubectl shows the same.
	out := n.kubectl("", "get", "node", n.name, "-o", "jsonpath={.status.allocatable.memory}")
	if want := alloc[corev1.ResourceMemory]; out != want.String() {
		t.Errorf("kubectl shows allocatable memory %q, want %q", out, want.String())
	}

	read := func(files ...string) string {
		for _, m := range cgroups.Mounts() {
			for _, f := range files {
				if b, err := os.ReadFile(filepath.Join(m, n.s.CgroupRoot, f)); err == nil {
					return strings.TrimSpace(string(b))
				}
			}
		}
		return ""
	}
	memCap := capacity[corev1.ResourceMemory]
	if got, want := read("memory.max", "memory.limit_in_bytes"), strconv.FormatInt(memCap.Value()-384<<20, 10); got != want {
		t.Errorf("the pods' cgroup memory limit is %q, want capacity less 384Mi = %s", got, want)
	}
	if got := read("pids.max"); got != "4096" {
		t.Errorf("the pods' cgroup pids.max is %q, want 4096", got)
	}
	cpuCap := capacity[corev1.ResourceCPU]
	shares := cgroups.SharesFromMilliCPU(cpuCap.MilliValue() - 250)
	if got := read("cpu.shares", "cpu.weight"); got != strconv.FormatUint(shares, 10) && got != strconv.FormatUint(cgroups.WeightFromShares(shares), 10) {
		t.Errorf("the pods' cgroup CPU weight is %q, want shares %d (or its cgroup v2 weight)", got, shares)
	}

	// A pod runs under the limited cgroup.
	n.untaint()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "inside"}, Spec: corev1.PodSpec{NodeName: n.name,
		Containers: []corev1.Container{{Name: "inside", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullNever, Args: []string{"sleep"}}}}}
	created, err := n.c.CoreV1().Pods("default").Create(n.ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.waitPhase("inside", corev1.PodRunning)
	found := false
	eventually(t, 10*time.Second, "the pod's cgroup under the limited root", func() (bool, string) {
		for _, m := range cgroups.Mounts() {
			if _, err := os.Stat(filepath.Join(m, cgroups.Parent(n.s.CgroupRoot, created, true))); err == nil {
				found = true
			}
		}
		return found, "no " + cgroups.Parent(n.s.CgroupRoot, created, true)
	})
}
