package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/skiff-sh/skiff/agent/eviction"
)

func readyCondition(t *testing.T, st corev1.NodeStatus) corev1.NodeCondition {
	t.Helper()
	for _, c := range st.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	t.Fatal("no Ready condition")
	return corev1.NodeCondition{}
}

// TestReadyFollowsHealth: a node whose agent has a part down is NotReady, and says which and
// why, as the kubelet's KubeletNotReady does; healthy (or without a health check) it is Ready.
func TestReadyFollowsHealth(t *testing.T) {
	if c := readyCondition(t, Status(Options{Name: "n"})); c.Status != corev1.ConditionTrue || c.Reason != "KubeletReady" {
		t.Fatalf("no health check: %+v", c)
	}
	if c := readyCondition(t, Status(Options{Name: "n", Health: func() error { return nil }})); c.Status != corev1.ConditionTrue {
		t.Fatalf("healthy: %+v", c)
	}
	c := readyCondition(t, Status(Options{Name: "n", Health: func() error {
		return errors.New("bgp: listen tcp :179: address already in use (restarted 2 times)")
	}}))
	if c.Status != corev1.ConditionFalse || c.Reason != "KubeletNotReady" ||
		c.Message != "skiff agent: bgp: listen tcp :179: address already in use (restarted 2 times)" {
		t.Fatalf("unhealthy: %+v", c)
	}
}

// TestHeartbeatLease: the node's Lease is made in kube-node-lease, held by the node, owned by
// its Node (so it is collected with it), and renewed.
func TestHeartbeatLease(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1"}}
	c := fake.NewClientset(n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go Heartbeat(ctx, c, Options{Name: "n1"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var l *coordinationv1.Lease
	for ctx.Err() == nil {
		got, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "n1", metav1.GetOptions{})
		if err == nil && got.Spec.RenewTime != nil && len(got.OwnerReferences) == 1 {
			l = got
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if l == nil {
		t.Fatal("no lease")
	}
	if *l.Spec.HolderIdentity != "n1" || *l.Spec.LeaseDurationSeconds != 40 {
		t.Errorf("lease spec %+v", l.Spec)
	}
	if o := l.OwnerReferences[0]; o.Kind != "Node" || o.Name != "n1" || o.UID != "uid-1" {
		t.Errorf("owner %+v", o)
	}
}

func TestCapacityAndAllocatable(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	capacity := Capacity(110, dir)
	eph := capacity[corev1.ResourceEphemeralStorage]
	if eph.Value() != int64(st.Blocks)*st.Bsize {
		t.Fatalf("ephemeral-storage %s, want the file system's %d bytes", eph.String(), int64(st.Blocks)*st.Bsize)
	}
	capacity = corev1.ResourceList{
		corev1.ResourceMemory:           resource.MustParse("1Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		corev1.ResourceCPU:              resource.MustParse("2"),
	}
	hard, err := eviction.ParseHard(eviction.DefaultHard)
	if err != nil {
		t.Fatal(err)
	}
	alloc := Allocatable(capacity, nil, hard)
	mem, disk, cpu := alloc[corev1.ResourceMemory], alloc[corev1.ResourceEphemeralStorage], alloc[corev1.ResourceCPU]
	if mem.Value() != 924<<20 || disk.Value() != 90<<30 || cpu.String() != "2" {
		t.Errorf("allocatable memory %s, ephemeral-storage %s, cpu %s; want 924Mi, 90Gi, 2", mem.String(), disk.String(), cpu.String())
	}
	if c := capacity[corev1.ResourceMemory]; c.String() != "1Gi" {
		t.Errorf("Allocatable changed the capacity it was given: %s", c.String())
	}
	if got := Allocatable(capacity, nil, nil); !got[corev1.ResourceMemory].Equal(capacity[corev1.ResourceMemory]) {
		t.Errorf("no thresholds: %v", got)
	}
	// Reservations come off first; the thresholds' percentages stay of the capacity (10% of
	// 100Gi is 10Gi, whatever is reserved), as the kubelet's.
	kube := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("100Mi")}
	system := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("200Mi"), corev1.ResourceEphemeralStorage: resource.MustParse("5Gi"),
		ResourcePID: resource.MustParse("1000")}
	alloc = Allocatable(capacity, []corev1.ResourceList{kube, system}, hard)
	mem, disk, cpu = alloc[corev1.ResourceMemory], alloc[corev1.ResourceEphemeralStorage], alloc[corev1.ResourceCPU]
	if mem.Value() != 624<<20 || disk.Value() != 85<<30 || cpu.MilliValue() != 1500 {
		t.Errorf("reserved: allocatable memory %s, ephemeral-storage %s, cpu %s; want 624Mi, 85Gi, 1500m", mem.String(), disk.String(), cpu.String())
	}
	if _, ok := alloc[ResourcePID]; ok {
		t.Errorf("allocatable has pid, which capacity does not: %v", alloc)
	}
	// More reserved than there is: zero, never negative.
	alloc = Allocatable(capacity, []corev1.ResourceList{{corev1.ResourceMemory: resource.MustParse("2Gi")}}, hard)
	if m := alloc[corev1.ResourceMemory]; m.Value() != 0 {
		t.Errorf("over-reserved memory: allocatable %s, want 0", m.String())
	}
}

func TestParseReserved(t *testing.T) {
	got, err := ParseReserved(" cpu=200m, memory=512Mi,ephemeral-storage=1Gi,pid=1000")
	if err != nil {
		t.Fatal(err)
	}
	want := map[corev1.ResourceName]string{corev1.ResourceCPU: "200m", corev1.ResourceMemory: "512Mi", corev1.ResourceEphemeralStorage: "1Gi", ResourcePID: "1k"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for name, w := range want {
		q := got[name]
		if !q.Equal(resource.MustParse(w)) {
			t.Errorf("%s = %s, want %s", name, q.String(), w)
		}
	}
	if got, err := ParseReserved(""); err != nil || len(got) != 0 {
		t.Errorf("empty: %v, %v", got, err)
	}
	for in, msg := range map[string]string{
		"memory":                 `"memory": want RESOURCE=QUANTITY, e.g. memory=512Mi`,
		"memory=":                `"memory=": want RESOURCE=QUANTITY, e.g. memory=512Mi`,
		"gpu=1":                  `"gpu=1": cannot reserve gpu (only cpu, memory, ephemeral-storage and pid)`,
		"memory=1Gi,memory=2Gi":  "memory is given twice",
		"memory=lots":            `"memory=lots": lots is not a quantity: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`,
		"cpu=-1":                 `"cpu=-1": must not be negative`,
		"pid=1500m":              `"pid=1500m": pid is a whole number of tasks`,
		"cpu=100m,,memory=100Mi": `"": want RESOURCE=QUANTITY, e.g. memory=512Mi`,
	} {
		if _, err := ParseReserved(in); err == nil || err.Error() != msg {
			t.Errorf("ParseReserved(%q) = %v, want %q", in, err, msg)
		}
	}
}

func FuzzParseReserved(f *testing.F) {
	for _, s := range []string{"cpu=200m,memory=512Mi", "pid=1000", "", "memory=-1", "x=y=z", ",,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseReserved(s)
		if err != nil {
			return
		}
		for name, q := range got {
			if q.Sign() < 0 {
				t.Fatalf("%q: %s negative", s, name)
			}
		}
	})
}

func TestMergeConditionsKeepsTransitionTimes(t *testing.T) {
	t0, t1 := metav1.NewTime(time.Unix(1000, 0)), metav1.NewTime(time.Unix(2000, 0))
	old := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: t0},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, LastTransitionTime: t0}}
	next := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: t1},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue, LastTransitionTime: t1}}
	got := MergeConditions(old, next)
	if !got[0].LastTransitionTime.Equal(&t0) || !got[1].LastTransitionTime.Equal(&t1) {
		t.Errorf("transition times %v %v: want the unchanged Ready's kept, the changed DiskPressure's new", got[0].LastTransitionTime, got[1].LastTransitionTime)
	}
}
