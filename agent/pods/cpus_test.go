package pods

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/cpuset"

	"github.com/skiff-sh/skiff/agent/cpumanager"
)

// TestAdmitRefusesWithoutFreeCPUs admits a Guaranteed pod asking for a whole CPU on a node
// whose only CPU that may be given out is taken: the node's resources check passes (no
// allocatable is set), the CPU manager's refuses, and the pod fails with the kubelet's reason
// and message, its CPUs never taken.
func TestAdmitRefusesWithoutFreeCPUs(t *testing.T) {
	topo := cpumanager.Topology{CPUs: []cpumanager.CPU{{ID: 0, Core: 0}, {ID: 1, Core: 1}}}
	cpus, err := cpumanager.New(topo, cpuset.New(0), filepath.Join(t.TempDir(), "cpu_manager_state"))
	if err != nil {
		t.Fatal(err)
	}
	whole := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("uid-" + name)},
			Spec: corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "c",
				Resources: corev1.ResourceRequirements{Requests: whole, Limits: whole}}}}}
	}
	first, second := pod("first"), pod("second")
	if took, err := cpus.Admit(first); !took || err != nil {
		t.Fatalf("first pod: %v %v", took, err)
	}
	client := fake.NewSimpleClientset(first, second)
	m := New(client, nil, nil, Options{NodeName: "n", CPUs: cpus}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, p := range []*corev1.Pod{first, second} {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	m.lister = corelisters.NewPodLister(idx)
	m.synced.Store(true)

	ok, err := m.admit(context.Background(), second)
	if ok || err != nil {
		t.Fatalf("admit: %v %v, want a refusal", ok, err)
	}
	got, err := client.CoreV1().Pods("default").Get(context.Background(), "second", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "Pod was rejected: Allocate failed due to not enough cpus available to satisfy request: requested=1, available=0, which is unexpected"
	if got.Status.Phase != corev1.PodFailed || got.Status.Reason != "UnexpectedAdmissionError" || got.Status.Message != want {
		t.Errorf("refused pod: %s %s %q", got.Status.Phase, got.Status.Reason, got.Status.Message)
	}
	if c := cpus.CPUs(second.UID, "c"); !c.Equals(cpuset.New(0)) {
		t.Errorf("the refused pod's container would run on %s, want the shared pool 0", c)
	}
	if !cpus.Shared().Equals(cpuset.New(0)) {
		t.Errorf("shared pool %s", cpus.Shared())
	}
}
