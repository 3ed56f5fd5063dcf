package framework

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerPID asks a node's containerd over CRI for the host PID of a running container,
// named by its ID as pod status reports it (a "containerd://" prefix is allowed); with an
// empty id, the one running container of the pod podName.
func ContainerPID(tb testing.TB, ctx context.Context, socket, id, podName string) int {
	tb.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	id = strings.TrimPrefix(id, "containerd://")
	if id == "" {
		list, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			LabelSelector: map[string]string{"io.kubernetes.pod.name": podName}}})
		if err != nil || len(list.Containers) != 1 {
			tb.Fatalf("running containers of %s: %v %v", podName, err, list)
		}
		id = list.Containers[0].Id
	}
	st, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		tb.Fatalf("container %s: %v", id, err)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil || info.Pid == 0 {
		tb.Fatalf("container %s pid: %v %s", id, err, st.Info["info"])
	}
	return info.Pid
}
