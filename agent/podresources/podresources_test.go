package podresources

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/cpuset"

	"github.com/skiff-sh/skiff/agent/cpumanager"
)

// TestServe serves the API on a socket under the static policy of a four-CPU node with CPU 0
// reserved, and reads it as a client would: the pinned container's CPUs, none for the shared
// pool's and the sidecar's, the allocatable CPUs, and NotFound for a pod the node lacks.
func TestServe(t *testing.T) {
	topo := cpumanager.Topology{}
	for id := 0; id < 4; id++ {
		topo.CPUs = append(topo.CPUs, cpumanager.CPU{ID: id, Core: id})
	}
	cpus, err := cpumanager.New(topo, cpuset.New(0), filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	guaranteed := func(cpu string) corev1.ResourceRequirements {
		l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")}
		return corev1.ResourceRequirements{Requests: l, Limits: l}
	}
	always := corev1.ContainerRestartPolicyAlways
	pinned := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nf", Namespace: "ran", UID: "u1"}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "once", Resources: guaranteed("100m")}, {Name: "side", RestartPolicy: &always, Resources: guaranteed("100m")}},
		Containers:     []corev1.Container{{Name: "dp", Resources: guaranteed("2")}, {Name: "ctl", Resources: guaranteed("100m")}}}}
	if _, err := cpus.Admit(pinned); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(t.TempDir(), "pod-resources", "kubelet.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- (&Server{Pods: func() []*corev1.Pod { return []*corev1.Pod{pinned} }, CPUs: cpus}).Run(ctx, socket)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Run: %v", err)
		}
	})
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := podresourcesv1.NewPodResourcesListerClient(conn)
	var list *podresourcesv1.ListPodResourcesResponse
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if list, err = client.List(ctx, &podresourcesv1.ListPodResourcesRequest{}); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]int64{}
	for _, p := range list.PodResources {
		for _, c := range p.Containers {
			got[p.Namespace+"/"+p.Name+"/"+c.Name] = c.CpuIds
		}
	}
	want := map[string][]int64{"ran/nf/side": nil, "ran/nf/dp": {1, 2}, "ran/nf/ctl": nil}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("List: %v, want %v", got, want)
	}
	alloc, err := client.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	if err != nil || !reflect.DeepEqual(alloc.CpuIds, []int64{1, 2, 3}) {
		t.Errorf("GetAllocatableResources: %v %v", alloc, err)
	}
	one, err := client.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodName: "nf", PodNamespace: "ran"})
	if err != nil || one.PodResources.Name != "nf" || len(one.PodResources.Containers) != 3 {
		t.Errorf("Get: %v %v", one, err)
	}
	if _, err := client.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodName: "gone", PodNamespace: "ran"}); status.Code(err) != codes.NotFound {
		t.Errorf("Get of a pod the node lacks: %v", err)
	}
}
