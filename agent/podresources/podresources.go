// Package podresources serves the kubelet's pod resources API (podresources v1: List, Get,
// GetAllocatableResources) on a unix socket in the agent's data directory, so the node agents
// that read it on a kubelet — Node Feature Discovery's topology updater, device monitoring,
// network function managers — learn which CPUs each container has to itself, and which CPUs
// may be given out at all, under the static CPU manager policy. As upstream, only exclusive
// CPUs are listed: a container of the shared pool has none; under the none policy no
// container has any and none are allocatable. skiff has no device plugins or memory manager,
// so devices and memory are always empty.
package podresources

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/cpuset"

	"github.com/skiff-sh/skiff/agent/cpumanager"
)

// Server answers the API from the node's active pods and the CPU manager (nil: the none
// policy).
type Server struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	// Pods are the node's active pods.
	Pods func() []*corev1.Pod
	CPUs *cpumanager.Manager
}

// List reports every active pod's containers, with the CPUs each has to itself.
func (s *Server) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	out := &podresourcesv1.ListPodResourcesResponse{}
	for _, p := range s.Pods() {
		out.PodResources = append(out.PodResources, s.pod(p))
	}
	return out, nil
}

// Get reports one active pod, as List does.
func (s *Server) Get(_ context.Context, req *podresourcesv1.GetPodResourcesRequest) (*podresourcesv1.GetPodResourcesResponse, error) {
	for _, p := range s.Pods() {
		if p.Name == req.PodName && p.Namespace == req.PodNamespace {
			return &podresourcesv1.GetPodResourcesResponse{PodResources: s.pod(p)}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "pod %s in namespace %s not found", req.PodName, req.PodNamespace)
}

// GetAllocatableResources reports the CPUs that may be given to containers to themselves.
func (s *Server) GetAllocatableResources(context.Context, *podresourcesv1.AllocatableResourcesRequest) (*podresourcesv1.AllocatableResourcesResponse, error) {
	out := &podresourcesv1.AllocatableResourcesResponse{}
	if s.CPUs != nil {
		out.CpuIds = ids(s.CPUs.Allocatable())
	}
	return out, nil
}

// pod is one pod's resources: its containers, and its sidecars (init containers that keep
// running), as upstream lists them.
func (s *Server) pod(p *corev1.Pod) *podresourcesv1.PodResources {
	out := &podresourcesv1.PodResources{Name: p.Name, Namespace: p.Namespace}
	var containers []corev1.Container
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			containers = append(containers, c)
		}
	}
	containers = append(containers, p.Spec.Containers...)
	for _, c := range containers {
		cr := &podresourcesv1.ContainerResources{Name: c.Name}
		if s.CPUs != nil {
			cr.CpuIds = ids(s.CPUs.Exclusive(p.UID, c.Name))
		}
		out.Containers = append(out.Containers, cr)
	}
	return out
}

func ids(c cpuset.CPUSet) []int64 {
	var out []int64
	for _, id := range c.List() {
		out = append(out, int64(id))
	}
	return out
}

// Run serves the API on the unix socket until ctx ends; a stale socket from an earlier run
// is replaced.
func (s *Server) Run(ctx context.Context, socket string) error {
	if err := os.MkdirAll(filepath.Dir(socket), 0o750); err != nil {
		return err
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("pod resources API: %w", err)
	}
	g := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(g, s)
	go func() {
		<-ctx.Done()
		g.Stop()
	}()
	err = g.Serve(l)
	_ = os.Remove(socket)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
