package daemonset

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

type fixture struct {
	factory informers.SharedInformerFactory
	c       *Controller
	client  *fake.Clientset
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewSimpleClientset(objs...)
	n := 0
	client.PrependReactor("create", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
		p := a.(ktesting.CreateAction).GetObject().(*corev1.Pod)
		if p.Name == "" {
			n++
			p.Name = fmt.Sprintf("%s%d", p.GenerateName, n)
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory.Apps().V1().DaemonSets(), factory.Core().V1().Nodes(), factory.Core().V1().Pods(), factory.Apps().V1().ControllerRevisions(),
		record.NewFakeRecorder(100), slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.DaemonSet:
			_ = factory.Apps().V1().DaemonSets().Informer().GetIndexer().Add(o)
		case *corev1.Node:
			_ = factory.Core().V1().Nodes().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			_ = factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
		case *appsv1.ControllerRevision:
			_ = factory.Apps().V1().ControllerRevisions().Informer().GetIndexer().Add(o)
		}
	}
	return &fixture{c: c, client: client, factory: factory}
}

func (f *fixture) sync(t *testing.T) {
	t.Helper()
	if err := f.c.sync(context.Background(), "kube-system/agent"); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) actions(verb, resource string) []ktesting.Action {
	var out []ktesting.Action
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			out = append(out, a)
		}
	}
	return out
}

func (f *fixture) deleted() []string {
	var out []string
	for _, a := range f.actions("delete", "pods") {
		out = append(out, a.(ktesting.DeleteAction).GetName())
	}
	sort.Strings(out)
	return out
}

func (f *fixture) status(t *testing.T) appsv1.DaemonSetStatus {
	t.Helper()
	upd := f.actions("update", "daemonsets")
	if len(upd) != 1 || upd[0].GetSubresource() != "status" {
		t.Fatalf("daemonset updates %v, want one status update", upd)
	}
	return upd[0].(ktesting.UpdateAction).GetObject().(*appsv1.DaemonSet).Status
}

func newDS() *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system", UID: "agent-uid", Generation: 4},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "agent:1"}}},
			},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1))}},
		},
	}
}

func node(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

var longAgo = metav1.NewTime(time.Now().Add(-time.Hour))

type podOpt func(*corev1.Pod)

// dsPod is a running, ready pod of ds on nodeName with the given template hash.
func dsPod(ds *appsv1.DaemonSet, name, nodeName, hash string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ds.Namespace, UID: types.UID(name), CreationTimestamp: longAgo,
			Labels:          map[string]string{"app": "agent", HashLabel: hash},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))}},
		Spec: corev1.PodSpec{NodeName: nodeName},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: longAgo}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func notReady(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }

func TestShouldRun(t *testing.T) {
	term := func(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: reqs}
	}
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	affinity := func(terms ...corev1.NodeSelectorTerm) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
		}
	}
	taint := func(key string, effect corev1.TaintEffect) corev1.Taint {
		return corev1.Taint{Key: key, Value: "v", Effect: effect}
	}
	worker := map[string]string{"role": "worker", "zone": "a", "cpus": "8"}
	for _, tc := range []struct {
		name string
		spec func(*corev1.PodSpec)
		node *corev1.Node
		want bool
	}{
		{"plain node", nil, node("n", nil), true},
		{"nodeSelector matches", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"role": "worker"} }, node("n", worker), true},
		{"nodeSelector does not match", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"role": "master"} }, node("n", worker), false},
		{"nodeSelector label missing", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"gpu": "yes"} }, node("n", worker), false},
		{"affinity In matches", affinity(term(req("zone", corev1.NodeSelectorOpIn, "a", "b"))), node("n", worker), true},
		{"affinity In does not match", affinity(term(req("zone", corev1.NodeSelectorOpIn, "b"))), node("n", worker), false},
		{"affinity terms are ORed", affinity(term(req("zone", corev1.NodeSelectorOpIn, "b")), term(req("role", corev1.NodeSelectorOpExists))), node("n", worker), true},
		{"affinity expressions are ANDed", affinity(term(req("zone", corev1.NodeSelectorOpIn, "a"), req("role", corev1.NodeSelectorOpDoesNotExist))), node("n", worker), false},
		{"affinity NotIn", affinity(term(req("zone", corev1.NodeSelectorOpNotIn, "a"))), node("n", worker), false},
		{"affinity Gt", affinity(term(req("cpus", corev1.NodeSelectorOpGt, "4"))), node("n", worker), true},
		{"affinity Lt", affinity(term(req("cpus", corev1.NodeSelectorOpLt, "4"))), node("n", worker), false},
		{"affinity matchFields name", affinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "n")}}), node("n", nil), true},
		{"affinity matchFields other name", affinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "m")}}), node("n", nil), false},
		{"affinity matchFields NotIn", affinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpNotIn, "n")}}), node("n", nil), false},
		{"affinity empty term matches nothing", affinity(corev1.NodeSelectorTerm{}), node("n", worker), false},
		{"NoSchedule taint", nil, node("n", nil, taint("dedicated", corev1.TaintEffectNoSchedule)), false},
		{"NoExecute taint", nil, node("n", nil, taint("dedicated", corev1.TaintEffectNoExecute)), false},
		{"PreferNoSchedule taint ignored", nil, node("n", nil, taint("dedicated", corev1.TaintEffectPreferNoSchedule)), true},
		{"tolerated taint", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "v", Effect: corev1.TaintEffectNoSchedule}}
		}, node("n", nil, taint("dedicated", corev1.TaintEffectNoSchedule)), true},
		{"toleration of another value", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "other", Effect: corev1.TaintEffectNoSchedule}}
		}, node("n", nil, taint("dedicated", corev1.TaintEffectNoSchedule)), false},
		{"tolerate everything", func(s *corev1.PodSpec) { s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} },
			node("n", nil, taint("dedicated", corev1.TaintEffectNoExecute), taint("x", corev1.TaintEffectNoSchedule)), true},
		{"not-ready NoExecute tolerated by default", nil, node("n", nil, taint(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)), true},
		{"unreachable NoExecute tolerated by default", nil, node("n", nil, taint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)), true},
		{"unreachable NoSchedule not tolerated", nil, node("n", nil, taint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule)), false},
		{"disk pressure tolerated by default", nil, node("n", nil, taint(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule)), true},
		{"memory pressure tolerated by default", nil, node("n", nil, taint(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule)), true},
		{"pid pressure tolerated by default", nil, node("n", nil, taint(corev1.TaintNodePIDPressure, corev1.TaintEffectNoSchedule)), true},
		{"unschedulable tolerated by default", nil, node("n", nil, taint(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)), true},
		{"network unavailable without hostNetwork", nil, node("n", nil, taint(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)), false},
		{"network unavailable with hostNetwork", func(s *corev1.PodSpec) { s.HostNetwork = true },
			node("n", nil, taint(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)), true},
		{"selector matches but taint not tolerated", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"role": "worker"} },
			node("n", worker, taint("dedicated", corev1.TaintEffectNoSchedule)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := newDS()
			if tc.spec != nil {
				tc.spec(&ds.Spec.Template.Spec)
			}
			if got := ShouldRun(ds, tc.node); got != tc.want {
				t.Fatalf("ShouldRun = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSyncCreatesOnePodPerEligibleNode(t *testing.T) {
	ds := newDS()
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"role": "worker"}
	ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "custom", Operator: corev1.TolerationOpExists}}
	worker := map[string]string{"role": "worker"}
	f := newFixture(t, ds,
		node("n1", worker),
		node("n2", worker, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}),
		node("n3", map[string]string{"role": "master"}),
		node("n4", worker, corev1.Taint{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}),
	)
	f.sync(t)
	hash := TemplateHash(ds)
	nodes := map[string]bool{}
	for _, a := range f.actions("create", "pods") {
		p := a.(ktesting.CreateAction).GetObject().(*corev1.Pod)
		n := podNode(p)
		if nodes[n] {
			t.Errorf("two pods for node %s", n)
		}
		nodes[n] = true
		if p.Spec.NodeName != "" {
			t.Errorf("pod bound to %s directly; the scheduler should bind it", p.Spec.NodeName)
		}
		terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if len(terms) != 1 || len(terms[0].MatchExpressions) != 0 || len(terms[0].MatchFields) != 1 ||
			terms[0].MatchFields[0].Key != "metadata.name" || terms[0].MatchFields[0].Operator != corev1.NodeSelectorOpIn ||
			len(terms[0].MatchFields[0].Values) != 1 || terms[0].MatchFields[0].Values[0] != n {
			t.Errorf("pod for %s pinned with %+v", n, terms)
		}
		if p.GenerateName != "agent-" || p.Namespace != "kube-system" {
			t.Errorf("generateName %q namespace %q", p.GenerateName, p.Namespace)
		}
		if p.Labels[HashLabel] != hash || p.Labels["app"] != "agent" {
			t.Errorf("labels %v, want app=agent and %s=%s", p.Labels, HashLabel, hash)
		}
		if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != ds.UID || ref.Kind != "DaemonSet" {
			t.Errorf("controller ref %+v", ref)
		}
		keys := map[string]bool{}
		for _, tol := range p.Spec.Tolerations {
			keys[tol.Key+":"+string(tol.Effect)] = true
		}
		for _, k := range []string{"custom:", corev1.TaintNodeNotReady + ":NoExecute", corev1.TaintNodeUnreachable + ":NoExecute",
			corev1.TaintNodeDiskPressure + ":NoSchedule", corev1.TaintNodeUnschedulable + ":NoSchedule"} {
			if !keys[k] {
				t.Errorf("toleration %s missing from %v", k, p.Spec.Tolerations)
			}
		}
	}
	if len(nodes) != 2 || !nodes["n1"] || !nodes["n2"] {
		t.Fatalf("pods created for %v, want n1 and n2", nodes)
	}
	if _, ok := ds.Spec.Template.Labels[HashLabel]; ok || ds.Spec.Template.Spec.Affinity != nil {
		t.Fatal("the DaemonSet's template was mutated")
	}
	st := f.status(t)
	if st.DesiredNumberScheduled != 2 || st.CurrentNumberScheduled != 0 || st.NumberUnavailable != 2 || st.ObservedGeneration != 4 {
		t.Fatalf("status %+v", st)
	}
}

func TestSyncPinnedUnscheduledPodCountsForItsNode(t *testing.T) {
	ds := newDS()
	pending := newPod(ds, "n1", TemplateHash(ds))
	pending.Name, pending.UID = "pending", "pending"
	pending.Status.Phase = corev1.PodPending
	f := newFixture(t, ds, node("n1", nil), pending)
	f.sync(t)
	if n := len(f.actions("create", "pods")); n != 0 {
		t.Fatalf("%d pods created although a pending pod is pinned to the node", n)
	}
	if d := f.deleted(); len(d) != 0 {
		t.Fatalf("deleted %v", d)
	}
}

// TestSyncWaitsForTerminatingPod: a node whose daemon pod is being deleted but still runs
// gets no new pod until the old one is gone; one whose deleted pod has already ended does.
func TestSyncWaitsForTerminatingPod(t *testing.T) {
	ds := newDS()
	now := metav1.Now()
	deleting := func(p *corev1.Pod) { p.DeletionTimestamp = &now }
	ended := func(p *corev1.Pod) { p.DeletionTimestamp = &now; p.Status.Phase = corev1.PodSucceeded }
	f := newFixture(t, ds, node("n1", nil), node("n2", nil),
		dsPod(ds, "old-n1", "n1", "old-hash", deleting), dsPod(ds, "old-n2", "n2", "old-hash", ended))
	f.sync(t)
	var created []string
	for _, a := range f.actions("create", "pods") {
		created = append(created, podNode(a.(ktesting.CreateAction).GetObject().(*corev1.Pod)))
	}
	if len(created) != 1 || created[0] != "n2" {
		t.Fatalf("pods created for %v, want only n2 (n1's old pod is still terminating)", created)
	}
	if d := f.deleted(); len(d) != 0 {
		t.Fatalf("deleted %v", d)
	}
	if st := f.status(t); st.NumberUnavailable != 2 || st.CurrentNumberScheduled != 0 {
		t.Fatalf("status %+v: both nodes are without a running daemon pod", st)
	}
}

func TestSyncDeletesMisscheduledAndDuplicatePods(t *testing.T) {
	ds := newDS()
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"role": "worker"}
	hash := TemplateHash(ds)
	newer := metav1.NewTime(longAgo.Add(time.Minute))
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: "kube-system", UID: "unrelated", Labels: map[string]string{"app": "agent"}},
		Spec: corev1.PodSpec{NodeName: "n2"}}
	f := newFixture(t, ds,
		node("n1", map[string]string{"role": "worker"}),
		node("n2", map[string]string{"role": "master"}),
		dsPod(ds, "keep", "n1", hash),
		dsPod(ds, "dup-not-ready", "n1", hash, notReady, func(p *corev1.Pod) { p.CreationTimestamp = newer }),
		dsPod(ds, "misscheduled", "n2", hash),
		dsPod(ds, "orphaned-node", "gone", hash),
		dsPod(ds, "finished", "n2", hash, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		other,
	)
	f.sync(t)
	if got := strings.Join(f.deleted(), ","); got != "dup-not-ready,misscheduled,orphaned-node" {
		t.Fatalf("deleted %s", got)
	}
	for _, a := range f.actions("delete", "pods") {
		d := a.(ktesting.DeleteAction)
		if pre := d.GetDeleteOptions().Preconditions; pre == nil || pre.UID == nil || string(*pre.UID) != d.GetName() {
			t.Errorf("delete of %s without UID precondition", d.GetName())
		}
	}
	if n := len(f.actions("create", "pods")); n != 0 {
		t.Fatalf("%d creations", n)
	}
	st := f.status(t)
	want := appsv1.DaemonSetStatus{ObservedGeneration: 4, DesiredNumberScheduled: 1, CurrentNumberScheduled: 1, NumberMisscheduled: 1,
		NumberReady: 1, NumberAvailable: 1, UpdatedNumberScheduled: 1}
	if fmt.Sprintf("%+v", st) != fmt.Sprintf("%+v", want) {
		t.Fatalf("status %+v, want %+v", st, want)
	}
}

func TestSyncRollingUpdateWithinMaxUnavailable(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4"}
	for _, tc := range []struct {
		name           string
		strategy       appsv1.DaemonSetUpdateStrategy
		notReady       string // node whose outdated pod is not ready
		missing        string // node without a pod
		updated        string // node already running the current template
		wantDeleted    int
		wantNotReadyGo bool
	}{
		{name: "maxUnavailable 1", strategy: newDS().Spec.UpdateStrategy, wantDeleted: 1},
		{name: "maxUnavailable 2", strategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(2))}}, wantDeleted: 2},
		{name: "maxUnavailable 50%", strategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromString("50%"))}}, wantDeleted: 2},
		{name: "maxUnavailable 0% still replaces one", strategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromString("0%"))}}, wantDeleted: 1},
		{name: "an unready outdated pod goes first and uses the budget", strategy: newDS().Spec.UpdateStrategy, notReady: "n3",
			wantDeleted: 1, wantNotReadyGo: true},
		{name: "a node without its pod uses the budget", strategy: newDS().Spec.UpdateStrategy, missing: "n2", wantDeleted: 0},
		{name: "updated pods are kept", strategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(4))}}, updated: "n1", wantDeleted: 3},
		{name: "OnDelete never replaces", strategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}, wantDeleted: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := newDS()
			ds.Spec.UpdateStrategy = tc.strategy
			hash := TemplateHash(ds)
			objs := []runtime.Object{ds}
			for _, n := range nodes {
				objs = append(objs, node(n, nil))
				if n == tc.missing {
					continue
				}
				h := "old-hash"
				if n == tc.updated {
					h = hash
				}
				var opts []podOpt
				if n == tc.notReady {
					opts = append(opts, notReady)
				}
				objs = append(objs, dsPod(ds, "pod-"+n, n, h, opts...))
			}
			f := newFixture(t, objs...)
			f.sync(t)
			deleted := f.deleted()
			if len(deleted) != tc.wantDeleted {
				t.Fatalf("deleted %v, want %d pods", deleted, tc.wantDeleted)
			}
			for _, d := range deleted {
				if tc.updated != "" && d == "pod-"+tc.updated {
					t.Fatalf("deleted the updated pod %s", d)
				}
			}
			if tc.wantNotReadyGo && deleted[0] != "pod-"+tc.notReady {
				t.Fatalf("deleted %v, want the unready pod", deleted)
			}
		})
	}
}

func TestSyncStatusCounts(t *testing.T) {
	ds := newDS()
	ds.Spec.MinReadySeconds = 600
	hash := TemplateHash(ds)
	recent := metav1.NewTime(time.Now())
	ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
	f := newFixture(t, ds, node("n1", nil), node("n2", nil), node("n3", nil), node("n4", nil),
		dsPod(ds, "available", "n1", hash),
		dsPod(ds, "ready-not-available", "n2", hash, func(p *corev1.Pod) { p.Status.Conditions[0].LastTransitionTime = recent }),
		dsPod(ds, "outdated-not-ready", "n3", "old", notReady),
	)
	f.sync(t)
	st := f.status(t)
	want := appsv1.DaemonSetStatus{ObservedGeneration: 4, DesiredNumberScheduled: 4, CurrentNumberScheduled: 3, NumberReady: 2,
		NumberAvailable: 1, UpdatedNumberScheduled: 2, NumberUnavailable: 3}
	if fmt.Sprintf("%+v", st) != fmt.Sprintf("%+v", want) {
		t.Fatalf("status %+v, want %+v", st, want)
	}
	if creates := f.actions("create", "pods"); len(creates) != 1 || podNode(creates[0].(ktesting.CreateAction).GetObject().(*corev1.Pod)) != "n4" {
		t.Fatalf("creations %v, want one for n4", creates)
	}
}

func TestSyncStatusUnchangedIsNotWritten(t *testing.T) {
	ds := newDS()
	hash := TemplateHash(ds)
	ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: 4, DesiredNumberScheduled: 1, CurrentNumberScheduled: 1, NumberReady: 1,
		NumberAvailable: 1, UpdatedNumberScheduled: 1}
	f := newFixture(t, ds, node("n1", nil), dsPod(ds, "p", "n1", hash), revision(t, ds, 1))
	f.sync(t)
	if acts := f.client.Actions(); len(acts) != 0 {
		t.Fatalf("steady state produced %v", acts)
	}
}

func TestSyncDeletingDaemonSetCreatesNothing(t *testing.T) {
	ds := newDS()
	ts := metav1.Now()
	ds.DeletionTimestamp = &ts
	f := newFixture(t, ds, node("n1", nil))
	f.sync(t)
	if n := len(f.actions("create", "pods")); n != 0 {
		t.Fatalf("%d pods created for a DaemonSet being deleted", n)
	}
}

func TestTemplateHashStable(t *testing.T) {
	a, b := newDS(), newDS()
	if TemplateHash(a) != TemplateHash(b) {
		t.Fatal("equal templates hash differently")
	}
	b.Spec.Template.Spec.Containers[0].Image = "agent:2"
	if TemplateHash(a) == TemplateHash(b) {
		t.Fatal("different templates hash the same")
	}
}

func TestSyncReplacesFailedPodWithBackoff(t *testing.T) {
	ds := newDS()
	hash := TemplateHash(ds)
	failed := dsPod(ds, "agent-failed", "n1", hash)
	failed.Status.Phase = corev1.PodFailed
	f := newFixture(t, ds, node("n1", nil), failed)
	f.sync(t)
	if got := f.deleted(); len(got) != 1 || got[0] != "agent-failed" {
		t.Fatalf("deleted %v, want the failed pod", got)
	}
	if n := len(f.actions("create", "pods")); n != 0 {
		t.Fatalf("created %d pods in the same sync as deleting the failed one, want 0 (backoff)", n)
	}
	// The failed pod is still in the cache (its deletion not observed yet): a second sync
	// within the backoff neither deletes again nor creates.
	f.client.ClearActions()
	f.sync(t)
	if n := len(f.actions("delete", "pods")) + len(f.actions("create", "pods")); n != 0 {
		t.Fatalf("%d pod actions within the backoff, want 0", n)
	}
	// Once the failed pod is gone, the node gets a fresh pod.
	_ = f.factory.Core().V1().Pods().Informer().GetIndexer().Delete(failed)
	f.client.ClearActions()
	f.sync(t)
	if n := len(f.actions("create", "pods")); n != 1 {
		t.Fatalf("created %d pods after the failed one left, want 1", n)
	}
}

// revision is the ControllerRevision of ds's current template, numbered n.
func revision(t *testing.T, ds *appsv1.DaemonSet, n int64) *appsv1.ControllerRevision {
	t.Helper()
	patch, err := Patch(ds)
	if err != nil {
		t.Fatal(err)
	}
	hash := TemplateHash(ds)
	return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: ds.Name + "-" + hash, Namespace: ds.Namespace,
		Labels: map[string]string{HashLabel: hash}, OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, dsKind)}},
		Data: runtime.RawExtension{Raw: patch}, Revision: n}
}

// Every template a DaemonSet runs is recorded as a ControllerRevision in upstream's shape;
// going back to an old template renumbers its revision; old ones beyond the limit go.
func TestSyncRevisions(t *testing.T) {
	ds := newDS()
	f := newFixture(t, ds, node("n1", nil))
	f.sync(t)
	creates := f.actions("create", "controllerrevisions")
	if len(creates) != 1 {
		t.Fatalf("revisions created: %d", len(creates))
	}
	rev := creates[0].(ktesting.CreateAction).GetObject().(*appsv1.ControllerRevision)
	want := revision(t, ds, 1)
	if rev.Name != want.Name || rev.Revision != 1 || rev.Labels[HashLabel] != TemplateHash(ds) || string(rev.Data.Raw) != string(want.Data.Raw) ||
		!strings.HasPrefix(string(rev.Data.Raw), `{"spec":{"template":{"$patch":"replace",`) || !metav1.IsControlledBy(rev, ds) {
		t.Errorf("revision %s #%d labels %v data %s", rev.Name, rev.Revision, rev.Labels, rev.Data.Raw)
	}

	// A new template gets the next number; the old template's revision stays while a pod runs it.
	old := revision(t, ds, 1)
	oldHash := TemplateHash(ds)
	updated := ds.DeepCopy()
	updated.Spec.Template.Spec.Containers[0].Image = "agent:2"
	f = newFixture(t, updated, node("n1", nil), old, dsPod(updated, "p", "n1", oldHash))
	f.sync(t)
	if creates := f.actions("create", "controllerrevisions"); len(creates) != 1 || creates[0].(ktesting.CreateAction).GetObject().(*appsv1.ControllerRevision).Revision != 2 {
		t.Errorf("update: creates %v", creates)
	}

	// Rolling back renumbers the old revision rather than creating one.
	second := revision(t, updated, 2)
	f = newFixture(t, ds, node("n1", nil), old, second)
	f.sync(t)
	ups := f.actions("update", "controllerrevisions")
	if len(ups) != 1 || ups[0].(ktesting.UpdateAction).GetObject().(*appsv1.ControllerRevision).Revision != 3 || len(f.actions("create", "controllerrevisions")) != 0 {
		t.Errorf("rollback: updates %v", ups)
	}

	// With a limit of 0, the old revision no pod runs is deleted.
	limited := updated.DeepCopy()
	limited.Spec.RevisionHistoryLimit = ptr.To[int32](0)
	f = newFixture(t, limited, node("n1", nil), old, revision(t, limited, 2))
	f.sync(t)
	if dels := f.actions("delete", "controllerrevisions"); len(dels) != 1 || dels[0].(ktesting.DeleteAction).GetName() != old.Name {
		t.Errorf("truncation: deletes %v", dels)
	}
}
