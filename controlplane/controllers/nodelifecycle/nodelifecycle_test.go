package nodelifecycle

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

var nodesGVR = corev1.SchemeGroupVersion.WithResource("nodes")

type fixture struct {
	c        *Controller
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	recorder *record.FakeRecorder
	now      time.Time
}

// newFixture builds the controller over a fake clientset that, like the API server, bumps a
// node's resourceVersion on every write, rejects writes carrying a stale one, and lets the
// status subresource change only the status (and the main resource only the rest).
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok && n.ResourceVersion == "" {
			n.ResourceVersion = "1"
		}
	}
	client := fake.NewSimpleClientset(objs...)
	client.PrependReactor("update", "nodes", func(a ktesting.Action) (bool, runtime.Object, error) {
		obj := a.(ktesting.UpdateAction).GetObject().(*corev1.Node)
		stored, err := client.Tracker().Get(nodesGVR, "", obj.Name)
		if err != nil {
			return true, nil, err
		}
		cur := stored.(*corev1.Node)
		if obj.ResourceVersion != cur.ResourceVersion {
			return true, nil, apierrors.NewConflict(nodesGVR.GroupResource(), obj.Name,
				fmt.Errorf("resourceVersion %s is stale, current %s", obj.ResourceVersion, cur.ResourceVersion))
		}
		next := cur.DeepCopy()
		if a.GetSubresource() == "status" {
			next.Status = *obj.Status.DeepCopy()
		} else {
			next = obj.DeepCopy()
			next.Status = cur.Status
		}
		rv, _ := strconv.Atoi(cur.ResourceVersion)
		next.ResourceVersion = strconv.Itoa(rv + 1)
		if err := client.Tracker().Update(nodesGVR, next, ""); err != nil {
			return true, nil, err
		}
		return true, next, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(100)
	c := New(client, factory.Core().V1().Nodes(), factory.Coordination().V1().Leases(), factory.Core().V1().Pods(), recorder,
		Options{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	f := &fixture{c: c, client: client, factory: factory, recorder: recorder, now: t0}
	c.now = func() time.Time { return f.now }
	for _, o := range objs {
		f.cache(o)
	}
	return f
}

func (f *fixture) cache(o runtime.Object) {
	switch o := o.(type) {
	case *corev1.Node:
		_ = f.factory.Core().V1().Nodes().Informer().GetIndexer().Update(o)
	case *coordinationv1.Lease:
		_ = f.factory.Coordination().V1().Leases().Informer().GetIndexer().Update(o)
	case *corev1.Pod:
		_ = f.factory.Core().V1().Pods().Informer().GetIndexer().Update(o)
	}
}

// deliver copies the stored node into the informer cache, as a watch event would.
func (f *fixture) deliver(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := f.client.Tracker().Get(nodesGVR, "", name)
	if err != nil {
		t.Fatal(err)
	}
	f.cache(n)
	return n.(*corev1.Node)
}

// at runs one monitor pass at t0+d.
func (f *fixture) at(d time.Duration) {
	f.now = t0.Add(d)
	f.client.ClearActions()
	f.c.monitor(context.Background())
}

func (f *fixture) writes() []ktesting.Action {
	var out []ktesting.Action
	for _, a := range f.client.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			out = append(out, a)
		}
	}
	return out
}

func (f *fixture) evicted() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == "pods" {
			out = append(out, a.(ktesting.DeleteAction).GetName())
		}
	}
	sort.Strings(out)
	return out
}

func readyNode(name string, status corev1.ConditionStatus, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: status, Reason: "KubeletReady"},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
		}},
	}
}

func lease(name string, renew time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: LeaseNamespace},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), RenewTime: ptr.To(metav1.NewMicroTime(renew))}}
}

func podOn(name, node string, tolerations ...corev1.Toleration) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: node, Tolerations: tolerations}}
}

func tolerate(key string, seconds *int64) corev1.Toleration {
	return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds}
}

func condition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func taintKeys(taints []corev1.Taint) string {
	var out []string
	for _, t := range taints {
		out = append(out, t.Key+":"+string(t.Effect))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func TestReadyStatus(t *testing.T) {
	if got := ReadyStatus(&corev1.Node{}); got != "" {
		t.Errorf("no conditions: %q", got)
	}
	for _, s := range []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown} {
		if got := ReadyStatus(readyNode("n", s)); got != s {
			t.Errorf("ReadyStatus = %q, want %q", got, s)
		}
	}
}

func TestWantedTaints(t *testing.T) {
	for _, tc := range []struct {
		ready corev1.ConditionStatus
		want  string
	}{
		{corev1.ConditionTrue, ""},
		{corev1.ConditionFalse, "node.kubernetes.io/not-ready:NoExecute,node.kubernetes.io/not-ready:NoSchedule"},
		{corev1.ConditionUnknown, "node.kubernetes.io/unreachable:NoExecute,node.kubernetes.io/unreachable:NoSchedule"},
		{"", "node.kubernetes.io/unreachable:NoExecute,node.kubernetes.io/unreachable:NoSchedule"},
	} {
		if got := taintKeys(WantedTaints(tc.ready)); got != tc.want {
			t.Errorf("WantedTaints(%q) = %s, want %s", tc.ready, got, tc.want)
		}
	}
}

func TestConditionTaints(t *testing.T) {
	n := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionUnknown},
		{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue},
	}}}
	if got := taintKeys(ConditionTaints(n)); got != "node.kubernetes.io/disk-pressure:NoSchedule,node.kubernetes.io/network-unavailable:NoSchedule" {
		t.Fatalf("ConditionTaints = %s", got)
	}
	// Relieved: the pressure taint goes, a user's taint of another effect on the same key stays.
	mine := corev1.Taint{Key: corev1.TaintNodeDiskPressure, Effect: corev1.TaintEffectNoExecute}
	current := append(ConditionTaints(n), mine)
	n.Status.Conditions[2].Status = corev1.ConditionFalse
	got, changed := ReconcileTaints(current, ConditionTaints(n), t0)
	if !changed || taintKeys(got) != "node.kubernetes.io/disk-pressure:NoExecute,node.kubernetes.io/network-unavailable:NoSchedule" {
		t.Fatalf("after relief: %s changed=%v", taintKeys(got), changed)
	}
}

func TestReconcileTaints(t *testing.T) {
	now := t0.Add(time.Hour)
	old := metav1.NewTime(t0)
	custom := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	customExec := corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoExecute, TimeAdded: &old}
	unreachExec := UnreachableNoExecute
	unreachExec.TimeAdded = &old
	for _, tc := range []struct {
		name        string
		current     []corev1.Taint
		wanted      []corev1.Taint
		wantKeys    string
		wantChanged bool
	}{
		{"nothing", nil, nil, "", false},
		{"add unreachable", nil, WantedTaints(corev1.ConditionUnknown),
			"node.kubernetes.io/unreachable:NoExecute,node.kubernetes.io/unreachable:NoSchedule", true},
		{"already there", []corev1.Taint{UnreachableNoSched, unreachExec}, WantedTaints(corev1.ConditionUnknown),
			"node.kubernetes.io/unreachable:NoExecute,node.kubernetes.io/unreachable:NoSchedule", false},
		{"one missing", []corev1.Taint{UnreachableNoSched}, WantedTaints(corev1.ConditionUnknown),
			"node.kubernetes.io/unreachable:NoExecute,node.kubernetes.io/unreachable:NoSchedule", true},
		{"unreachable becomes not-ready, others kept", []corev1.Taint{custom, UnreachableNoSched, unreachExec, customExec}, WantedTaints(corev1.ConditionFalse),
			"dedicated:NoSchedule,maintenance:NoExecute,node.kubernetes.io/not-ready:NoExecute,node.kubernetes.io/not-ready:NoSchedule", true},
		{"recovered node loses lifecycle taints only", []corev1.Taint{UnreachableNoSched, custom, unreachExec}, nil, "dedicated:NoSchedule", true},
		{"no lifecycle taints, none wanted", []corev1.Taint{custom, customExec}, nil, "dedicated:NoSchedule,maintenance:NoExecute", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := ReconcileTaints(tc.current, tc.wanted, now)
			if taintKeys(got) != tc.wantKeys || changed != tc.wantChanged {
				t.Fatalf("got %s changed=%v, want %s changed=%v", taintKeys(got), changed, tc.wantKeys, tc.wantChanged)
			}
			before := map[string]corev1.Taint{}
			for _, tt := range tc.current {
				before[tt.Key+":"+string(tt.Effect)] = tt
			}
			for _, tt := range got {
				prev, kept := before[tt.Key+":"+string(tt.Effect)]
				switch {
				case kept:
					if !prev.MatchTaint(&tt) || (prev.TimeAdded == nil) != (tt.TimeAdded == nil) ||
						(prev.TimeAdded != nil && !prev.TimeAdded.Equal(tt.TimeAdded)) {
						t.Errorf("kept taint changed: %+v -> %+v", prev, tt)
					}
				case tt.Effect == corev1.TaintEffectNoExecute:
					if tt.TimeAdded == nil || !tt.TimeAdded.Time.Equal(now) {
						t.Errorf("new NoExecute taint %s has timeAdded %v, want now", tt.Key, tt.TimeAdded)
					}
				default:
					if tt.TimeAdded != nil {
						t.Errorf("new NoSchedule taint %s has timeAdded %v", tt.Key, tt.TimeAdded)
					}
				}
			}
		})
	}
	// The wanted slice is a template: it must not be modified.
	wanted := WantedTaints(corev1.ConditionUnknown)
	ReconcileTaints(nil, wanted, now)
	if wanted[1].TimeAdded != nil || UnreachableNoExecute.TimeAdded != nil {
		t.Fatal("ReconcileTaints mutated the wanted taints")
	}
}

func TestEvictionTime(t *testing.T) {
	added := metav1.NewTime(t0)
	later := metav1.NewTime(t0.Add(time.Minute))
	unreach := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &added}
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute, TimeAdded: &later}
	sched := corev1.Taint{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &added}
	for _, tc := range []struct {
		name   string
		tols   []corev1.Toleration
		taints []corev1.Taint
		want   time.Time
		evict  bool
	}{
		{"no NoExecute taints", nil, []corev1.Taint{sched}, time.Time{}, false},
		{"untolerated: at timeAdded", nil, []corev1.Taint{unreach}, t0, true},
		{"tolerationSeconds", []corev1.Toleration{tolerate(corev1.TaintNodeUnreachable, ptr.To[int64](300))}, []corev1.Taint{unreach}, t0.Add(300 * time.Second), true},
		{"negative tolerationSeconds: at once", []corev1.Toleration{tolerate(corev1.TaintNodeUnreachable, ptr.To[int64](-5))}, []corev1.Taint{unreach}, t0, true},
		{"forever", []corev1.Toleration{tolerate(corev1.TaintNodeUnreachable, nil)}, []corev1.Taint{unreach}, time.Time{}, false},
		{"tolerate everything forever", []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, []corev1.Taint{unreach, notReady}, time.Time{}, false},
		{"shortest matching toleration wins", []corev1.Toleration{tolerate(corev1.TaintNodeUnreachable, ptr.To[int64](600)),
			tolerate(corev1.TaintNodeUnreachable, ptr.To[int64](60))}, []corev1.Taint{unreach}, t0.Add(60 * time.Second), true},
		{"toleration of another taint does not help", []corev1.Toleration{tolerate(corev1.TaintNodeNotReady, nil)}, []corev1.Taint{unreach}, t0, true},
		{"multiple taints: earliest", []corev1.Toleration{tolerate(corev1.TaintNodeUnreachable, ptr.To[int64](300)),
			tolerate(corev1.TaintNodeNotReady, ptr.To[int64](10))}, []corev1.Taint{unreach, notReady}, t0.Add(70 * time.Second), true},
		{"multiple taints, one forever, one untolerated", []corev1.Toleration{tolerate(corev1.TaintNodeUnreachable, nil)},
			[]corev1.Taint{unreach, notReady}, later.Time, true},
		{"NoSchedule toleration does not cover NoExecute", []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoSchedule}}, []corev1.Taint{unreach}, t0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at, evict := EvictionTime(podOn("p", "n", tc.tols...), tc.taints)
			if evict != tc.evict || !at.Equal(tc.want) {
				t.Fatalf("EvictionTime = %v %v, want %v %v", at, evict, tc.want, tc.evict)
			}
		})
	}
}

func TestMonitorRenewedLeaseDoesNothing(t *testing.T) {
	f := newFixture(t, readyNode("n1", corev1.ConditionTrue), lease("n1", t0))
	f.at(0)
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("writes for a healthy node: %v", w)
	}
	// Renewed every 10s for two minutes: never Unknown.
	for s := 10; s <= 120; s += 10 {
		f.cache(lease("n1", t0.Add(time.Duration(s)*time.Second)))
		f.at(time.Duration(s) * time.Second)
		if w := f.writes(); len(w) != 0 {
			t.Fatalf("writes at %ds with a renewed lease: %v", s, w)
		}
	}
	// Not renewed, but within the grace period (40s).
	f.at(160 * time.Second)
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("writes within the grace period: %v", w)
	}
}

func TestMonitorUsesOwnClockNotRenewTime(t *testing.T) {
	// The agent's clock is an hour behind: its renewTime looks stale, yet it is being renewed.
	skewed := t0.Add(-time.Hour)
	f := newFixture(t, readyNode("n1", corev1.ConditionTrue), lease("n1", skewed))
	f.at(0)
	f.cache(lease("n1", skewed.Add(10*time.Second)))
	f.at(10 * time.Second)
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("writes for a renewed lease with a skewed clock: %v", w)
	}
}

func TestMonitorStaleLeaseMarksUnknownTaintsAndEvicts(t *testing.T) {
	custom := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	f := newFixture(t, readyNode("n1", corev1.ConditionTrue, custom), lease("n1", t0), readyNode("n2", corev1.ConditionTrue), lease("n2", t0))
	f.cache(podOn("untolerant", "n1"))
	f.cache(podOn("tolerates-300s", "n1", tolerate(corev1.TaintNodeUnreachable, ptr.To[int64](300))))
	f.cache(podOn("tolerates-forever", "n1", tolerate(corev1.TaintNodeUnreachable, nil)))
	f.cache(podOn("elsewhere", "n2"))
	f.at(0)
	// n2 keeps renewing; n1 falls silent.
	f.cache(lease("n2", t0.Add(30*time.Second)))
	f.at(30 * time.Second)
	f.at(40 * time.Second)
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("writes at exactly the grace period: %v", w)
	}

	f.at(41 * time.Second)
	var status, update *corev1.Node
	for _, a := range f.writes() {
		if a.GetResource().Resource != "nodes" {
			continue
		}
		n := a.(ktesting.UpdateAction).GetObject().(*corev1.Node)
		if n.Name != "n1" {
			t.Fatalf("node %s written although its lease is renewed", n.Name)
		}
		if a.GetSubresource() == "status" {
			status = n
		} else {
			update = n
		}
	}
	if status == nil {
		t.Fatal("no status update for the silent node")
	}
	ready := condition(status, corev1.NodeReady)
	if ready.Status != corev1.ConditionUnknown || ready.Reason != "NodeStatusUnknown" || !ready.LastTransitionTime.Time.Equal(t0.Add(41*time.Second)) {
		t.Fatalf("Ready condition %+v", ready)
	}
	if mp := condition(status, corev1.NodeMemoryPressure); mp.Status != corev1.ConditionUnknown || mp.Reason != "NodeStatusUnknown" {
		t.Errorf("MemoryPressure %+v", mp)
	}
	if dp := condition(status, corev1.NodeDiskPressure); dp == nil || dp.Status != corev1.ConditionUnknown || dp.Reason != "NodeStatusNeverUpdated" {
		t.Errorf("DiskPressure %+v", dp)
	}
	if update == nil {
		t.Fatalf("no taint update in the same pass: %v", f.writes())
	}
	if got := taintKeys(update.Spec.Taints); got != "dedicated:NoSchedule,node.kubernetes.io/unreachable:NoExecute,node.kubernetes.io/unreachable:NoSchedule" {
		t.Fatalf("taints %s", got)
	}
	if ev := <-f.recorder.Events; !strings.Contains(ev, "NodeNotReady") {
		t.Errorf("event %q", ev)
	}
	stored := f.deliver(t, "n1")
	if condition(stored, corev1.NodeReady).Status != corev1.ConditionUnknown || len(stored.Spec.Taints) != 3 {
		t.Fatalf("stored node %+v / %+v: status and taints must both stick", stored.Status.Conditions, stored.Spec.Taints)
	}
	if got := f.evicted(); fmt.Sprint(got) != "[untolerant]" {
		t.Fatalf("evicted %v at once, want [untolerant]", got)
	}
	for _, a := range f.client.Actions() {
		if d, ok := a.(ktesting.DeleteAction); ok {
			if pre := d.GetDeleteOptions().Preconditions; pre == nil || pre.UID == nil || string(*pre.UID) != "uid-"+d.GetName() {
				t.Errorf("eviction of %s without UID precondition", d.GetName())
			}
		}
	}
	f.cache(func() *corev1.Pod {
		p := podOn("untolerant", "n1")
		ts := metav1.NewTime(f.now)
		p.DeletionTimestamp = &ts
		return p
	}())
	// n2 has served its purpose; it would go stale from here on.
	_ = f.factory.Core().V1().Nodes().Informer().GetIndexer().Delete(readyNode("n2", corev1.ConditionTrue))

	// Steady: already Unknown and tainted, nothing more to write; the 300s toleration runs.
	f.at(41*time.Second + 299*time.Second)
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("writes before tolerationSeconds passed: %v", w)
	}
	f.at(41*time.Second + 300*time.Second)
	if got := f.evicted(); fmt.Sprint(got) != "[tolerates-300s]" {
		t.Fatalf("evicted %v once the toleration ran out, want [tolerates-300s]", got)
	}
	f.cache(func() *corev1.Pod {
		p := podOn("tolerates-300s", "n1")
		ts := metav1.NewTime(f.now)
		p.DeletionTimestamp = &ts
		return p
	}())
	f.at(time.Hour)
	if got := f.evicted(); len(got) != 0 {
		t.Fatalf("evicted %v; the remaining pod tolerates the taint forever", got)
	}

	// The agent comes back: it renews its lease and reports Ready=True.
	back := stored.DeepCopy()
	condition(back, corev1.NodeReady).Status = corev1.ConditionTrue
	f.cache(back)
	f.cache(lease("n1", t0.Add(2*time.Hour)))
	f.at(2 * time.Hour)
	var recovered *corev1.Node
	for _, a := range f.writes() {
		if a.GetResource().Resource == "nodes" {
			if a.GetSubresource() == "status" {
				t.Fatal("status rewritten for a node that reports again")
			}
			recovered = a.(ktesting.UpdateAction).GetObject().(*corev1.Node)
		}
	}
	if recovered == nil || taintKeys(recovered.Spec.Taints) != "dedicated:NoSchedule" {
		t.Fatalf("recovered node taints %v, want only the custom one", recovered)
	}
	if got := f.evicted(); len(got) != 0 {
		t.Fatalf("evicted %v from a recovered node", got)
	}
}

func TestMonitorNodeWithoutLease(t *testing.T) {
	n := readyNode("n1", corev1.ConditionTrue)
	n.Status.Conditions = nil // never posted a status
	f := newFixture(t, n)
	// No Ready condition yet: the node wants the unreachable taints at once (nothing runs on a
	// node that never reported), but its status is left to the agent for the grace period.
	f.at(0)
	var tainted bool
	for _, a := range f.writes() {
		if a.GetSubresource() == "status" {
			t.Fatalf("status written before the grace period: %v", a)
		}
		if a.GetVerb() == "update" {
			tainted = taintKeys(a.(ktesting.UpdateAction).GetObject().(*corev1.Node).Spec.Taints) ==
				"node.kubernetes.io/unreachable:NoExecute,node.kubernetes.io/unreachable:NoSchedule"
		}
	}
	if !tainted {
		t.Fatalf("writes %v, want the unreachable taints", f.writes())
	}
	f.deliver(t, "n1")
	f.at(41 * time.Second)
	var status *corev1.Node
	for _, a := range f.writes() {
		if a.GetSubresource() == "status" {
			status = a.(ktesting.UpdateAction).GetObject().(*corev1.Node)
		}
	}
	if status == nil {
		t.Fatal("no status update for a node that never reported")
	}
	if r := condition(status, corev1.NodeReady); r == nil || r.Status != corev1.ConditionUnknown || r.Reason != "NodeStatusNeverUpdated" ||
		!r.LastHeartbeatTime.Time.Equal(n.CreationTimestamp.Time) {
		t.Fatalf("Ready %+v", r)
	}
	stored := f.deliver(t, "n1")
	if got := taintKeys(stored.Spec.Taints); got != "node.kubernetes.io/unreachable:NoExecute,node.kubernetes.io/unreachable:NoSchedule" {
		t.Fatalf("taints %s", got)
	}
}

func TestMonitorNotReadyNodeIsTaintedNotReady(t *testing.T) {
	f := newFixture(t, readyNode("n1", corev1.ConditionFalse), lease("n1", t0))
	f.cache(podOn("p", "n1", tolerate(corev1.TaintNodeNotReady, ptr.To[int64](60))))
	f.at(0)
	var upd *corev1.Node
	for _, a := range f.writes() {
		if a.GetSubresource() == "status" {
			t.Fatal("status of a node that reports NotReady itself was rewritten")
		}
		if a.GetResource().Resource == "nodes" {
			upd = a.(ktesting.UpdateAction).GetObject().(*corev1.Node)
		}
	}
	if upd == nil || taintKeys(upd.Spec.Taints) != "node.kubernetes.io/not-ready:NoExecute,node.kubernetes.io/not-ready:NoSchedule" {
		t.Fatalf("taints %v", upd)
	}
	for _, tt := range upd.Spec.Taints {
		if tt.Effect == corev1.TaintEffectNoExecute && (tt.TimeAdded == nil || !tt.TimeAdded.Time.Equal(t0)) {
			t.Fatalf("NoExecute taint timeAdded %v, want now", tt.TimeAdded)
		}
	}
	f.deliver(t, "n1")
	f.cache(lease("n1", t0.Add(59*time.Second)))
	f.at(59 * time.Second)
	if got := f.evicted(); len(got) != 0 {
		t.Fatalf("evicted %v before tolerationSeconds", got)
	}
	f.cache(lease("n1", t0.Add(60*time.Second)))
	f.at(60 * time.Second)
	if got := f.evicted(); fmt.Sprint(got) != "[p]" {
		t.Fatalf("evicted %v at tolerationSeconds, want [p]", got)
	}
}
