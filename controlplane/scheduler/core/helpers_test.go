package core

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

type nodeOpt func(*corev1.Node)
type podOpt func(*corev1.Pod)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// node builds a node with the given allocatable cpu and memory (and 110 pods unless overridden).
func node(name, cpu, mem string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status:     corev1.NodeStatus{Allocatable: rl("cpu", cpu, "memory", mem, "pods", "110", "ephemeral-storage", "100Gi")},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func nodeLabels(kv ...string) nodeOpt {
	return func(n *corev1.Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func taints(ts ...corev1.Taint) nodeOpt {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, ts...) }
}

func cordoned() nodeOpt { return func(n *corev1.Node) { n.Spec.Unschedulable = true } }

func alloc(kv ...string) nodeOpt {
	return func(n *corev1.Node) {
		for k, v := range rl(kv...) {
			n.Status.Allocatable[k] = v
		}
	}
}

func images(size int64, names ...string) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: names, SizeBytes: size})
	}
}

func taint(key, value string, effect corev1.TaintEffect) corev1.Taint {
	return corev1.Taint{Key: key, Value: value, Effect: effect}
}

// pod builds a one-container pod requesting cpu and memory ("" leaves a resource unrequested).
func pod(name, cpu, mem string, opts ...podOpt) *corev1.Pod {
	req := corev1.ResourceList{}
	if cpu != "" {
		req[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		req[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "registry.example/app:1.0",
			Resources: corev1.ResourceRequirements{Requests: req},
		}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func on(nodeName string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = nodeName } }

func ownedBy(uid string) podOpt {
	return func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{
			APIVersion: "apps/v1", Kind: "ReplicaSet", Name: uid, UID: types.UID(uid), Controller: &yes,
		})
	}
}

func tolerate(ts ...corev1.Toleration) podOpt {
	return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, ts...) }
}

func nodeSelector(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func nodeAffinity(na *corev1.NodeAffinity) podOpt {
	return func(p *corev1.Pod) { p.Spec.Affinity = &corev1.Affinity{NodeAffinity: na} }
}

func required(terms ...corev1.NodeSelectorTerm) *corev1.NodeAffinity {
	return &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}
}

func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func labelTerm(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: reqs}
}

func fieldTerm(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchFields: reqs}
}

func hostPort(port int32, protocol corev1.Protocol, ip string) podOpt {
	return func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: 8080, HostPort: port, Protocol: protocol, HostIP: ip})
	}
}

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

// scheduleOne runs Schedule and fails the test on an unexpected error.
func scheduleOne(t *testing.T, s *Snapshot, p *corev1.Pod, o Options) Result {
	t.Helper()
	res, err := Schedule(s, p, o)
	if err != nil {
		t.Fatalf("Schedule(%s): %v", p.Name, err)
	}
	return res
}

// fitError runs Schedule and returns its *FitError, failing the test if there is none.
func fitError(t *testing.T, s *Snapshot, p *corev1.Pod) *FitError {
	t.Helper()
	res, err := Schedule(s, p, Options{})
	if err == nil {
		t.Fatalf("Schedule(%s) picked %q, want a FitError", p.Name, res.Node)
	}
	fe, ok := err.(*FitError)
	if !ok {
		t.Fatalf("Schedule(%s) error %T %v, want *FitError", p.Name, err, err)
	}
	return fe
}

func metav1Now() metav1.Time { return metav1.Now() }

func metav1OwnerRef(uid string, controller *bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Thing", Name: uid, UID: types.UID(uid), Controller: controller}
}
