package pods

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// busyRuntime is a runtime whose status reads fail, as containerd's do when they time out on
// a loaded node.
type busyRuntime struct {
	runtimeapi.RuntimeServiceClient
}

func (busyRuntime) ContainerStatus(context.Context, *runtimeapi.ContainerStatusRequest, ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	return nil, errors.New("context deadline exceeded")
}

// A failed status read keeps what was last reported: a serving pod must not leave its
// Services' endpoints because the runtime was slow to answer once.
func TestContainerStatusKeptWhenTheRuntimeFails(t *testing.T) {
	m := &Manager{runtime: busyRuntime{}}
	running := corev1.ContainerStatus{Name: "c", ContainerID: "containerd://abc", Ready: true, RestartCount: 2,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Unix(1700000000, 0))}}}
	pod := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{running}}}
	rc := &runtimeapi.Container{Id: "abc", Metadata: &runtimeapi.ContainerMetadata{Name: "c", Attempt: 2}}
	if got := m.containerStatus(context.Background(), pod, corev1.Container{Name: "c"}, rc, ""); !reflect.DeepEqual(got, running) {
		t.Errorf("after a failed read:\n got %+v\nwant %+v (the last reported status)", got, running)
	}
	// A container the pod's status does not know yet (a new attempt) has nothing to keep.
	rc2 := &runtimeapi.Container{Id: "def", Metadata: &runtimeapi.ContainerMetadata{Name: "c", Attempt: 3}}
	got := m.containerStatus(context.Background(), pod, corev1.Container{Name: "c"}, rc2, "")
	if got.Ready || got.State.Waiting == nil || got.ContainerID != "containerd://def" {
		t.Errorf("a new attempt after a failed read: %+v, want waiting and not ready", got)
	}
}

func TestVolumesInUse(t *testing.T) {
	m := &Manager{prepared: map[types.UID]time.Time{}}
	fresh := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
	if m.volumesInUse(fresh) {
		t.Error("a pod never started has volumes in use")
	}
	m.prepared["u1"] = time.Now()
	if !m.volumesInUse(fresh) {
		t.Error("a pod this agent prepared has none in use")
	}
	// An agent that restarted: the pod's containers ran with volumes an earlier agent wrote.
	started := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u2"}, Status: corev1.PodStatus{
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", ContainerID: "containerd://abc"}}}}
	if !m.volumesInUse(started) {
		t.Error("a started pod's volumes are not in use")
	}
}
