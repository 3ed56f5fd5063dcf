package core

import (
	"errors"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func podNames(ps []*corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

func TestNodeInfoAddRemoveIdempotent(t *testing.T) {
	n := NewNodeInfo(node("n", "4", "8Gi"))
	if n.Allocatable != (Resources{MilliCPU: 4000, Memory: 8 << 30, EphemeralStorage: 100 << 30, Pods: 110}) {
		t.Fatalf("allocatable %+v", n.Allocatable)
	}
	a := pod("a", "500m", "1Gi", ownedBy("rs"), hostPort(80, "", ""))
	n.AddPod(a)
	n.AddPod(a)
	want := Resources{MilliCPU: 500, Memory: 1 << 30, Pods: 1}
	if n.Requested != want || len(n.Pods()) != 1 || n.owners["rs"] != 1 {
		t.Fatalf("after double add: requested %+v, pods %d, owners %v", n.Requested, len(n.Pods()), n.owners)
	}

	// Re-adding an updated version replaces the old one.
	a2 := pod("a", "1", "2Gi", ownedBy("rs"))
	n.AddPod(a2)
	if want := (Resources{MilliCPU: 1000, Memory: 2 << 30, Pods: 1}); n.Requested != want {
		t.Fatalf("after update: requested %+v, want %+v", n.Requested, want)
	}
	if n.portConflict(hostPorts(pod("x", "", "", hostPort(80, "", "")))) {
		t.Fatalf("port of the replaced version still held")
	}
	if n.Pods()[0] != a2 {
		t.Fatalf("Pods() holds the stale object")
	}

	b := pod("b", "250m", "", ownedBy("rs"))
	b.UID = ""
	n.AddPod(b)
	n.AddPod(pod("b", "250m", "", ownedBy("rs"), func(p *corev1.Pod) { p.UID = "" }))
	if n.Requested.Pods != 2 || n.Requested.MilliCPU != 1250 || n.owners["rs"] != 2 {
		t.Fatalf("pods without UID are keyed by namespace/name: requested %+v owners %v", n.Requested, n.owners)
	}
	// Scoring defaults: b named no memory, so it counts 200Mi for scoring but 0 for fit.
	if n.non0Mem != 2<<30+defaultMemoryRequest || n.Requested.Memory != 2<<30 {
		t.Fatalf("non-zero memory %d, requested %d", n.non0Mem, n.Requested.Memory)
	}
	if got := podNames(n.Pods()); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("pods %v", got)
	}

	n.RemovePod(a2)
	n.RemovePod(a2)
	n.RemovePod(pod("never-added", "1", "1Gi"))
	if want := (Resources{MilliCPU: 250, Pods: 1}); n.Requested != want || n.owners["rs"] != 1 {
		t.Fatalf("after removals: requested %+v owners %v", n.Requested, n.owners)
	}
	n.RemovePod(b)
	if n.Requested != (Resources{}) || n.non0CPU != 0 || n.non0Mem != 0 || len(n.owners) != 0 || len(n.Pods()) != 0 {
		t.Fatalf("not empty: %+v non0 %d/%d owners %v", n.Requested, n.non0CPU, n.non0Mem, n.owners)
	}
}

func TestNodeInfoPortsAreRefCounted(t *testing.T) {
	n := NewNodeInfo(node("n", "4", "8Gi"))
	// Two pods may share a port when placed by nodeName; freeing one keeps the port taken.
	a := pod("a", "", "", hostPort(80, "", ""))
	b := pod("b", "", "", hostPort(80, corev1.ProtocolTCP, "0.0.0.0"))
	n.AddPod(a)
	n.AddPod(b)
	want := hostPorts(pod("x", "", "", hostPort(80, "", "10.1.1.1")))
	n.RemovePod(a)
	if !n.portConflict(want) {
		t.Fatalf("port freed while b still holds it")
	}
	n.RemovePod(b)
	if n.portConflict(want) {
		t.Fatalf("port still held after both pods left")
	}
}

func TestNodeInfoDefaults(t *testing.T) {
	nd := node("n", "2", "4Gi")
	delete(nd.Status.Allocatable, corev1.ResourcePods)
	nd.Status.Allocatable["example.com/dongle"] = rl("x", "3")["x"]
	nd.Status.Allocatable["requests.example.com/bad"] = rl("x", "3")["x"] // not a resource name a node can offer
	n := NewNodeInfo(nd)
	if n.Allocatable.Pods != 110 {
		t.Fatalf("default pods %d, want 110", n.Allocatable.Pods)
	}
	if n.allocScalar["example.com/dongle"] != 3 || len(n.allocScalar) != 1 {
		t.Fatalf("scalar allocatable %v", n.allocScalar)
	}
	if NewNodeInfo(nil).Node != nil {
		t.Fatalf("nil node")
	}
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	container := func(name, cpu, mem string) corev1.Container {
		c := corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}
		if cpu != "" {
			c.Resources.Requests[corev1.ResourceCPU] = rl("x", cpu)["x"]
		}
		if mem != "" {
			c.Resources.Requests[corev1.ResourceMemory] = rl("x", mem)["x"]
		}
		return c
	}
	sidecar := func(name, cpu, mem string) corev1.Container {
		c := container(name, cpu, mem)
		c.RestartPolicy = &always
		return c
	}
	spec := func(init []corev1.Container, containers ...corev1.Container) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{InitContainers: init, Containers: containers}}
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want Resources
	}{
		{"containers add up", spec(nil, container("a", "100m", "1Gi"), container("b", "200m", "1Gi")),
			Resources{MilliCPU: 300, Memory: 2 << 30, Pods: 1}},
		{"nothing requested", spec(nil, container("a", "", "")), Resources{Pods: 1}},
		{"init container raises the floor", spec([]corev1.Container{container("i", "2", "100Mi")}, container("a", "100m", "1Gi")),
			Resources{MilliCPU: 2000, Memory: 1 << 30, Pods: 1}},
		{"init containers run one at a time", spec([]corev1.Container{container("i1", "1", ""), container("i2", "3", "")}, container("a", "500m", "")),
			Resources{MilliCPU: 3000, Pods: 1}},
		{"sidecars add to the app containers", spec([]corev1.Container{sidecar("s", "200m", "64Mi")}, container("a", "100m", "1Gi")),
			Resources{MilliCPU: 300, Memory: 1<<30 + 64<<20, Pods: 1}},
		{"init after a sidecar runs beside it", spec([]corev1.Container{sidecar("s", "1", ""), container("i", "2", "")}, container("a", "500m", "")),
			Resources{MilliCPU: 3000, Pods: 1}},
		{"init before a sidecar runs alone", spec([]corev1.Container{container("i", "2", ""), sidecar("s", "1", "")}, container("a", "500m", "")),
			Resources{MilliCPU: 2000, Pods: 1}},
	}
	withOverhead := spec(nil, container("a", "100m", "1Gi"))
	withOverhead.Spec.Overhead = rl("cpu", "250m", "memory", "64Mi")
	tests = append(tests, struct {
		name string
		pod  *corev1.Pod
		want Resources
	}{"overhead is added", withOverhead, Resources{MilliCPU: 350, Memory: 1<<30 + 64<<20, Pods: 1}})

	podLevel := spec(nil, container("a", "100m", "1Gi"), container("b", "100m", ""))
	podLevel.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "1")}
	tests = append(tests, struct {
		name string
		pod  *corev1.Pod
		want Resources
	}{"pod-level requests override what they name", podLevel, Resources{MilliCPU: 1000, Memory: 1 << 30, Pods: 1}})

	resizing := spec(nil, container("a", "500m", "1Gi"))
	resizing.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a",
		Resources:          &corev1.ResourceRequirements{Requests: rl("cpu", "2", "memory", "512Mi")},
		AllocatedResources: rl("cpu", "2", "memory", "512Mi")}}
	tests = append(tests, struct {
		name string
		pod  *corev1.Pod
		want Resources
	}{"in-flight resize counts at the larger size", resizing, Resources{MilliCPU: 2000, Memory: 1 << 30, Pods: 1}})

	infeasible := resizing.DeepCopy()
	infeasible.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Reason: corev1.PodReasonInfeasible}}
	tests = append(tests, struct {
		name string
		pod  *corev1.Pod
		want Resources
	}{"infeasible resize keeps the running size", infeasible, Resources{MilliCPU: 2000, Memory: 512 << 20, Pods: 1}})

	eph := spec(nil, container("a", "", ""))
	eph.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage] = rl("x", "1Gi")["x"]
	tests = append(tests, struct {
		name string
		pod  *corev1.Pod
		want Resources
	}{"ephemeral storage", eph, Resources{EphemeralStorage: 1 << 30, Pods: 1}})

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodRequests(tc.pod); got != tc.want {
				t.Fatalf("PodRequests = %+v, want %+v", got, tc.want)
			}
		})
	}

	// Scoring defaults apply per container that names nothing, init containers included.
	d := demandOf(spec([]corev1.Container{container("i", "", "")}, container("a", "", ""), container("b", "1", "")))
	if d.non0CPU != 1100 || d.non0Mem != 2*defaultMemoryRequest || d.req.MilliCPU != 1000 || d.req.Memory != 0 {
		t.Fatalf("demand %+v", d)
	}
	// With pod-level requests the defaults only fill a resource nobody names.
	d = demandOf(podLevel)
	if d.non0CPU != 1000 || d.non0Mem != 1<<30 {
		t.Fatalf("pod-level demand %+v", d)
	}
}

func TestSnapshot(t *testing.T) {
	pods := []*corev1.Pod{
		pod("run", "1", "1Gi", on("a")),
		pod("done", "1", "1Gi", on("a"), phase(corev1.PodSucceeded)),
		pod("failed", "1", "1Gi", on("a"), phase(corev1.PodFailed)),
		pod("pending", "1", "1Gi"),
		pod("early", "2", "1Gi", on("later")),
	}
	s := NewSnapshot([]*corev1.Node{node("a", "4", "8Gi"), node("b", "4", "8Gi")}, pods)
	if s.NumNodes() != 2 || len(s.Nodes()) != 2 {
		t.Fatalf("nodes %d", s.NumNodes())
	}
	if got := podNames(s.Node("a").Pods()); !slices.Equal(got, []string{"run"}) {
		t.Fatalf("pods on a: %v (terminal and unbound pods must be skipped)", got)
	}
	if s.Node("later") != nil || s.Node("missing") != nil {
		t.Fatalf("unknown node visible")
	}

	// A pod bound to a node that registers later is accounted once it appears.
	s.SetNode(node("later", "4", "8Gi"))
	if n := s.Node("later"); n == nil || n.Requested.MilliCPU != 2000 || s.NumNodes() != 3 {
		t.Fatalf("later: %+v", n)
	}

	// Updating a node keeps its pods and refreshes what the node offers.
	s.SetNode(node("a", "8", "8Gi", cordoned()))
	a := s.Node("a")
	if a.Allocatable.MilliCPU != 8000 || a.Requested.MilliCPU != 1000 || !a.unschedulable || s.NumNodes() != 3 {
		t.Fatalf("updated a: alloc %+v requested %+v", a.Allocatable, a.Requested)
	}

	// A pod turning terminal is released.
	run := pod("run", "1", "1Gi", on("a"), phase(corev1.PodSucceeded))
	s.AddPod(run)
	if a.Requested.Pods != 0 {
		t.Fatalf("terminal pod still counted: %+v", a.Requested)
	}
	s.AddPod(pod("x", "1", "1Gi"))         // unbound: ignored
	s.RemovePod(pod("y", "1", "1Gi"))      // unbound: ignored
	s.RemovePod(pod("z", "", "", on("q"))) // unknown node: ignored

	// Removing a node with pods keeps them for its return.
	s.AddPod(pod("keep", "500m", "", on("b")))
	s.RemoveNode("b")
	s.RemoveNode("b")
	if s.Node("b") != nil || s.NumNodes() != 2 || len(s.Nodes()) != 2 {
		t.Fatalf("b still visible")
	}
	s.SetNode(node("b", "4", "8Gi"))
	if b := s.Node("b"); b == nil || b.Requested.MilliCPU != 500 {
		t.Fatalf("b came back without its pod: %+v", b)
	}
	s.RemovePod(pod("keep", "500m", "", on("b")))
	s.RemoveNode("b")
	if _, ok := s.infos["b"]; ok {
		t.Fatalf("empty placeholder kept for b")
	}
	s.AddPod(pod("orphan", "", "", on("ghost")))
	s.RemovePod(pod("orphan", "", "", on("ghost")))
	if _, ok := s.infos["ghost"]; ok {
		t.Fatalf("empty placeholder kept for ghost")
	}
}

// The node order interleaves zones like upstream's node tree, so a partial search covers them.
func TestSnapshotZoneOrder(t *testing.T) {
	zone := func(z string) nodeOpt { return nodeLabels(corev1.LabelTopologyZone, z) }
	s := NewSnapshot([]*corev1.Node{
		node("a1", "1", "1Gi", zone("a")),
		node("a2", "1", "1Gi", zone("a")),
		node("a3", "1", "1Gi", zone("a")),
		node("b1", "1", "1Gi", zone("b")),
		node("none", "1", "1Gi"),
		node("c1", "1", "1Gi", zone("c")),
		node("b2", "1", "1Gi", zone("b")),
	}, nil)
	order := func() []string {
		var out []string
		for i, n := range s.Nodes() {
			if n.pos != i {
				t.Fatalf("%s at %d records pos %d", n.name, i, n.pos)
			}
			out = append(out, n.name)
		}
		return out
	}
	if got, want := order(), []string{"a1", "b1", "none", "c1", "a2", "b2", "a3"}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	s.RemoveNode("c1")
	s.SetNode(node("a1", "1", "1Gi", zone("b")))
	if got, want := order(), []string{"a2", "b1", "none", "a3", "b2", "a1"}; !slices.Equal(got, want) {
		t.Fatalf("order after changes %v, want %v", got, want)
	}
	// Region is part of the key: same zone name in two regions are two zones.
	s = NewSnapshot([]*corev1.Node{
		node("x1", "1", "1Gi", zone("z"), nodeLabels(corev1.LabelTopologyRegion, "r1")),
		node("x2", "1", "1Gi", zone("z"), nodeLabels(corev1.LabelTopologyRegion, "r1")),
		node("y1", "1", "1Gi", zone("z"), nodeLabels(corev1.LabelTopologyRegion, "r2")),
	}, nil)
	if got, want := order(), []string{"x1", "y1", "x2"}; !slices.Equal(got, want) {
		t.Fatalf("region order %v, want %v", got, want)
	}
}

func TestControllerOwner(t *testing.T) {
	p := pod("p", "", "")
	if controllerOwner(p) != "" {
		t.Fatalf("bare pod has an owner")
	}
	no := false
	p.OwnerReferences = append(p.OwnerReferences, metav1OwnerRef("other", &no))
	ownedBy("rs")(p)
	if got := controllerOwner(p); got != types.UID("rs") {
		t.Fatalf("owner %q, want rs (the controller reference)", got)
	}
}

func TestScalarResources(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	gpu := func(name, n string) corev1.Container {
		return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: rl("nvidia.com/gpu", n, "hugepages-2Mi", "2Mi")}}
	}
	p := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{gpu("init", "3")},
		Containers:     []corev1.Container{gpu("a", "1"), gpu("b", "1")},
	}}
	d := demandOf(p)
	want := map[corev1.ResourceName]int64{"nvidia.com/gpu": 3, "hugepages-2Mi": 4 << 20}
	if got := scalarMap(d.scalar); !maps.Equal(got, want) {
		t.Fatalf("scalar demand %v, want %v", got, want)
	}

	// A sidecar's extended resources add to the app containers'; pod-level hugepages override.
	side := gpu("side", "2")
	side.RestartPolicy = &always
	p.Spec.InitContainers = append(p.Spec.InitContainers, side)
	p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("hugepages-2Mi", "10Mi")}
	d = demandOf(p)
	want = map[corev1.ResourceName]int64{"nvidia.com/gpu": 4, "hugepages-2Mi": 10 << 20}
	if got := scalarMap(d.scalar); !maps.Equal(got, want) {
		t.Fatalf("scalar demand with sidecar %v, want %v", got, want)
	}

	// Resized running containers count their larger scalar too.
	p = &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{gpu("a", "1")}}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a", Resources: &corev1.ResourceRequirements{Requests: rl("nvidia.com/gpu", "2")}}}
	if got := scalarMap(demandOf(p).scalar); got["nvidia.com/gpu"] != 2 {
		t.Fatalf("resized scalar %v", got)
	}

	// Zero scalar requests do not count and never fail a node.
	p = &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{gpu("a", "0")}}}
	if got := scalarMap(demandOf(p).scalar); got["nvidia.com/gpu"] != 0 || len(got) != 1 {
		t.Fatalf("zero scalar kept: %v", got)
	}
	s := NewSnapshot([]*corev1.Node{node("n", "1", "1Gi", alloc("hugepages-2Mi", "2Mi"))}, nil)
	scheduleOne(t, s, p, Options{})

	n := NewNodeInfo(node("n", "1", "1Gi", alloc("nvidia.com/gpu", "4")))
	gp := pod("g", "", "", func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = rl("x", "3")["x"] })
	n.AddPod(gp)
	if n.reqScalar["nvidia.com/gpu"] != 3 {
		t.Fatalf("requested scalar %v", n.reqScalar)
	}
	n.RemovePod(gp)
	if len(n.reqScalar) != 0 {
		t.Fatalf("requested scalar after removal %v", n.reqScalar)
	}
}

func scalarMap(s []scalarQty) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	for _, q := range s {
		out[q.name] = q.value
	}
	return out
}

func TestIsScalarResource(t *testing.T) {
	for name, want := range map[corev1.ResourceName]bool{
		"nvidia.com/gpu":                   true,
		"example.com/dongle":               true,
		"hugepages-1Gi":                    true,
		"attachable-volumes-aws-ebs":       true,
		"kubernetes.io/something":          true,
		"cpu":                              false,
		"pods":                             false,
		"requests.example.com/x":           false,
		"example.com/not a qualified name": false,
	} {
		if got := isScalarResource(name); got != want {
			t.Errorf("isScalarResource(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestParseNodeTermRejects(t *testing.T) {
	for name, term := range map[string]corev1.NodeSelectorTerm{
		"unknown operator":      labelTerm(expr("a", "Like", "b")),
		"In without values":     labelTerm(expr("a", corev1.NodeSelectorOpIn)),
		"Exists with values":    labelTerm(expr("a", corev1.NodeSelectorOpExists, "b")),
		"invalid label key":     labelTerm(expr("not a key", corev1.NodeSelectorOpExists)),
		"field other than name": fieldTerm(expr("metadata.uid", corev1.NodeSelectorOpIn, "x")),
		"field with two values": fieldTerm(expr("metadata.name", corev1.NodeSelectorOpIn, "x", "y")),
		"field with Exists":     fieldTerm(expr("metadata.name", corev1.NodeSelectorOpExists)),
		"field with Gt":         fieldTerm(expr("metadata.name", corev1.NodeSelectorOpGt, "1")),
		"empty term":            {},
		"label value too long (>63)": labelTerm(expr("a", corev1.NodeSelectorOpIn,
			"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")),
	} {
		if _, ok := parseNodeTerm(&term); ok {
			t.Errorf("%s: parsed, want rejected", name)
		}
	}
}

func TestEdgeCases(t *testing.T) {
	var s Snapshot // the zero value works
	if _, err := Schedule(&s, pod("p", "", ""), Options{}); !errors.Is(err, ErrNoNodesAvailable) {
		t.Fatalf("empty zero snapshot: %v", err)
	}
	s.AddPod(pod("early", "1", "", on("n")))
	s.SetNode(node("n", "2", "1Gi"))
	if res := scheduleOne(t, &s, pod("p", "1", ""), Options{}); res.Node != "n" {
		t.Fatalf("result %+v", res)
	}
	if _, err := Schedule(&s, nil, Options{}); err == nil {
		t.Fatalf("nil pod scheduled")
	}
	if _, err := Schedule(nil, pod("p", "", ""), Options{}); !errors.Is(err, ErrNoNodesAvailable) {
		t.Fatalf("nil snapshot: %v", err)
	}
	// Overcommitted nodes (possible through nodeName) score zero rather than negative.
	if leastRequested(5, 4) != 0 || leastRequested(1, 0) != 0 || leastRequested(1, 4) != 75 {
		t.Fatalf("leastRequested")
	}
	// A node without cpu/memory allocatable scores zero on resources and stays balanced.
	empty := NewNodeInfo(&corev1.Node{})
	q := s.newPodQuery(pod("p", "1", "1Gi"))
	if leastAllocated(&q, empty) != 0 || balancedAllocation(&q, empty) != 100 {
		t.Fatalf("empty node scores")
	}
}
