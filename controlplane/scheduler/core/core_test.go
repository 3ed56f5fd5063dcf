package core

import (
	"errors"
	"fmt"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

const cpTaintReason = "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"

func TestFilters(t *testing.T) {
	cpTaint := taint("node-role.kubernetes.io/control-plane", "", corev1.TaintEffectNoSchedule)
	gpuTaint := taint("dedicated", "gpu", corev1.TaintEffectNoExecute)
	small := func(opts ...podOpt) *corev1.Pod { return pod("p", "100m", "100Mi", opts...) }

	tests := []struct {
		name     string
		node     *corev1.Node
		existing []*corev1.Pod // assigned to the node before scheduling
		pod      *corev1.Pod
		want     map[string]int // nil: the pod fits
	}{
		{name: "plain node fits", node: node("n", "1", "1Gi"), pod: small()},

		// NodeUnschedulable
		{name: "cordoned", node: node("n", "1", "1Gi", cordoned()), pod: small(),
			want: map[string]int{ReasonUnschedulable: 1}},
		{name: "cordoned, unschedulable taint tolerated", node: node("n", "1", "1Gi", cordoned()),
			pod: small(tolerate(corev1.Toleration{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}))},
		{name: "cordoned, wildcard toleration", node: node("n", "1", "1Gi", cordoned()),
			pod: small(tolerate(corev1.Toleration{Operator: corev1.TolerationOpExists}))},
		{name: "cordoned, toleration for the wrong effect", node: node("n", "1", "1Gi", cordoned()),
			pod:  small(tolerate(corev1.Toleration{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})),
			want: map[string]int{ReasonUnschedulable: 1}},

		// NodeName
		{name: "requested other node", node: node("n", "1", "1Gi"), pod: small(on("other")),
			want: map[string]int{ReasonNodeName: 1}},
		{name: "requested this node", node: node("n", "1", "1Gi"), pod: small(on("n"))},

		// TaintToleration
		{name: "control-plane taint", node: node("n", "1", "1Gi", taints(cpTaint)), pod: small(),
			want: map[string]int{cpTaintReason: 1}},
		{name: "NoExecute taint with value", node: node("n", "1", "1Gi", taints(gpuTaint)), pod: small(),
			want: map[string]int{"node(s) had untolerated taint {dedicated: gpu}": 1}},
		{name: "not-ready taint", node: node("n", "1", "1Gi", taints(taint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule))), pod: small(),
			want: map[string]int{"node(s) had untolerated taint {node.kubernetes.io/not-ready: }": 1}},
		{name: "unreachable taint", node: node("n", "1", "1Gi", taints(taint(corev1.TaintNodeUnreachable, "", corev1.TaintEffectNoExecute))), pod: small(),
			want: map[string]int{"node(s) had untolerated taint {node.kubernetes.io/unreachable: }": 1}},
		{name: "PreferNoSchedule does not filter", node: node("n", "1", "1Gi", taints(taint("soft", "", corev1.TaintEffectPreferNoSchedule))), pod: small()},
		{name: "Equal toleration with matching value", node: node("n", "1", "1Gi", taints(gpuTaint)),
			pod: small(tolerate(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoExecute}))},
		{name: "empty operator means Equal", node: node("n", "1", "1Gi", taints(gpuTaint)),
			pod: small(tolerate(corev1.Toleration{Key: "dedicated", Value: "gpu"}))},
		{name: "Equal toleration with other value", node: node("n", "1", "1Gi", taints(gpuTaint)),
			pod:  small(tolerate(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cpu"})),
			want: map[string]int{"node(s) had untolerated taint {dedicated: gpu}": 1}},
		{name: "Exists toleration ignores value", node: node("n", "1", "1Gi", taints(gpuTaint)),
			pod: small(tolerate(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists}))},
		{name: "toleration for another effect", node: node("n", "1", "1Gi", taints(gpuTaint)),
			pod:  small(tolerate(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})),
			want: map[string]int{"node(s) had untolerated taint {dedicated: gpu}": 1}},
		{name: "comparison operators are feature-gated off", node: node("n", "1", "1Gi", taints(taint("tier", "5", corev1.TaintEffectNoSchedule))),
			pod:  small(tolerate(corev1.Toleration{Key: "tier", Operator: corev1.TolerationOpGt, Value: "1"})),
			want: map[string]int{"node(s) had untolerated taint {tier: 5}": 1}},
		{name: "first untolerated taint is reported", node: node("n", "1", "1Gi", taints(taint("a", "1", corev1.TaintEffectNoSchedule), taint("b", "2", corev1.TaintEffectNoSchedule))),
			pod:  small(tolerate(corev1.Toleration{Key: "x", Operator: corev1.TolerationOpExists})),
			want: map[string]int{"node(s) had untolerated taint {a: 1}": 1}},
		{name: "second taint reported once the first is tolerated", node: node("n", "1", "1Gi", taints(taint("a", "1", corev1.TaintEffectNoSchedule), taint("b", "2", corev1.TaintEffectNoSchedule))),
			pod:  small(tolerate(corev1.Toleration{Key: "a", Operator: corev1.TolerationOpExists})),
			want: map[string]int{"node(s) had untolerated taint {b: 2}": 1}},

		// NodeAffinity
		{name: "nodeSelector matches", node: node("n", "1", "1Gi", nodeLabels("disk", "ssd")), pod: small(nodeSelector("disk", "ssd"))},
		{name: "nodeSelector value differs", node: node("n", "1", "1Gi", nodeLabels("disk", "hdd")), pod: small(nodeSelector("disk", "ssd")),
			want: map[string]int{ReasonNodeAffinity: 1}},
		{name: "nodeSelector label missing", node: node("n", "1", "1Gi"), pod: small(nodeSelector("disk", "ssd")),
			want: map[string]int{ReasonNodeAffinity: 1}},
		{name: "In matches", node: node("n", "1", "1Gi", nodeLabels("zone", "b")),
			pod: small(nodeAffinity(required(labelTerm(expr("zone", corev1.NodeSelectorOpIn, "a", "b")))))},
		{name: "In misses", node: node("n", "1", "1Gi", nodeLabels("zone", "c")),
			pod:  small(nodeAffinity(required(labelTerm(expr("zone", corev1.NodeSelectorOpIn, "a", "b"))))),
			want: map[string]int{ReasonNodeAffinity: 1}},
		{name: "NotIn with label absent matches", node: node("n", "1", "1Gi"),
			pod: small(nodeAffinity(required(labelTerm(expr("zone", corev1.NodeSelectorOpNotIn, "a")))))},
		{name: "NotIn with excluded value", node: node("n", "1", "1Gi", nodeLabels("zone", "a")),
			pod:  small(nodeAffinity(required(labelTerm(expr("zone", corev1.NodeSelectorOpNotIn, "a"))))),
			want: map[string]int{ReasonNodeAffinity: 1}},
		{name: "Exists", node: node("n", "1", "1Gi", nodeLabels("gpu", "")),
			pod: small(nodeAffinity(required(labelTerm(expr("gpu", corev1.NodeSelectorOpExists)))))},
		{name: "Exists misses", node: node("n", "1", "1Gi"),
			pod:  small(nodeAffinity(required(labelTerm(expr("gpu", corev1.NodeSelectorOpExists))))),
			want: map[string]int{ReasonNodeAffinity: 1}},
		{name: "DoesNotExist", node: node("n", "1", "1Gi"),
			pod: small(nodeAffinity(required(labelTerm(expr("gpu", corev1.NodeSelectorOpDoesNotExist)))))},
		{name: "DoesNotExist misses", node: node("n", "1", "1Gi", nodeLabels("gpu", "yes")),
			pod:  small(nodeAffinity(required(labelTerm(expr("gpu", corev1.NodeSelectorOpDoesNotExist))))),
			want: map[string]int{ReasonNodeAffinity: 1}},
		{name: "Gt", node: node("n", "1", "1Gi", nodeLabels("cores", "16")),
			pod: small(nodeAffinity(required(labelTerm(expr("cores", corev1.NodeSelectorOpGt, "8")))))},
		{name: "Gt is strict", node: node("n", "1", "1Gi", nodeLabels("cores", "8")),
			pod:  small(nodeAffinity(required(labelTerm(expr("cores", corev1.NodeSelectorOpGt, "8"))))),
			want: map[string]int{ReasonNodeAffinity: 1}},
		{name: "Gt on a non-numeric label", node: node("n", "1", "1Gi", nodeLabels("cores", "many")),
			pod:  small(nodeAffinity(required(labelTerm(expr("cores", corev1.NodeSelectorOpGt, "8"))))),
			want: map[string]int{ReasonNodeAffinity: 1}},
		{name: "Lt", node: node("n", "1", "1Gi", nodeLabels("cores", "4")),
			pod: small(nodeAffinity(required(labelTerm(expr("cores", corev1.NodeSelectorOpLt, "8")))))},
		{name: "Lt misses", node: node("n", "1", "1Gi", nodeLabels("cores", "9")),
			pod:  small(nodeAffinity(required(labelTerm(expr("cores", corev1.NodeSelectorOpLt, "8"))))),
			want: map[string]int{ReasonNodeAffinity: 1}},
		{name: "expressions in a term are ANDed", node: node("n", "1", "1Gi", nodeLabels("zone", "a")),
			pod:  small(nodeAffinity(required(labelTerm(expr("zone", corev1.NodeSelectorOpIn, "a"), expr("gpu", corev1.NodeSelectorOpExists))))),
			want: map[string]int{ReasonNodeAffinity: 1}},
		{name: "terms are ORed", node: node("n", "1", "1Gi", nodeLabels("zone", "a")),
			pod: small(nodeAffinity(required(labelTerm(expr("gpu", corev1.NodeSelectorOpExists)), labelTerm(expr("zone", corev1.NodeSelectorOpIn, "a")))))},
		{name: "matchFields In", node: node("n", "1", "1Gi"),
			pod: small(nodeAffinity(required(fieldTerm(expr("metadata.name", corev1.NodeSelectorOpIn, "n")))))},
		{name: "matchFields NotIn", node: node("n", "1", "1Gi"),
			pod:  small(nodeAffinity(required(labelTerm(), fieldTerm(expr("metadata.name", corev1.NodeSelectorOpNotIn, "n"))))),
			want: map[string]int{ReasonNodeAffinity: 1}},
		{name: "matchFields with labels in one term", node: node("n", "1", "1Gi", nodeLabels("zone", "a")),
			pod: small(nodeAffinity(required(corev1.NodeSelectorTerm{
				MatchExpressions: []corev1.NodeSelectorRequirement{expr("zone", corev1.NodeSelectorOpIn, "b")},
				MatchFields:      []corev1.NodeSelectorRequirement{expr("metadata.name", corev1.NodeSelectorOpNotIn, "x")},
			}))),
			want: map[string]int{ReasonNodeAffinity: 1}},
		{name: "required affinity without terms matches nothing", node: node("n", "1", "1Gi"),
			pod:  small(nodeAffinity(required())),
			want: map[string]int{ReasonNodeAffinity: 1}},
		{name: "empty term matches nothing", node: node("n", "1", "1Gi"),
			pod:  small(nodeAffinity(required(labelTerm()))),
			want: map[string]int{ReasonNodeAffinity: 1}},
		{name: "unparseable term is skipped, others still match", node: node("n", "1", "1Gi", nodeLabels("zone", "a")),
			pod: small(nodeAffinity(required(
				labelTerm(expr("cores", corev1.NodeSelectorOpGt, "1", "2")),
				labelTerm(expr("zone", corev1.NodeSelectorOpIn, "a")))))},
		{name: "unparseable term alone matches nothing", node: node("n", "1", "1Gi", nodeLabels("cores", "4")),
			pod:  small(nodeAffinity(required(labelTerm(expr("cores", corev1.NodeSelectorOpGt, "one"))))),
			want: map[string]int{ReasonNodeAffinity: 1}},
		{name: "nodeSelector and affinity must both hold", node: node("n", "1", "1Gi", nodeLabels("zone", "a")),
			pod:  small(nodeSelector("disk", "ssd"), nodeAffinity(required(labelTerm(expr("zone", corev1.NodeSelectorOpIn, "a"))))),
			want: map[string]int{ReasonNodeAffinity: 1}},

		// NodePorts
		{name: "same host port", node: node("n", "1", "1Gi"),
			existing: []*corev1.Pod{pod("old", "", "", hostPort(80, "", ""))},
			pod:      small(hostPort(80, corev1.ProtocolTCP, "")),
			want:     map[string]int{ReasonNodePorts: 1}},
		{name: "same port, other protocol", node: node("n", "1", "1Gi"),
			existing: []*corev1.Pod{pod("old", "", "", hostPort(53, corev1.ProtocolUDP, ""))},
			pod:      small(hostPort(53, corev1.ProtocolTCP, ""))},
		{name: "specific address against wildcard in use", node: node("n", "1", "1Gi"),
			existing: []*corev1.Pod{pod("old", "", "", hostPort(80, "", "0.0.0.0"))},
			pod:      small(hostPort(80, "", "10.0.0.1")),
			want:     map[string]int{ReasonNodePorts: 1}},
		{name: "wildcard against specific address in use", node: node("n", "1", "1Gi"),
			existing: []*corev1.Pod{pod("old", "", "", hostPort(80, "", "10.0.0.1"))},
			pod:      small(hostPort(80, "", "")),
			want:     map[string]int{ReasonNodePorts: 1}},
		{name: "different specific addresses", node: node("n", "1", "1Gi"),
			existing: []*corev1.Pod{pod("old", "", "", hostPort(80, "", "10.0.0.1"))},
			pod:      small(hostPort(80, "", "10.0.0.2"))},
		{name: "different ports", node: node("n", "1", "1Gi"),
			existing: []*corev1.Pod{pod("old", "", "", hostPort(80, "", ""))},
			pod:      small(hostPort(81, "", ""))},
		{name: "sidecar init container holds its port", node: node("n", "1", "1Gi"),
			existing: []*corev1.Pod{pod("old", "", "", func(p *corev1.Pod) {
				always := corev1.ContainerRestartPolicyAlways
				p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: &always, Ports: []corev1.ContainerPort{{HostPort: 15001}}}}
			})},
			pod:  small(hostPort(15001, "", "")),
			want: map[string]int{ReasonNodePorts: 1}},
		{name: "classic init container's port is released", node: node("n", "1", "1Gi"),
			existing: []*corev1.Pod{pod("old", "", "", func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{{Name: "setup", Ports: []corev1.ContainerPort{{HostPort: 15001}}}}
			})},
			pod: small(hostPort(15001, "", ""))},

		// NodeResourcesFit
		{name: "insufficient cpu", node: node("n", "1", "1Gi"), pod: pod("p", "2", "100Mi"),
			want: map[string]int{ReasonInsufficientCPU: 1}},
		{name: "insufficient memory", node: node("n", "1", "1Gi"), pod: pod("p", "100m", "2Gi"),
			want: map[string]int{ReasonInsufficientMemory: 1}},
		{name: "every lacking resource counts", node: node("n", "1", "1Gi"), pod: pod("p", "2", "2Gi"),
			want: map[string]int{ReasonInsufficientCPU: 1, ReasonInsufficientMemory: 1}},
		{name: "existing requests are subtracted", node: node("n", "1", "1Gi"),
			existing: []*corev1.Pod{pod("old", "600m", "100Mi")},
			pod:      pod("p", "500m", "100Mi"),
			want:     map[string]int{ReasonInsufficientCPU: 1}},
		{name: "exact fit", node: node("n", "1", "1Gi"),
			existing: []*corev1.Pod{pod("old", "500m", "512Mi")},
			pod:      pod("p", "500m", "512Mi")},
		{name: "insufficient ephemeral storage", node: node("n", "1", "1Gi"),
			pod: pod("p", "100m", "100Mi", func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage] = rl("x", "200Gi")["x"]
			}),
			want: map[string]int{ReasonInsufficientStorage: 1}},
		{name: "too many pods", node: node("n", "1", "1Gi", alloc("pods", "1")),
			existing: []*corev1.Pod{pod("old", "", "")},
			pod:      pod("p", "", ""),
			want:     map[string]int{ReasonTooManyPods: 1}},
		{name: "too many pods and insufficient cpu", node: node("n", "1", "1Gi", alloc("pods", "1")),
			existing: []*corev1.Pod{pod("old", "", "")},
			pod:      pod("p", "2", ""),
			want:     map[string]int{ReasonTooManyPods: 1, ReasonInsufficientCPU: 1}},
		{name: "best-effort pod fits a full node", node: node("n", "1", "1Gi"),
			existing: []*corev1.Pod{pod("old", "1", "1Gi")},
			pod:      pod("p", "", "")},
		{name: "extended resource missing", node: node("n", "1", "1Gi"),
			pod: pod("p", "100m", "100Mi", func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = rl("x", "1")["x"]
			}),
			want: map[string]int{"Insufficient nvidia.com/gpu": 1}},
		{name: "extended resource available", node: node("n", "1", "1Gi", alloc("nvidia.com/gpu", "2")),
			existing: []*corev1.Pod{pod("old", "", "", func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = rl("x", "1")["x"]
			})},
			pod: pod("p", "100m", "100Mi", func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = rl("x", "1")["x"]
			})},
		{name: "extended resource used up", node: node("n", "1", "1Gi", alloc("nvidia.com/gpu", "1")),
			existing: []*corev1.Pod{pod("old", "", "", func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = rl("x", "1")["x"]
			})},
			pod: pod("p", "100m", "100Mi", func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = rl("x", "1")["x"]
			}),
			want: map[string]int{"Insufficient nvidia.com/gpu": 1}},
		{name: "hugepages", node: node("n", "1", "1Gi", alloc("hugepages-2Mi", "4Mi")),
			pod: pod("p", "100m", "100Mi", func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Requests["hugepages-2Mi"] = rl("x", "8Mi")["x"]
			}),
			want: map[string]int{"Insufficient hugepages-2Mi": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var existing []*corev1.Pod
			for _, p := range tc.existing {
				p.Spec.NodeName = tc.node.Name
				existing = append(existing, p)
			}
			s := NewSnapshot([]*corev1.Node{tc.node}, existing)
			res, err := Schedule(s, tc.pod, Options{})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("want fit, got %v", err)
				}
				if res.Node != tc.node.Name || res.Feasible != 1 || res.Evaluated != 1 {
					t.Fatalf("result %+v", res)
				}
				return
			}
			var fe *FitError
			if !errors.As(err, &fe) {
				t.Fatalf("want FitError, got %+v, %v", res, err)
			}
			if !maps.Equal(fe.Reasons, tc.want) {
				t.Fatalf("reasons %v, want %v", fe.Reasons, tc.want)
			}
			if fe.NumAllNodes != 1 || res.Evaluated != 1 || res.Feasible != 0 || res.Node != "" {
				t.Fatalf("NumAllNodes %d, result %+v", fe.NumAllNodes, res)
			}
		})
	}
}

// A node failing several filters reports only the first in upstream's order (NodeUnschedulable,
// NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit).
func TestFilterOrder(t *testing.T) {
	cp := taint("node-role.kubernetes.io/control-plane", "", corev1.TaintEffectNoSchedule)
	tests := []struct {
		name string
		node *corev1.Node
		pod  *corev1.Pod
		want string
	}{
		{"unschedulable before name", node("n", "1", "1Gi", cordoned()), pod("p", "2", "", on("x")), ReasonUnschedulable},
		{"name before taint", node("n", "1", "1Gi", taints(cp)), pod("p", "2", "", on("x")), ReasonNodeName},
		{"taint before affinity", node("n", "1", "1Gi", taints(cp)), pod("p", "2", "", nodeSelector("a", "b")), cpTaintReason},
		{"affinity before ports", node("n", "1", "1Gi"), pod("p", "2", "", nodeSelector("a", "b"), hostPort(80, "", "")), ReasonNodeAffinity},
		{"affinity before resources", node("n", "1", "1Gi"), pod("p", "2", "2Gi", nodeSelector("a", "b")), ReasonNodeAffinity},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fe := fitError(t, NewSnapshot([]*corev1.Node{tc.node}, nil), tc.pod)
			if want := map[string]int{tc.want: 1}; !maps.Equal(fe.Reasons, want) {
				t.Fatalf("reasons %v, want %v", fe.Reasons, want)
			}
		})
	}

	// Ports before resources needs a port in use.
	n := node("n", "1", "1Gi")
	s := NewSnapshot([]*corev1.Node{n}, []*corev1.Pod{pod("old", "", "", on("n"), hostPort(80, "", ""))})
	fe := fitError(t, s, pod("p", "2", "", hostPort(80, "", "")))
	if want := map[string]int{ReasonNodePorts: 1}; !maps.Equal(fe.Reasons, want) {
		t.Fatalf("reasons %v, want %v", fe.Reasons, want)
	}
}

func TestFitErrorMessage(t *testing.T) {
	t.Run("upstream example", func(t *testing.T) {
		s := NewSnapshot([]*corev1.Node{
			node("cp", "8", "8Gi", taints(taint("node-role.kubernetes.io/control-plane", "", corev1.TaintEffectNoSchedule))),
			node("w1", "1", "8Gi"),
			node("w2", "1", "8Gi"),
		}, nil)
		fe := fitError(t, s, pod("p", "2", "1Gi"))
		want := "0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 2 Insufficient cpu."
		if fe.Error() != want {
			t.Fatalf("got  %q\nwant %q", fe.Error(), want)
		}
	})
	t.Run("several resources per node", func(t *testing.T) {
		s := NewSnapshot([]*corev1.Node{node("a", "1", "1Gi"), node("b", "1", "1Gi")}, nil)
		want := "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory."
		if got := fitError(t, s, pod("p", "2", "2Gi")).Error(); got != want {
			t.Fatalf("got  %q\nwant %q", got, want)
		}
	})
	t.Run("sorted as strings, count included", func(t *testing.T) {
		fe := &FitError{NumAllNodes: 13, Reasons: map[string]int{
			ReasonInsufficientCPU: 2,
			ReasonUnschedulable:   10,
			ReasonNodeAffinity:    1,
		}}
		want := "0/13 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 10 node(s) were unschedulable, 2 Insufficient cpu."
		if fe.Error() != want {
			t.Fatalf("got  %q\nwant %q", fe.Error(), want)
		}
	})
	t.Run("every reason string", func(t *testing.T) {
		taintA := taint("a", "x", corev1.TaintEffectNoSchedule)
		s := NewSnapshot([]*corev1.Node{
			node("cordoned", "8", "8Gi", cordoned()),
			node("tainted", "8", "8Gi", taints(taintA)),
			node("wrong-zone", "8", "8Gi", nodeLabels("zone", "b")),
			node("port", "8", "8Gi", nodeLabels("zone", "a")),
			node("small", "1", "1Gi", nodeLabels("zone", "a"), alloc("pods", "0")),
		}, []*corev1.Pod{pod("holder", "", "", on("port"), hostPort(80, "", ""))})
		p := pod("p", "2", "2Gi", nodeSelector("zone", "a"), hostPort(80, "", ""), func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage] = rl("x", "200Gi")["x"]
		})
		want := "0/5 nodes are available: 1 Insufficient cpu, 1 Insufficient ephemeral-storage, 1 Insufficient memory, 1 Too many pods, " +
			"1 node(s) didn't have free ports for the requested pod ports, 1 node(s) didn't match Pod's node affinity/selector, " +
			"1 node(s) had untolerated taint {a: x}, 1 node(s) were unschedulable."
		if got := fitError(t, s, p).Error(); got != want {
			t.Fatalf("got  %q\nwant %q", got, want)
		}
	})
	t.Run("no nodes at all", func(t *testing.T) {
		_, err := Schedule(NewSnapshot(nil, nil), pod("p", "", ""), Options{})
		if !errors.Is(err, ErrNoNodesAvailable) || err.Error() != "no nodes available to schedule pods" {
			t.Fatalf("err %v", err)
		}
	})
}

// DaemonSet pods pin metadata.name; upstream then evaluates only the named nodes and counts the
// rest under NodeAffinity's PreFilter.
func TestNodeNameRestriction(t *testing.T) {
	nodes := []*corev1.Node{node("a", "1", "1Gi"), node("b", "4", "4Gi"), node("c", "4", "4Gi")}
	pinned := func(names ...string) podOpt {
		return nodeAffinity(required(fieldTerm(expr("metadata.name", corev1.NodeSelectorOpIn, names...))))
	}

	s := NewSnapshot(nodes, nil)
	res := scheduleOne(t, s, pod("ds", "100m", "", pinned("c")), Options{})
	if res.Node != "c" || res.Evaluated != 1 || res.Feasible != 1 {
		t.Fatalf("result %+v", res)
	}

	fe := fitError(t, s, pod("ds", "2", "", pinned("a")))
	want := "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]."
	if fe.Error() != want {
		t.Fatalf("got  %q\nwant %q", fe.Error(), want)
	}

	fe = fitError(t, s, pod("ds", "100m", "", pinned("gone")))
	if want := "0/3 nodes are available: 3 node(s) didn't satisfy plugin(s) [NodeAffinity]."; fe.Error() != want {
		t.Fatalf("got  %q\nwant %q", fe.Error(), want)
	}

	// Terms pinning disjoint names (ANDed within a term) can never match.
	conflicting := pod("ds", "100m", "", nodeAffinity(required(fieldTerm(
		expr("metadata.name", corev1.NodeSelectorOpIn, "a"),
		expr("metadata.name", corev1.NodeSelectorOpIn, "b"),
	))))
	fe = fitError(t, s, conflicting)
	if want := "0/3 nodes are available: pod affinity terms conflict."; fe.Error() != want {
		t.Fatalf("got  %q\nwant %q", fe.Error(), want)
	}

	// One term without a name pin leaves every node eligible.
	open := pod("p", "100m", "", nodeAffinity(required(
		fieldTerm(expr("metadata.name", corev1.NodeSelectorOpIn, "a")),
		labelTerm(expr(corev1.LabelHostname, corev1.NodeSelectorOpIn, "b")),
	)))
	res = scheduleOne(t, s, open, Options{})
	if res.Evaluated != 3 || res.Feasible != 2 {
		t.Fatalf("result %+v", res)
	}
}

func TestNumFeasibleNodesToFind(t *testing.T) {
	tests := []struct{ pct, nodes, want int }{
		{0, 0, 0},
		{0, 50, 50},
		{0, 99, 99},
		{0, 100, 100},  // 50% would be 50: at least 100
		{0, 1000, 420}, // 50 - 8 = 42%
		{0, 5000, 500}, // 50 - 40 = 10%
		{0, 6000, 300}, // 50 - 48 = 2% -> at least 5%
		{0, 20000, 1000},
		{10, 500, 100},
		{30, 1000, 300},
		{100, 5000, 5000},
		{150, 5000, 5000},
		{-1, 1000, 420},
	}
	for _, tc := range tests {
		if got := NumFeasibleNodesToFind(tc.pct, tc.nodes); got != tc.want {
			t.Errorf("NumFeasibleNodesToFind(%d, %d) = %d, want %d", tc.pct, tc.nodes, got, tc.want)
		}
	}
}

func manyNodes(n int, opts func(i int) []nodeOpt) []*corev1.Node {
	nodes := make([]*corev1.Node, n)
	for i := range nodes {
		var o []nodeOpt
		if opts != nil {
			o = opts(i)
		}
		nodes[i] = node(fmt.Sprintf("n%05d", i), "8", "32Gi", o...)
	}
	return nodes
}

func TestAdaptiveSearch(t *testing.T) {
	s := NewSnapshot(manyNodes(5000, nil), nil)
	res := scheduleOne(t, s, pod("p", "100m", "100Mi"), Options{})
	if res.Evaluated != 500 || res.Feasible != 500 || res.NextStart != 500 {
		t.Fatalf("result %+v, want 500 evaluated and feasible", res)
	}
	// The chosen node is inside the searched window.
	if idx := s.Node(res.Node).pos; idx >= 500 {
		t.Fatalf("picked node at %d, outside the window", idx)
	}
	res = scheduleOne(t, s, pod("p", "100m", "100Mi"), Options{Start: 4800})
	if res.Evaluated != 500 || res.NextStart != 300 {
		t.Fatalf("wrapped result %+v", res)
	}
	if idx := s.Node(res.Node).pos; idx < 4800 && idx >= 300 {
		t.Fatalf("picked node at %d, outside the wrapped window", idx)
	}
	res = scheduleOne(t, s, pod("p", "100m", "100Mi"), Options{PercentageOfNodesToScore: 100})
	if res.Evaluated != 5000 || res.Feasible != 5000 || res.NextStart != 0 {
		t.Fatalf("all-nodes result %+v", res)
	}

	// Infeasible nodes do not count toward the target: with every odd node tainted the 500th
	// feasible node is n00998, so the search looks at 999.
	tainted := NewSnapshot(manyNodes(5000, func(i int) []nodeOpt {
		if i%2 == 1 {
			return []nodeOpt{taints(taint("t", "", corev1.TaintEffectNoSchedule))}
		}
		return nil
	}), nil)
	res = scheduleOne(t, tainted, pod("p", "100m", "100Mi"), Options{})
	if res.Evaluated != 999 || res.Feasible != 500 || res.NextStart != 999 {
		t.Fatalf("tainted result %+v", res)
	}

	small := NewSnapshot(manyNodes(3, nil), nil)
	res = scheduleOne(t, small, pod("p", "100m", "100Mi"), Options{Start: 7})
	if res.Evaluated != 3 || res.NextStart != 1 {
		t.Fatalf("small result %+v", res)
	}
	res = scheduleOne(t, small, pod("p", "100m", "100Mi"), Options{Start: -1})
	if res.Evaluated != 3 || res.NextStart != 2 {
		t.Fatalf("negative start result %+v", res)
	}
	// A failed search advances the start too.
	res, err := Schedule(small, pod("p", "100", ""), Options{Start: 1})
	if _, ok := err.(*FitError); !ok || res.Evaluated != 3 || res.NextStart != 1 {
		t.Fatalf("want FitError with the start advanced, got %+v, %v", res, err)
	}
}

// Ties go to the first node in search order, so the caller's rotation of Start decides them.
func TestTieBreakFollowsStart(t *testing.T) {
	s := NewSnapshot(manyNodes(3, nil), nil)
	for start, want := range []string{"n00000", "n00001", "n00002"} {
		if res := scheduleOne(t, s, pod("p", "100m", "100Mi"), Options{Start: start}); res.Node != want {
			t.Fatalf("start %d picked %s, want %s", start, res.Node, want)
		}
	}
}

// Scheduling replicas one by one, each decision followed by AddPod, spreads a controller's pods
// evenly over equal nodes.
func TestSpreadOwner(t *testing.T) {
	for _, start := range []int{0, 1, 2} {
		s := NewSnapshot(manyNodes(3, nil), nil)
		next := start
		perNode := map[string]int{}
		for i := range 6 {
			p := pod(fmt.Sprintf("web-%d", i), "100m", "128Mi", ownedBy("rs-web"))
			res := scheduleOne(t, s, p, Options{Start: next})
			next = res.NextStart
			p.Spec.NodeName = res.Node
			s.AddPod(p)
			perNode[res.Node]++
		}
		want := map[string]int{"n00000": 2, "n00001": 2, "n00002": 2}
		if !maps.Equal(perNode, want) {
			t.Fatalf("start %d: placement %v, want %v", start, perNode, want)
		}
	}
}

// Spreading counts only pods of the same controller: another owner's pods on a node matter only
// through resource scoring.
func TestSpreadIgnoresOtherOwners(t *testing.T) {
	s := NewSnapshot(manyNodes(2, nil), []*corev1.Pod{
		pod("web-0", "100m", "128Mi", ownedBy("rs-web"), on("n00000")),
		pod("db-0", "100m", "128Mi", ownedBy("rs-db"), on("n00001")),
		pod("db-1", "100m", "128Mi", ownedBy("rs-db"), on("n00001")),
	})
	if res := scheduleOne(t, s, pod("web-1", "100m", "128Mi", ownedBy("rs-web")), Options{}); res.Node != "n00001" {
		t.Fatalf("web-1 went to %s, want n00001 (no web pods there)", res.Node)
	}
	// Terminating siblings no longer count.
	s = NewSnapshot(manyNodes(2, nil), []*corev1.Pod{
		pod("web-0", "100m", "128Mi", ownedBy("rs-web"), on("n00001"), func(p *corev1.Pod) {
			now := metav1Now()
			p.DeletionTimestamp = &now
		}),
		pod("web-1", "100m", "128Mi", ownedBy("rs-web"), on("n00000")),
	})
	if res := scheduleOne(t, s, pod("web-2", "100m", "128Mi", ownedBy("rs-web")), Options{}); res.Node != "n00001" {
		t.Fatalf("web-2 went to %s, want n00001 (its only sibling there is terminating)", res.Node)
	}
}

// With zones, the system-default zone constraint pulls a replica toward the zone with fewer
// siblings even where the per-node count alone would pick another node.
func TestSpreadZones(t *testing.T) {
	nodes := []*corev1.Node{
		node("a1", "4", "16Gi", nodeLabels(corev1.LabelTopologyZone, "a")),
		node("a2", "4", "16Gi", nodeLabels(corev1.LabelTopologyZone, "a")),
		node("b1", "4", "16Gi", nodeLabels(corev1.LabelTopologyZone, "b")),
	}
	var pods []*corev1.Pod
	for i := range 4 {
		pods = append(pods, pod(fmt.Sprintf("w-a2-%d", i), "100m", "128Mi", ownedBy("rs"), on("a2")))
	}
	pods = append(pods, pod("w-b1", "100m", "128Mi", ownedBy("rs"), on("b1")))
	s := NewSnapshot(nodes, pods)
	checkZoneOwners(t, s)
	// a1 has no sibling but its zone has four; b1 has one and its zone one.
	if res := scheduleOne(t, s, pod("w", "100m", "128Mi", ownedBy("rs")), Options{}); res.Node != "b1" {
		t.Fatalf("picked %s, want b1", res.Node)
	}
	// The same with a node selector takes the slow path that walks nodes; it must agree.
	sel := pod("w", "100m", "128Mi", ownedBy("rs"), nodeSelector("kubernetes.io/os", "linux"))
	for _, n := range nodes {
		n.Labels["kubernetes.io/os"] = "linux"
		s.SetNode(n)
	}
	checkZoneOwners(t, s)
	if res := scheduleOne(t, s, sel, Options{}); res.Node != "b1" {
		t.Fatalf("with selector picked %s, want b1", res.Node)
	}
	// Moving a2 into zone b moves its siblings' counts along.
	a2 := node("a2", "4", "16Gi", nodeLabels(corev1.LabelTopologyZone, "b"))
	s.SetNode(a2)
	checkZoneOwners(t, s)
	if got := s.zoneOwners[zoneOwner{"b", "rs"}]; got != 5 {
		t.Fatalf("zone b count %d, want 5", got)
	}
	s.RemoveNode("a2")
	checkZoneOwners(t, s)
	if res := scheduleOne(t, s, pod("w", "100m", "128Mi", ownedBy("rs")), Options{}); res.Node != "a1" {
		t.Fatalf("after removing a2 picked %s, want a1", res.Node)
	}
}

// checkZoneOwners recomputes the per-zone owner counts from the nodes and compares them with
// the incrementally maintained ones.
func checkZoneOwners(t *testing.T, s *Snapshot) {
	t.Helper()
	want := map[zoneOwner]int32{}
	for _, n := range s.Nodes() {
		if n.zone == "" {
			continue
		}
		for owner, c := range n.owners {
			want[zoneOwner{n.zone, owner}] += c
		}
	}
	if !maps.Equal(s.zoneOwners, want) {
		t.Fatalf("zone owners %v, recomputed %v", s.zoneOwners, want)
	}
}

func TestLeastAllocated(t *testing.T) {
	s := NewSnapshot(manyNodes(2, nil), []*corev1.Pod{pod("big", "4", "16Gi", on("n00000"))})
	if res := scheduleOne(t, s, pod("p", "100m", "128Mi"), Options{}); res.Node != "n00001" {
		t.Fatalf("picked %s, want the emptier n00001", res.Node)
	}
	// Best-effort pods count with the scoring defaults, so a node crowded with them looks used.
	var crowd []*corev1.Pod
	for i := range 40 {
		crowd = append(crowd, pod(fmt.Sprintf("be-%d", i), "", "", on("n00000")))
	}
	s = NewSnapshot(manyNodes(2, nil), crowd)
	if res := scheduleOne(t, s, pod("p", "", ""), Options{}); res.Node != "n00001" {
		t.Fatalf("picked %s, want n00001 away from 40 best-effort pods", res.Node)
	}

	n := NewNodeInfo(node("n", "4", "8Gi"))
	n.AddPod(pod("a", "1", "2Gi"))
	q := NewSnapshot(nil, nil).newPodQuery(pod("p", "1", "2Gi"))
	// cpu (4-2)/4 = 50, memory (8-4)/8 = 50.
	if got := leastAllocated(&q, n); got != 50 {
		t.Fatalf("leastAllocated = %d, want 50", got)
	}
	q = NewSnapshot(nil, nil).newPodQuery(pod("p", "", ""))
	// cpu (4-1.1)/4 = 72.5 -> 72, memory (8Gi-2Gi-200Mi)/8Gi = 72.5.. -> 72.
	if got := leastAllocated(&q, n); got != 72 {
		t.Fatalf("leastAllocated(best effort) = %d, want 72", got)
	}
}

func TestBalancedAllocation(t *testing.T) {
	n := NewNodeInfo(node("n", "10", "10Gi"))
	n.AddPod(pod("a", "4", "0"))
	q := NewSnapshot(nil, nil).newPodQuery(pod("p", "1", "1Gi"))
	// cpu 5/10 = 0.5, memory 1/10 = 0.1: std 0.2 -> 80.
	if got := balancedAllocation(&q, n); got != 80 {
		t.Fatalf("balancedAllocation = %d, want 80", got)
	}
	// Balanced nodes win when least-allocated ties: both nodes have 50% left on average.
	s := NewSnapshot(manyNodes(2, nil), []*corev1.Pod{
		pod("skewed", "6", "0", on("n00000")),
		pod("even", "3", "12Gi", on("n00001")),
	})
	// n00000: cpu 6.1/8, mem 0.3/32 -> least (23+99)/2=61, balanced ~62.
	// n00001: cpu 3.1/8, mem 12.3/32 -> least (61+61)/2=61, balanced 100.
	if res := scheduleOne(t, s, pod("p", "100m", "256Mi"), Options{}); res.Node != "n00001" {
		t.Fatalf("picked %s, want the balanced n00001", res.Node)
	}
}

func TestPreferredNodeAffinity(t *testing.T) {
	nodes := []*corev1.Node{
		node("plain", "8", "32Gi"),
		node("ssd", "8", "32Gi", nodeLabels("disk", "ssd")),
		node("gpu", "8", "32Gi", nodeLabels("gpu", "true")),
	}
	prefer := func(terms ...corev1.PreferredSchedulingTerm) podOpt {
		return nodeAffinity(&corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: terms})
	}
	term := func(w int32, e corev1.NodeSelectorRequirement) corev1.PreferredSchedulingTerm {
		return corev1.PreferredSchedulingTerm{Weight: w, Preference: labelTerm(e)}
	}
	for start := range 3 {
		s := NewSnapshot(nodes, nil)
		p := pod("p", "100m", "128Mi", prefer(term(10, expr("disk", corev1.NodeSelectorOpIn, "ssd")), term(90, expr("gpu", corev1.NodeSelectorOpExists))))
		if res := scheduleOne(t, s, p, Options{Start: start}); res.Node != "gpu" {
			t.Fatalf("start %d picked %s, want gpu", start, res.Node)
		}
		p = pod("p", "100m", "128Mi", prefer(term(10, expr("disk", corev1.NodeSelectorOpIn, "ssd"))))
		if res := scheduleOne(t, s, p, Options{Start: start}); res.Node != "ssd" {
			t.Fatalf("start %d picked %s, want ssd", start, res.Node)
		}
	}
	// A matched preference is worth 200 points, more than a moderately loaded node loses on
	// resource scores; but it never overrides a filter, which is what "preferred" means.
	s := NewSnapshot(nodes, []*corev1.Pod{pod("load", "2", "8Gi", on("ssd"))})
	p := pod("p", "100m", "128Mi", prefer(term(50, expr("disk", corev1.NodeSelectorOpIn, "ssd"))))
	if res := scheduleOne(t, s, p, Options{}); res.Node != "ssd" {
		t.Fatalf("picked %s, want ssd despite its load", res.Node)
	}
	p = pod("p", "100m", "128Mi", prefer(term(50, expr("disk", corev1.NodeSelectorOpIn, "ssd"))), nodeSelector("gpu", "true"))
	if res := scheduleOne(t, s, p, Options{}); res.Node != "gpu" {
		t.Fatalf("picked %s, want gpu (required)", res.Node)
	}

	// Score normalisation: weights sum per node, scaled so the best node gets 100.
	q := NewSnapshot(nil, nil).newPodQuery(pod("p", "", "", prefer(
		term(20, expr("disk", corev1.NodeSelectorOpIn, "ssd")),
		term(0, expr("gpu", corev1.NodeSelectorOpExists)),                   // zero weight never scores
		term(30, expr("cores", corev1.NodeSelectorOpGt, "x")),               // unparseable
		corev1.PreferredSchedulingTerm{Weight: 40, Preference: labelTerm()}, // empty
	)))
	if len(q.preferred) != 1 || q.preferred[0].weight != 20 {
		t.Fatalf("parsed preferred terms %+v", q.preferred)
	}
}

func TestPreferNoSchedule(t *testing.T) {
	soft := taint("spot", "true", corev1.TaintEffectPreferNoSchedule)
	nodes := []*corev1.Node{
		node("soft", "8", "32Gi", taints(soft)),
		node("softer", "8", "32Gi", taints(soft, taint("old", "", corev1.TaintEffectPreferNoSchedule))),
		node("clean", "8", "32Gi"),
	}
	s := NewSnapshot(nodes, nil)
	for start := range 3 {
		if res := scheduleOne(t, s, pod("p", "100m", "128Mi"), Options{Start: start}); res.Node != "clean" {
			t.Fatalf("start %d picked %s, want clean", start, res.Node)
		}
	}
	// Fewer untolerated taints is better: without the clean node, one beats two.
	s.RemoveNode("clean")
	if res := scheduleOne(t, s, pod("p", "100m", "128Mi"), Options{Start: 1}); res.Node != "soft" {
		t.Fatalf("picked %s, want soft", res.Node)
	}
	// Tolerating the taint (empty effect covers PreferNoSchedule) makes soft as good as clean.
	s.SetNode(nodes[2])
	tol := tolerate(corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists})
	if res := scheduleOne(t, s, pod("p", "100m", "128Mi", tol), Options{Start: 0}); res.Node != "soft" {
		t.Fatalf("picked %s, want soft (tolerated, first in order)", res.Node)
	}
	// A NoSchedule-only toleration does not cover PreferNoSchedule.
	tol = tolerate(corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	if res := scheduleOne(t, s, pod("p", "100m", "128Mi", tol), Options{Start: 0}); res.Node != "clean" {
		t.Fatalf("picked %s, want clean", res.Node)
	}
}

func TestImageLocality(t *testing.T) {
	const img = "registry.example/big:2.0"
	nodes := []*corev1.Node{
		node("cold", "8", "32Gi"),
		node("warm", "8", "32Gi", images(500*mb, img, "registry.example/big@sha256:abc")),
	}
	s := NewSnapshot(nodes, nil)
	p := pod("p", "100m", "128Mi", func(p *corev1.Pod) { p.Spec.Containers[0].Image = img })
	if res := scheduleOne(t, s, p, Options{}); res.Node != "warm" {
		t.Fatalf("picked %s, want warm", res.Node)
	}
	// 500MB on 1 of 2 nodes scales to 250MB: 100*(250-23)/(1000-23) = 23.
	q := s.newPodQuery(p)
	if got := imageLocality(&q, s.Node("warm")); got != 23 {
		t.Fatalf("imageLocality = %d, want 23", got)
	}
	if got := imageLocality(&q, s.Node("cold")); got != 0 {
		t.Fatalf("imageLocality(cold) = %d, want 0", got)
	}
	// Untagged images mean :latest.
	s.SetNode(node("warm", "8", "32Gi", images(500*mb, "registry.example/tool:latest")))
	p = pod("p", "100m", "128Mi", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "registry.example/tool" })
	if res := scheduleOne(t, s, p, Options{}); res.Node != "warm" {
		t.Fatalf("picked %s for untagged image, want warm", res.Node)
	}
	// Small images are below the threshold and do not matter.
	s.SetNode(node("warm", "8", "32Gi", images(10*mb, img)))
	q = s.newPodQuery(pod("p", "", "", func(p *corev1.Pod) { p.Spec.Containers[0].Image = img }))
	if got := imageLocality(&q, s.Node("warm")); got != 0 {
		t.Fatalf("imageLocality(small) = %d, want 0", got)
	}
	if st := s.images[img]; st == nil || st.nodes != 1 {
		t.Fatalf("image state %+v", st)
	}
	s.RemoveNode("warm")
	if _, ok := s.images[img]; ok {
		t.Fatalf("image state kept after its only node left")
	}
}
