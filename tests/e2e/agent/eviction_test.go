package agent

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/skiff-sh/skiff/images/oci"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestDiskPressureEviction gives the agent a node file system of its own (a 192 MiB tmpfs as
// its data directory: containerd's images, the pods' emptyDirs) and the threshold
// nodefs.available<40Mi. First the pods' own local storage limits (an emptyDir's sizeLimit, a
// container's ephemeral-storage limit) evict the pods that pass them. Then a pod filling its
// emptyDir until less than 40 MiB is left puts the node under DiskPressure: the Node says so
// and is tainted NoSchedule, a BestEffort pod bound to it meanwhile is rejected with the
// kubelet's message, the filling pod — not its quiet neighbour — is evicted with reason
// Evicted, the kubelet's message and a DisruptionTarget condition, its emptyDir is freed, and
// once the transition period has passed the pressure and the taint are gone. Before the pod,
// the unused image imported by hand is removed (the pinned ones the agent imported stay).
func TestDiskPressureEviction(t *testing.T) {
	_, nsPath := framework.Netns(t)
	dir := t.TempDir()
	agentDir := tmpfsAgentDir(t, dir)

	n := newTestNode(t, dir, nsPath, "--eviction-hard", "nodefs.available<40Mi",
		"--eviction-pressure-transition-period", "15s", "--minimum-image-ttl-duration", "1s")
	c, ctx, nodeName := n.c, n.ctx, n.name
	n.untaint()

	// An image imported by hand (not pinned, as those the agent imports at start are) that no
	// pod uses: under disk pressure it goes before any pod does.
	rnd := rand.New(rand.NewPCG(1, 2))
	junk := make([]byte, 2<<20)
	for i := range junk {
		junk[i] = byte(rnd.Uint32())
	}
	archive := filepath.Join(dir, "leftover.tar")
	if err := oci.WriteFile(archive, oci.Image{Name: "localhost/skiff/leftover:1", Files: []oci.File{{Path: "/junk", Mode: 0o644, Data: junk}}}); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(framework.Binary(t), "images", "import", "--agent-data-dir", agentDir, archive).CombinedOutput(); err != nil {
		t.Fatalf("skiff images import: %v\n%s", err, out)
	}
	imported := time.Now()
	images := func() string {
		out, err := exec.Command("ctr", "--address", filepath.Join(agentDir, "containerd", "containerd.sock"), "-n", "k8s.io", "images", "ls", "-q").CombinedOutput()
		if err != nil {
			t.Fatalf("ctr images ls: %v\n%s", err, out)
		}
		return string(out)
	}
	if !strings.Contains(images(), "localhost/skiff/leftover:1") {
		t.Fatalf("the leftover image was not imported: %s", images())
	}

	// Local storage limits hold whatever the thresholds: an emptyDir beyond its sizeLimit, and
	// a container writing beyond its ephemeral-storage limit into its own root file system
	// (containerd's writable layer, from CRI stats), are evicted with the kubelet's messages.
	eight := resource.MustParse("8Mi")
	sized := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sized"}, Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &eight}}}},
		Containers: []corev1.Container{{Name: "sized", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullNever,
			Args: []string{"fill", "/data/fill", "16"}, VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}}}
	limited := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "limited"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "limited", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullNever,
			Args:      []string{"fill", "/fill", "16"},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: eight}}}}}}
	for _, p := range []*corev1.Pod{sized, limited} {
		if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]string{
		"sized":   `Usage of EmptyDir volume "data" exceeds the limit "8Mi". `,
		"limited": "Pod ephemeral local storage usage exceeds the total limit of containers 8Mi. ",
	} {
		eventually(t, 60*time.Second, name+" evicted for its local storage", func() (bool, string) {
			p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted" && p.Status.Message == want,
				fmt.Sprintf("%s %s %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
		})
	}

	// A quiet pod first, then the one that fills the file system to 20 MiB short of the
	// threshold's 40.
	quiet := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "quiet"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "quiet", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullNever, Args: []string{"sleep"}}}}}
	if _, err := c.CoreV1().Pods("default").Create(ctx, quiet, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitPhase("quiet", corev1.PodRunning)
	// The image collector looks at images every 30 s: it must have seen the leftover once
	// before the pressure for its minimum age to have passed.
	time.Sleep(time.Until(imported.Add(35 * time.Second)))
	var st unix.Statfs_t
	if err := unix.Statfs(agentDir, &st); err != nil {
		t.Fatal(err)
	}
	fillMiB := int64(st.Bavail)*st.Bsize>>20 - 20
	if fillMiB < 10 {
		t.Fatalf("only %d MiB available on the agent's 192 MiB tmpfs before the fill", fillMiB+20)
	}
	hog := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hog"}, Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		Containers: []corev1.Container{{Name: "hog", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullNever,
			Args: []string{"fill", "/data/fill", fmt.Sprint(fillMiB)}, VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}}}
	if _, err := c.CoreV1().Pods("default").Create(ctx, hog, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The node reports the pressure, with the kubelet's reason.
	eventually(t, 90*time.Second, "DiskPressure on the node", func() (bool, string) {
		n, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeDiskPressure {
				return cond.Status == corev1.ConditionTrue && cond.Reason == "KubeletHasDiskPressure", fmt.Sprint(cond)
			}
		}
		return false, "no DiskPressure condition"
	})
	// A BestEffort pod bound to the node by name (past the scheduler's taint check) is
	// refused by the node itself.
	late := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "late"}, Spec: corev1.PodSpec{NodeName: nodeName,
		Containers: []corev1.Container{{Name: "late", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullNever, Args: []string{"sleep"}}}}}
	if _, err := c.CoreV1().Pods("default").Create(ctx, late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tainted := false
	eventually(t, 60*time.Second, "late rejected and hog evicted", func() (bool, string) {
		if n, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err == nil {
			for _, taint := range n.Spec.Taints {
				tainted = tainted || (taint.Key == corev1.TaintNodeDiskPressure && taint.Effect == corev1.TaintEffectNoSchedule)
			}
		}
		l, err1 := c.CoreV1().Pods("default").Get(ctx, "late", metav1.GetOptions{})
		h, err2 := c.CoreV1().Pods("default").Get(ctx, "hog", metav1.GetOptions{})
		if err1 != nil || err2 != nil {
			return false, fmt.Sprint(err1, err2)
		}
		return l.Status.Phase == corev1.PodFailed && h.Status.Phase == corev1.PodFailed,
			fmt.Sprintf("late %s %s, hog %s %s", l.Status.Phase, l.Status.Reason, h.Status.Phase, h.Status.Reason)
	})
	l, _ := c.CoreV1().Pods("default").Get(ctx, "late", metav1.GetOptions{})
	if l.Status.Reason != "Evicted" || l.Status.Message != "Pod was rejected: The node had condition: [DiskPressure]. " {
		t.Errorf("late pod: reason %q message %q", l.Status.Reason, l.Status.Message)
	}
	h, _ := c.CoreV1().Pods("default").Get(ctx, "hog", metav1.GetOptions{})
	if h.Status.Reason != "Evicted" || !strings.HasPrefix(h.Status.Message, "The node was low on resource: ephemeral-storage. Threshold quantity: 40Mi, available: ") ||
		!strings.Contains(h.Status.Message, "Container hog was using ") {
		t.Errorf("hog: reason %q message %q", h.Status.Reason, h.Status.Message)
	}
	t.Logf("hog evicted: %s", h.Status.Message)
	disrupted := false
	for _, cond := range h.Status.Conditions {
		disrupted = disrupted || (cond.Type == corev1.DisruptionTarget && cond.Status == corev1.ConditionTrue && cond.Reason == "TerminationByKubelet")
	}
	if !disrupted {
		t.Errorf("hog has no DisruptionTarget condition: %v", h.Status.Conditions)
	}
	events, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.name": "hog", "reason": "Evicted"}.String()})
	if err != nil || len(events.Items) == 0 || events.Items[0].Type != corev1.EventTypeWarning {
		t.Errorf("no Warning Evicted event for hog: %v %v", events, err)
	}
	if q, err := c.CoreV1().Pods("default").Get(ctx, "quiet", metav1.GetOptions{}); err != nil || q.Status.Phase != corev1.PodRunning {
		t.Errorf("the quiet pod was not left running: %v %v", q.Status.Phase, err)
	}
	// The unused image went first; the pinned ones stay.
	if imgs := images(); strings.Contains(imgs, "localhost/skiff/leftover:1") || !strings.Contains(imgs, "localhost/skiff/netutil:1") ||
		!strings.Contains(imgs, "localhost/skiff/pause:1") {
		t.Errorf("images after disk pressure:\n%s\nwant the leftover gone and netutil and pause kept", imgs)
	}
	if err := unix.Statfs(agentDir, &st); err != nil || int64(st.Bavail)*st.Bsize < 40<<20 {
		t.Errorf("the evicted pod's disk was not freed: %d MiB available (%v)", int64(st.Bavail)*st.Bsize>>20, err)
	}

	// The transition period passes: no pressure, no taint.
	eventually(t, 60*time.Second, "DiskPressure gone with its taint", func() (bool, string) {
		n, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if !tainted {
			for _, taint := range n.Spec.Taints {
				tainted = tainted || taint.Key == corev1.TaintNodeDiskPressure
			}
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == corev1.TaintNodeDiskPressure {
				return false, "still tainted"
			}
		}
		return condition(n, corev1.NodeDiskPressure) == corev1.ConditionFalse, fmt.Sprint(n.Status.Conditions)
	})
	if !tainted {
		t.Error("the node was never tainted node.kubernetes.io/disk-pressure:NoSchedule while under pressure")
	}
}

// TestMemoryPressureEviction runs an agent whose threshold no node can meet,
// memory.available<100%: the node reports MemoryPressure with the kubelet's reason and an
// event, and is tainted memory-pressure:NoSchedule; a BestEffort pod bound to it is refused
// while a Burstable one is admitted — and then evicted for memory with the kubelet's message.
func TestMemoryPressureEviction(t *testing.T) {
	_, nsPath := framework.Netns(t)
	n := newTestNode(t, t.TempDir(), nsPath, "--eviction-hard", "memory.available<100%")
	c, ctx := n.c, n.ctx
	eventually(t, 60*time.Second, "MemoryPressure and its taint", func() (bool, string) {
		node, err := c.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		tainted := false
		for _, taint := range node.Spec.Taints {
			tainted = tainted || (taint.Key == corev1.TaintNodeMemoryPressure && taint.Effect == corev1.TaintEffectNoSchedule)
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeMemoryPressure {
				return tainted && cond.Status == corev1.ConditionTrue && cond.Reason == "KubeletHasInsufficientMemory", fmt.Sprint(cond, " tainted ", tainted)
			}
		}
		return false, "no MemoryPressure condition"
	})
	events, err := c.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.kind": "Node", "reason": "NodeHasInsufficientMemory"}.String()})
	if err != nil || len(events.Items) == 0 {
		t.Errorf("no NodeHasInsufficientMemory event: %v", err)
	}
	pod := func(name string, res corev1.ResourceList) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: n.name,
			Containers: []corev1.Container{{Name: name, Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullNever, Args: []string{"sleep"},
				Resources: corev1.ResourceRequirements{Requests: res}}}}}
	}
	for _, p := range []*corev1.Pod{pod("besteffort", nil), pod("burstable", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")})} {
		if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]string{
		"besteffort": "Pod was rejected: The node had condition: [MemoryPressure]. ",
		"burstable":  "The node was low on resource: memory. Threshold quantity: ",
	} {
		eventually(t, 60*time.Second, name+" Failed", func() (bool, string) {
			p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted" && strings.HasPrefix(p.Status.Message, want),
				fmt.Sprintf("%s %s %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
		})
	}
	// The Burstable pod was admitted (it ran, or was at least started) before it was evicted.
	evicted, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.name": "burstable", "reason": "Evicted"}.String()})
	if err != nil || len(evicted.Items) == 0 {
		t.Errorf("no Evicted event for the Burstable pod: %v", err)
	}
}

// TestPIDPressure runs an agent whose threshold no node can meet, pid.available<100%: the
// node reports PIDPressure with the kubelet's reason, is tainted pid-pressure:NoSchedule, and
// refuses a pod bound to it with the kubelet's message.
func TestPIDPressure(t *testing.T) {
	_, nsPath := framework.Netns(t)
	n := newTestNode(t, t.TempDir(), nsPath, "--eviction-hard", "pid.available<100%")
	c, ctx := n.c, n.ctx
	eventually(t, 60*time.Second, "PIDPressure and its taint", func() (bool, string) {
		node, err := c.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		tainted := false
		for _, taint := range node.Spec.Taints {
			tainted = tainted || (taint.Key == corev1.TaintNodePIDPressure && taint.Effect == corev1.TaintEffectNoSchedule)
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodePIDPressure {
				return tainted && cond.Status == corev1.ConditionTrue && cond.Reason == "KubeletHasInsufficientPID", fmt.Sprint(cond, " tainted ", tainted)
			}
		}
		return false, "no PIDPressure condition"
	})
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "late"}, Spec: corev1.PodSpec{NodeName: n.name,
		Containers: []corev1.Container{{Name: "late", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullNever, Args: []string{"sleep"},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Mi")}}}}}}
	if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the pod refused", func() (bool, string) {
		p, err := c.CoreV1().Pods("default").Get(ctx, "late", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted" && p.Status.Message == "Pod was rejected: The node had condition: [PIDPressure]. ",
			fmt.Sprintf("%s %q", p.Status.Phase, p.Status.Message)
	})
}

// TestSoftEvictionWaitsForItsGracePeriod: with only a soft threshold, nodefs.available<40Mi
// for 10 s, on the agent's own 192 MiB tmpfs, a pod filling it puts the node under DiskPressure
// at once, but is evicted only once the threshold has been crossed for the grace period.
func TestSoftEvictionWaitsForItsGracePeriod(t *testing.T) {
	_, nsPath := framework.Netns(t)
	dir := t.TempDir()
	agentDir := tmpfsAgentDir(t, dir)
	n := newTestNode(t, dir, nsPath, "--eviction-soft", "nodefs.available<40Mi",
		"--eviction-soft-grace-period", "nodefs.available=10s", "--eviction-max-pod-grace-period", "2")
	c, ctx := n.c, n.ctx
	n.untaint()
	var st unix.Statfs_t
	if err := unix.Statfs(agentDir, &st); err != nil {
		t.Fatal(err)
	}
	hog := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hog"}, Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		Containers: []corev1.Container{{Name: "hog", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullNever,
			Args: []string{"fill", "/data/fill", fmt.Sprint(int64(st.Bavail)*st.Bsize>>20 - 20)}, VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}}}
	if _, err := c.CoreV1().Pods("default").Create(ctx, hog, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pressured time.Time
	eventually(t, 90*time.Second, "DiskPressure", func() (bool, string) {
		node, err := c.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeDiskPressure && cond.Status == corev1.ConditionTrue {
				pressured = cond.LastTransitionTime.Time
				return true, ""
			}
		}
		return false, fmt.Sprint(node.Status.Conditions)
	})
	var h *corev1.Pod
	eventually(t, 60*time.Second, "hog evicted", func() (bool, string) {
		var err error
		h, err = c.CoreV1().Pods("default").Get(ctx, "hog", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return h.Status.Phase == corev1.PodFailed && h.Status.Reason == "Evicted", string(h.Status.Phase)
	})
	if !strings.HasPrefix(h.Status.Message, "The node was low on resource: ephemeral-storage. Threshold quantity: 40Mi, available: ") {
		t.Errorf("message %q", h.Status.Message)
	}
	for _, cond := range h.Status.Conditions {
		if cond.Type == corev1.DisruptionTarget {
			// Times in the API have a second's resolution.
			if waited := cond.LastTransitionTime.Sub(pressured); waited < 9*time.Second {
				t.Errorf("evicted %s after the pressure began, inside the 10 s grace period", waited)
			}
			return
		}
	}
	t.Errorf("no DisruptionTarget condition: %v", h.Status.Conditions)
}

// tmpfsAgentDir gives the agent of a node under dir its own 192 MiB file system and returns
// its path; it is unmounted after the test's other cleanups.
func tmpfsAgentDir(t *testing.T, dir string) string {
	t.Helper()
	agentDir := filepath.Join(dir, "agent")
	if err := os.MkdirAll(agentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", agentDir, "tmpfs", 0, "size=192m"); err != nil {
		t.Fatalf("tmpfs for the agent's data: %v", err)
	}
	// Registered before the node's, so it runs after them, once nothing uses it.
	t.Cleanup(func() { _ = unix.Unmount(agentDir, unix.MNT_DETACH) })
	return agentDir
}
