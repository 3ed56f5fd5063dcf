package core

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func prio(p int32) podOpt { return func(pod *corev1.Pod) { pod.Spec.Priority = ptr.To(p) } }

func startedAt(sec int64) podOpt {
	return func(p *corev1.Pod) { p.Status.StartTime = &metav1.Time{Time: time.Unix(sec, 0)} }
}

func podLabels(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		p.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func nominatedTo(node string) podOpt {
	return func(p *corev1.Pod) { p.Status.NominatedNodeName = node }
}

func preemptedVictim() podOpt {
	return func(p *corev1.Pod) {
		now := metav1.Now()
		p.DeletionTimestamp = &now
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget,
			Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler})
	}
}

func pdb(name, app string, allowed int32) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
}

func TestPreempt(t *testing.T) {
	cpTaint := taint("node-role.kubernetes.io/control-plane", "", corev1.TaintEffectNoSchedule)
	tests := []struct {
		name      string
		nodes     []*corev1.Node
		pods      []*corev1.Pod // assigned (spec.nodeName set) or nominated
		pdbs      []*policyv1.PodDisruptionBudget
		preemptor *corev1.Pod
		opts      Options

		wantNode       string // "" means no preemption
		wantVictims    []string
		wantViolations int
		wantLowerNom   []string
		wantMessage    string // checked when set
		wantClear      bool
	}{
		{
			name:  "picks the node whose victims have the lowest priority",
			nodes: []*corev1.Node{node("n1", "2", "4Gi"), node("n2", "2", "4Gi"), node("n3", "2", "4Gi")},
			pods: []*corev1.Pod{
				pod("a", "2", "1Gi", on("n1"), prio(10)),
				pod("b", "2", "1Gi", on("n2"), prio(5)),
				pod("c", "2", "1Gi", on("n3"), prio(7)),
			},
			preemptor:   pod("p", "2", "1Gi", prio(100)),
			wantNode:    "n2",
			wantVictims: []string{"b"},
			wantMessage: "preemption: found a potential placement for pod on node n2, preempting 1 victims",
		},
		{
			name:        "no victims of equal or higher priority",
			nodes:       []*corev1.Node{node("n1", "2", "4Gi"), node("n2", "2", "4Gi")},
			pods:        []*corev1.Pod{pod("a", "2", "1Gi", on("n1"), prio(100)), pod("b", "2", "1Gi", on("n2"), prio(200))},
			preemptor:   pod("p", "2", "1Gi", prio(100)),
			wantMessage: "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
			wantClear:   true,
		},
		{
			name:  "pods without priority are priority 0",
			nodes: []*corev1.Node{node("n1", "2", "4Gi")},
			pods:  []*corev1.Pod{pod("a", "2", "1Gi", on("n1"))},
			// A preemptor of priority 0 may not preempt a pod of priority 0.
			preemptor: pod("p", "2", "1Gi"),
			wantClear: true,
		},
		{
			name:  "only lower-priority pods are victims, even when the equal one is bigger",
			nodes: []*corev1.Node{node("n1", "4", "4Gi")},
			pods: []*corev1.Pod{
				pod("big-equal", "3", "1Gi", on("n1"), prio(50)),
				pod("small-low", "1", "1Gi", on("n1"), prio(1)),
			},
			preemptor:   pod("p", "1", "1Gi", prio(50)),
			wantNode:    "n1",
			wantVictims: []string{"small-low"},
		},
		{
			name:  "removing every lower-priority pod is not enough",
			nodes: []*corev1.Node{node("n1", "4", "4Gi")},
			pods: []*corev1.Pod{
				pod("equal", "3", "1Gi", on("n1"), prio(50)),
				pod("low", "1", "1Gi", on("n1"), prio(1)),
			},
			preemptor:   pod("p", "2", "1Gi", prio(50)),
			wantMessage: "preemption: 0/1 nodes are available: 1 Insufficient cpu.",
			wantClear:   true,
		},
		{
			name:  "reprieves the most important victims that can stay",
			nodes: []*corev1.Node{node("n1", "4", "4Gi")},
			pods: []*corev1.Pod{
				pod("a", "2", "1Gi", on("n1"), prio(1)),
				pod("b", "1", "1Gi", on("n1"), prio(2)),
				pod("c", "1", "1Gi", on("n1"), prio(3)),
			},
			preemptor:   pod("p", "2", "1Gi", prio(10)),
			wantNode:    "n1",
			wantVictims: []string{"a"},
		},
		{
			name:  "reprieve order goes by priority, not size",
			nodes: []*corev1.Node{node("n1", "4", "4Gi")},
			pods: []*corev1.Pod{
				pod("a", "1", "1Gi", on("n1"), prio(1)),
				pod("b", "1", "1Gi", on("n1"), prio(2)),
				pod("c", "2", "1Gi", on("n1"), prio(3)),
			},
			// With all three gone there are 4 cpus: c (most important) stays, leaving exactly
			// the 2 the pod needs, so b and then a must go although they are small.
			preemptor:   pod("p", "2", "1Gi", prio(10)),
			wantNode:    "n1",
			wantVictims: []string{"b", "a"},
		},
		{
			name:  "victims are listed most important first",
			nodes: []*corev1.Node{node("n1", "3", "4Gi")},
			pods: []*corev1.Pod{
				pod("a", "1", "1Gi", on("n1"), prio(1)),
				pod("b", "1", "1Gi", on("n1"), prio(3)),
				pod("c", "1", "1Gi", on("n1"), prio(2)),
			},
			preemptor:   pod("p", "3", "1Gi", prio(10)),
			wantNode:    "n1",
			wantVictims: []string{"b", "c", "a"},
		},
		{
			name:  "prefers the node where no PodDisruptionBudget is violated",
			nodes: []*corev1.Node{node("n1", "2", "4Gi"), node("n2", "2", "4Gi")},
			pods: []*corev1.Pod{
				pod("guarded", "2", "1Gi", on("n1"), prio(1), podLabels("app", "db")),
				pod("free", "2", "1Gi", on("n2"), prio(5), podLabels("app", "web")),
			},
			pdbs:        []*policyv1.PodDisruptionBudget{pdb("db", "db", 0)},
			preemptor:   pod("p", "2", "1Gi", prio(10)),
			wantNode:    "n2",
			wantVictims: []string{"free"},
		},
		{
			name:  "a PDB with disruptions left does not count as violated",
			nodes: []*corev1.Node{node("n1", "2", "4Gi"), node("n2", "2", "4Gi")},
			pods: []*corev1.Pod{
				pod("guarded", "2", "1Gi", on("n1"), prio(1), podLabels("app", "db")),
				pod("free", "2", "1Gi", on("n2"), prio(5), podLabels("app", "web")),
			},
			pdbs:        []*policyv1.PodDisruptionBudget{pdb("db", "db", 1)},
			preemptor:   pod("p", "2", "1Gi", prio(10)),
			wantNode:    "n1",
			wantVictims: []string{"guarded"},
		},
		{
			name:  "a PDB in another namespace protects nothing",
			nodes: []*corev1.Node{node("n1", "2", "4Gi"), node("n2", "2", "4Gi")},
			pods: []*corev1.Pod{
				pod("guarded", "2", "1Gi", on("n1"), prio(1), podLabels("app", "db")),
				pod("free", "2", "1Gi", on("n2"), prio(5), podLabels("app", "web")),
			},
			pdbs: []*policyv1.PodDisruptionBudget{func() *policyv1.PodDisruptionBudget {
				p := pdb("db", "db", 0)
				p.Namespace = "other"
				return p
			}()},
			preemptor:   pod("p", "2", "1Gi", prio(10)),
			wantNode:    "n1",
			wantVictims: []string{"guarded"},
		},
		{
			name:  "violating the PDB when there is no other way, counted",
			nodes: []*corev1.Node{node("n1", "2", "4Gi")},
			pods: []*corev1.Pod{
				pod("guarded", "2", "1Gi", on("n1"), prio(1), podLabels("app", "db")),
			},
			pdbs:           []*policyv1.PodDisruptionBudget{pdb("db", "db", 0)},
			preemptor:      pod("p", "2", "1Gi", prio(10)),
			wantNode:       "n1",
			wantVictims:    []string{"guarded"},
			wantViolations: 1,
		},
		{
			name:  "PDB-protected pods are reprieved first on a node",
			nodes: []*corev1.Node{node("n1", "4", "4Gi")},
			pods: []*corev1.Pod{
				// Same priority: without the PDB, x (older) would be reprieved first.
				pod("x", "2", "1Gi", on("n1"), prio(1), podLabels("app", "web"), startedAt(100)),
				pod("y", "2", "1Gi", on("n1"), prio(1), podLabels("app", "db"), startedAt(200)),
			},
			pdbs:        []*policyv1.PodDisruptionBudget{pdb("db", "db", 0)},
			preemptor:   pod("p", "2", "1Gi", prio(10)),
			wantNode:    "n1",
			wantVictims: []string{"x"},
		},
		{
			name:        "preemptionPolicy Never",
			nodes:       []*corev1.Node{node("n1", "2", "4Gi")},
			pods:        []*corev1.Pod{pod("a", "2", "1Gi", on("n1"), prio(1))},
			preemptor:   pod("p", "2", "1Gi", prio(100), func(p *corev1.Pod) { p.Spec.PreemptionPolicy = ptr.To(corev1.PreemptNever) }),
			wantMessage: "preemption: not eligible due to preemptionPolicy=Never.",
		},
		{
			name:  "taint-failing nodes are skipped",
			nodes: []*corev1.Node{node("n1", "2", "4Gi", taints(cpTaint)), node("n2", "2", "4Gi")},
			pods: []*corev1.Pod{
				pod("a", "2", "1Gi", on("n1"), prio(1)),
				pod("b", "2", "1Gi", on("n2"), prio(50)),
			},
			preemptor:   pod("p", "2", "1Gi", prio(100)),
			wantNode:    "n2",
			wantVictims: []string{"b"},
		},
		{
			name: "nodes failing node-only filters are not helped",
			nodes: []*corev1.Node{
				node("n1", "2", "4Gi", nodeLabels("disk", "ssd"), taints(cpTaint)),
				node("n2", "2", "4Gi", nodeLabels("disk", "ssd"), cordoned()),
				node("n3", "2", "4Gi", nodeLabels("disk", "hdd")),
				node("n4", "2", "4Gi", nodeLabels("disk", "ssd")),
			},
			pods: []*corev1.Pod{
				pod("a", "2", "1Gi", on("n1"), prio(1)),
				pod("b", "2", "1Gi", on("n2"), prio(1)),
				pod("c", "2", "1Gi", on("n3"), prio(1)),
				pod("d", "2", "1Gi", on("n4"), prio(100)),
			},
			preemptor:   pod("p", "2", "1Gi", prio(100), nodeSelector("disk", "ssd")),
			wantMessage: "preemption: 0/4 nodes are available: 1 No preemption victims found for incoming pod, 3 Preemption is not helpful for scheduling.",
			wantClear:   true,
		},
		{
			name:  "node name and affinity mismatches are not helped",
			nodes: []*corev1.Node{node("n1", "2", "4Gi"), node("n2", "2", "4Gi", nodeLabels("disk", "ssd"))},
			pods: []*corev1.Pod{
				pod("a", "2", "1Gi", on("n1"), prio(1)),
				pod("b", "2", "1Gi", on("n2"), prio(1)),
			},
			preemptor:   pod("p", "2", "1Gi", prio(100), nodeSelector("disk", "ssd")),
			wantNode:    "n2",
			wantVictims: []string{"b"},
		},
		{
			name:        "host port held by a lower-priority pod",
			nodes:       []*corev1.Node{node("n1", "4", "4Gi")},
			pods:        []*corev1.Pod{pod("a", "1", "1Gi", on("n1"), prio(1), hostPort(80, "", "")), pod("b", "1", "1Gi", on("n1"), prio(1))},
			preemptor:   pod("p", "1", "1Gi", prio(10), hostPort(80, "", "")),
			wantNode:    "n1",
			wantVictims: []string{"a"},
		},
		{
			name:        "pod count",
			nodes:       []*corev1.Node{node("n1", "4", "4Gi", alloc("pods", "1"))},
			pods:        []*corev1.Pod{pod("a", "1", "1Gi", on("n1"), prio(1))},
			preemptor:   pod("p", "1", "1Gi", prio(10)),
			wantNode:    "n1",
			wantVictims: []string{"a"},
		},
		{
			name:  "lowest sum of victim priorities",
			nodes: []*corev1.Node{node("n1", "2", "4Gi"), node("n2", "2", "4Gi")},
			pods: []*corev1.Pod{
				pod("a1", "1", "1Gi", on("n1"), prio(5)),
				pod("a2", "1", "1Gi", on("n1"), prio(5)),
				pod("b1", "1", "1Gi", on("n2"), prio(5)),
				pod("b2", "1", "1Gi", on("n2"), prio(1)),
			},
			preemptor:   pod("p", "2", "1Gi", prio(10)),
			wantNode:    "n2",
			wantVictims: []string{"b1", "b2"},
		},
		{
			name:  "latest start time among the highest-priority victims",
			nodes: []*corev1.Node{node("n1", "2", "4Gi"), node("n2", "2", "4Gi"), node("n3", "2", "4Gi")},
			pods: []*corev1.Pod{
				pod("old", "2", "1Gi", on("n1"), prio(1), startedAt(100)),
				pod("young", "2", "1Gi", on("n2"), prio(1), startedAt(300)),
				pod("middle", "2", "1Gi", on("n3"), prio(1), startedAt(200)),
			},
			preemptor:   pod("p", "2", "1Gi", prio(10)),
			wantNode:    "n2",
			wantVictims: []string{"young"},
		},
		{
			name:  "ties go to the first node in search order",
			nodes: []*corev1.Node{node("n1", "2", "4Gi"), node("n2", "2", "4Gi")},
			pods: []*corev1.Pod{
				pod("a", "2", "1Gi", on("n1"), prio(1), startedAt(100)),
				pod("b", "2", "1Gi", on("n2"), prio(1), startedAt(100)),
			},
			preemptor:   pod("p", "2", "1Gi", prio(10)),
			opts:        Options{Start: 1},
			wantNode:    "n2",
			wantVictims: []string{"b"},
		},
		{
			name:  "waits for victims terminating on its nominated node",
			nodes: []*corev1.Node{node("n1", "2", "4Gi"), node("n2", "2", "4Gi")},
			pods: []*corev1.Pod{
				pod("leaving", "2", "1Gi", on("n1"), prio(1), preemptedVictim()),
				pod("b", "2", "1Gi", on("n2"), prio(1)),
			},
			preemptor:   pod("p", "2", "1Gi", prio(10), nominatedTo("n1")),
			wantMessage: "preemption: not eligible due to a terminating pod on the nominated node.",
		},
		{
			name:  "a pod terminating for another reason does not stop preemption",
			nodes: []*corev1.Node{node("n1", "2", "4Gi")},
			pods: []*corev1.Pod{
				pod("leaving", "1", "1Gi", on("n1"), prio(1), func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }),
				pod("b", "1", "1Gi", on("n1"), prio(1)),
			},
			preemptor:   pod("p", "2", "1Gi", prio(10), nominatedTo("n1")),
			wantNode:    "n1",
			wantVictims: []string{"leaving", "b"},
		},
		{
			name:  "preempts again when the nominated node can no longer take it",
			nodes: []*corev1.Node{node("n1", "2", "4Gi", taints(cpTaint)), node("n2", "2", "4Gi")},
			pods: []*corev1.Pod{
				pod("leaving", "2", "1Gi", on("n1"), prio(1), preemptedVictim()),
				pod("b", "2", "1Gi", on("n2"), prio(1)),
			},
			preemptor:   pod("p", "2", "1Gi", prio(10), nominatedTo("n1")),
			wantNode:    "n2",
			wantVictims: []string{"b"},
		},
		{
			name:  "room reserved by a nominated pod of higher priority is not preempted into",
			nodes: []*corev1.Node{node("n1", "2", "4Gi"), node("n2", "2", "4Gi")},
			pods: []*corev1.Pod{
				pod("a", "1", "1Gi", on("n1"), prio(1)),
				pod("waiting", "1", "1Gi", prio(100), nominatedTo("n1")),
				pod("b", "2", "1Gi", on("n2"), prio(5)),
			},
			preemptor:   pod("p", "2", "1Gi", prio(10)),
			wantNode:    "n2",
			wantVictims: []string{"b"},
		},
		{
			name:  "lower-priority nominated pods on the chosen node are reported",
			nodes: []*corev1.Node{node("n1", "2", "4Gi")},
			pods: []*corev1.Pod{
				pod("a", "2", "1Gi", on("n1"), prio(1)),
				pod("lesser", "1", "1Gi", prio(5), nominatedTo("n1")),
				pod("greater", "0", "1Gi", prio(50), nominatedTo("n1")),
			},
			preemptor:    pod("p", "2", "1Gi", prio(10)),
			wantNode:     "n1",
			wantVictims:  []string{"a"},
			wantLowerNom: []string{"lesser"},
		},
		{
			name:  "volume node affinity conflicts are not helped",
			nodes: []*corev1.Node{node("n1", "2", "4Gi"), node("n2", "2", "4Gi")},
			pods: []*corev1.Pod{
				pod("a", "2", "1Gi", on("n1"), prio(1)),
				pod("b", "2", "1Gi", on("n2"), prio(5)),
			},
			preemptor: pod("p", "2", "1Gi", prio(10)),
			opts: Options{Volumes: &Volumes{NodeAffinity: []*corev1.NodeSelector{{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				labelTerm(expr(corev1.LabelHostname, corev1.NodeSelectorOpIn, "n2"))}}}}},
			wantNode:    "n2",
			wantVictims: []string{"b"},
		},
		{
			name:        "a pod rejected before filtering is not helped",
			nodes:       []*corev1.Node{node("n1", "2", "4Gi")},
			pods:        []*corev1.Pod{pod("a", "2", "1Gi", on("n1"), prio(1))},
			preemptor:   pod("p", "2", "1Gi", prio(10)),
			opts:        Options{Volumes: &Volumes{Unschedulable: `persistentvolumeclaim "data" not found`}},
			wantMessage: "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
			wantClear:   true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSnapshot(tt.nodes, nil)
			for _, p := range tt.pods {
				if p.Spec.NodeName != "" {
					s.AddPod(p)
				} else {
					s.AddNominatedPod(p)
				}
			}
			before := requestedByNode(s)
			res, ok := Preempt(s, tt.preemptor, tt.pdbs, tt.opts)
			if after := requestedByNode(s); !maps2Equal(before, after) {
				t.Fatalf("snapshot not restored: before %v after %v", before, after)
			}
			if ok != (tt.wantNode != "") || res.Node != tt.wantNode {
				t.Fatalf("Preempt = %q, %v (%s); want %q", res.Node, ok, res.Message, tt.wantNode)
			}
			if got := namesInOrder(res.Victims); !slices.Equal(got, tt.wantVictims) {
				t.Errorf("victims %v, want %v", got, tt.wantVictims)
			}
			if res.NumPDBViolations != tt.wantViolations {
				t.Errorf("PDB violations %d, want %d", res.NumPDBViolations, tt.wantViolations)
			}
			if got := namesInOrder(res.LowerNominated); !slices.Equal(got, tt.wantLowerNom) {
				t.Errorf("lower nominated %v, want %v", got, tt.wantLowerNom)
			}
			if tt.wantMessage != "" && res.Message != tt.wantMessage {
				t.Errorf("message %q\n want %q", res.Message, tt.wantMessage)
			}
			if res.ClearNominatedNode != tt.wantClear {
				t.Errorf("ClearNominatedNode %v, want %v", res.ClearNominatedNode, tt.wantClear)
			}
		})
	}
}

// namesInOrder is podNames without sorting, for lists whose order matters.
func namesInOrder(ps []*corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func requestedByNode(s *Snapshot) map[string]Resources {
	out := map[string]Resources{}
	for _, n := range s.Nodes() {
		out[n.name] = n.Requested
	}
	return out
}

func maps2Equal(a, b map[string]Resources) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The victims a preemption frees must then let the preemptor schedule, and Schedule must keep
// the freed room for it while it is nominated.
func TestNominatedPodsHoldTheirRoom(t *testing.T) {
	s := NewSnapshot([]*corev1.Node{node("n1", "2", "4Gi")}, nil)
	victim := pod("victim", "2", "1Gi", on("n1"), prio(1))
	s.AddPod(victim)
	high := pod("high", "2", "1Gi", prio(100))
	fe := fitError(t, s, high)
	res, ok := Preempt(s, high, nil, Options{})
	if !ok || res.Node != "n1" {
		t.Fatalf("Preempt: %+v", res)
	}
	fe.PostFilterMsg = res.Message
	if want := "0/1 nodes are available: 1 Insufficient cpu. preemption: found a potential placement for pod on node n1, preempting 1 victims"; fe.Error() != want {
		t.Errorf("FitError %q\n want %q", fe.Error(), want)
	}
	nominated := high.DeepCopy()
	nominated.Status.NominatedNodeName = "n1"
	s.AddNominatedPod(nominated)
	s.RemovePod(victim) // the victim is gone

	// A less important pod may not take the room...
	if fe := fitError(t, s, pod("low", "1", "1Gi", prio(50))); fe.Reasons[ReasonInsufficientCPU] != 1 {
		t.Errorf("low-priority pod: %v", fe)
	}
	// ... nor a pod without priority, but one at least as important may.
	fitError(t, s, pod("none", "1", "1Gi"))
	if res := scheduleOne(t, s, pod("equal-small", "0", "1Gi", prio(100)), Options{}); res.Node != "n1" {
		t.Errorf("zero-cpu pod of equal priority: %q", res.Node)
	}
	scheduleOne(t, s, pod("higher", "1", "1Gi", prio(200)), Options{})
	// The preemptor itself does not count against itself.
	if res := scheduleOne(t, s, nominated, Options{}); res.Node != "n1" {
		t.Errorf("preemptor: %q", res.Node)
	}
	// Once bound it is no longer nominated.
	bound := nominated.DeepCopy()
	bound.Spec.NodeName = "n1"
	s.AddNominatedPod(bound)
	if len(s.Node("n1").NominatedPods()) != 0 {
		t.Error("bound pod still nominated")
	}
}

func TestNominatedPodMoves(t *testing.T) {
	s := NewSnapshot([]*corev1.Node{node("n1", "2", "4Gi"), node("n2", "2", "4Gi")}, nil)
	p := pod("p", "1", "1Gi", prio(10), nominatedTo("n1"))
	s.AddNominatedPod(p)
	p2 := p.DeepCopy()
	p2.Status.NominatedNodeName = "n2"
	s.AddNominatedPod(p2)
	if len(s.Node("n1").NominatedPods()) != 0 || len(s.Node("n2").NominatedPods()) != 1 {
		t.Fatal("nomination did not move")
	}
	// Nominated to a node the snapshot does not know: kept until the node appears.
	p3 := p.DeepCopy()
	p3.Status.NominatedNodeName = "n3"
	s.AddNominatedPod(p3)
	s.SetNode(node("n3", "2", "4Gi"))
	if len(s.Node("n3").NominatedPods()) != 1 {
		t.Fatal("nomination to an unknown node lost")
	}
	s.RemoveNominatedPod(p)
	if len(s.Node("n3").NominatedPods()) != 0 || len(s.nominatedOn) != 0 {
		t.Fatal("RemoveNominatedPod left state behind")
	}
	s.RemoveNode("n3")
	if _, ok := s.infos["n3"]; ok {
		t.Fatal("placeholder kept")
	}
}

func TestVolumesFilter(t *testing.T) {
	nodes := []*corev1.Node{node("n1", "2", "4Gi", nodeLabels("zone", "a")), node("n2", "2", "4Gi", nodeLabels("zone", "b"))}
	zoneB := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{labelTerm(expr("zone", corev1.NodeSelectorOpIn, "b"))}}
	zoneA := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{labelTerm(expr("zone", corev1.NodeSelectorOpIn, "a"))}}
	tests := []struct {
		name     string
		vols     *Volumes
		wantNode string
		wantErr  string
	}{
		{name: "no constraint", vols: &Volumes{}, wantNode: "n1"},
		{name: "bound PV pins the zone", vols: &Volumes{NodeAffinity: []*corev1.NodeSelector{zoneB}}, wantNode: "n2"},
		{name: "two PVs in different zones", vols: &Volumes{NodeAffinity: []*corev1.NodeSelector{zoneA, zoneB}},
			wantErr: "0/2 nodes are available: 2 node(s) didn't match PersistentVolume's node affinity."},
		{name: "PV with no terms matches nothing", vols: &Volumes{NodeAffinity: []*corev1.NodeSelector{{}}},
			wantErr: "0/2 nodes are available: 2 node(s) didn't match PersistentVolume's node affinity."},
		{name: "missing PV", vols: &Volumes{MissingPV: true},
			wantErr: "0/2 nodes are available: 2 node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)."},
		{name: "selected node", vols: &Volumes{SelectedNodes: []string{"n2"}}, wantNode: "n2"},
		{name: "selected node outside the PV's zone", vols: &Volumes{SelectedNodes: []string{"n1"}, NodeAffinity: []*corev1.NodeSelector{zoneB}},
			wantErr: "0/2 nodes are available: 1 node(s) didn't find available persistent volumes to bind, 1 node(s) didn't match PersistentVolume's node affinity."},
		{name: "rejected before filtering", vols: &Volumes{Unschedulable: "pod has unbound immediate PersistentVolumeClaims"},
			wantErr: "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSnapshot(nodes, nil)
			res, err := Schedule(s, pod("p", "1", "1Gi"), Options{Volumes: tt.vols})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err %v\n want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || res.Node != tt.wantNode {
				t.Fatalf("Schedule = %q, %v; want %q", res.Node, err, tt.wantNode)
			}
		})
	}
}

func TestPreemptEmpty(t *testing.T) {
	if _, ok := Preempt(NewSnapshot(nil, nil), pod("p", "1", "1Gi", prio(1)), nil, Options{}); ok {
		t.Fatal("preempted in an empty cluster")
	}
}
