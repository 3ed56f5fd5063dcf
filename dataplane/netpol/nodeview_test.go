package netpol

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/dataplane/services"
	sharedinformers "github.com/skiff-sh/skiff/internal/informers"
)

// fullPod is a pod as the API returns it: volumes, env, probes, resources, conditions and
// statuses around the few fields the node's cluster-wide readers use.
func fullPod(name, node, ip string, phase corev1.PodPhase) *corev1.Pod {
	ctr := func(n string, ports ...corev1.ContainerPort) corev1.Container {
		return corev1.Container{Name: n, Image: "registry.example/app:1", Ports: ports,
			Env:            []corev1.EnvVar{{Name: "A", Value: "b"}},
			VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/"}}}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: "u-1", ResourceVersion: "9", Labels: map[string]string{"app": "web"},
			Annotations:   map[string]string{"big": "annotation"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}, CreationTimestamp: metav1.Unix(100, 0),
			OwnerReferences: []metav1.OwnerReference{{Name: "rs", Kind: "ReplicaSet"}}},
		Spec: corev1.PodSpec{NodeName: node,
			InitContainers: []corev1.Container{ctr("setup"),
				func() corev1.Container {
					c := ctr("sidecar", corev1.ContainerPort{Name: "metrics", ContainerPort: 9090, HostPort: 19090})
					c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
					return c
				}()},
			Containers: []corev1.Container{ctr("app", corev1.ContainerPort{Name: "http", ContainerPort: 8080, HostPort: 80, Protocol: corev1.ProtocolTCP},
				corev1.ContainerPort{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}), ctr("logger")},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}},
		Status: corev1.PodStatus{Phase: phase, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, HostIP: "198.18.0.2",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, ImageID: "sha256:abc"}}},
	}
}

// What the agent keeps of a remote pod (informers.NodeViewPod) gives network policy and host
// ports exactly what the whole pod gives them, and is a small part of it.
func TestNodeViewPodKeepsWhatTheDataplaneReads(t *testing.T) {
	node := services.Node{Name: "n1", IP: netip.MustParseAddr("198.18.0.2")}
	for _, phase := range []corev1.PodPhase{corev1.PodRunning, corev1.PodSucceeded} {
		for _, on := range []string{"n1", "n2"} {
			full := fullPod("a", on, "10.0.0.5", phase)
			slim := sharedinformers.NodeViewPod(full.DeepCopy())
			name := fmt.Sprintf("%s on %s", phase, on)
			if got, want := PolicyPod(slim), PolicyPod(full); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: policy sees %+v of the node's view, %+v of the pod", name, got, want)
			}
			if got, want := services.HostPorts([]*corev1.Pod{slim}, node), services.HostPorts([]*corev1.Pod{full}, node); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: host ports %v from the node's view, %v from the pod", name, got, want)
			}
			if got, want := services.HasHostPorts(slim, "n1"), services.HasHostPorts(full, "n1"); got != want {
				t.Errorf("%s: hasHostPorts %v from the node's view, %v from the pod", name, got, want)
			}
			if slim.ManagedFields != nil || slim.Annotations != nil || slim.Spec.Volumes != nil || slim.Status.ContainerStatuses != nil {
				t.Errorf("%s: the node's view kept what no reader uses: %+v", name, slim)
			}
		}
	}
	full := fullPod("a", "n1", "10.0.0.5", corev1.PodRunning)
	if s, f := sharedinformers.NodeViewPod(full).Size(), full.Size(); s*2 > f {
		t.Errorf("the node's view is %d bytes of the pod's %d: it should be well under half", s, f)
	}
}
