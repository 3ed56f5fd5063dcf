package deployment

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"regexp"
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

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	c        *Controller
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	recorder *record.FakeRecorder
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewSimpleClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(100)
	c := New(client, factory.Apps().V1().Deployments(), factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), recorder,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	f := &fixture{c: c, client: client, factory: factory, recorder: recorder}
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.Deployment:
			_ = factory.Apps().V1().Deployments().Informer().GetIndexer().Add(o)
		case *appsv1.ReplicaSet:
			_ = factory.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			_ = factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
		}
	}
	return f
}

func (f *fixture) sync(t *testing.T, key string) {
	t.Helper()
	if err := f.c.sync(context.Background(), key); err != nil {
		t.Fatalf("sync %s: %v", key, err)
	}
}

func (f *fixture) actions(verb, resource, subresource string) []ktesting.Action {
	var out []ktesting.Action
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource && a.GetSubresource() == subresource {
			out = append(out, a)
		}
	}
	return out
}

// rsUpdates returns the ReplicaSets written by update actions, in order.
func (f *fixture) rsUpdates() []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, a := range f.actions("update", "replicasets", "") {
		out = append(out, a.(ktesting.UpdateAction).GetObject().(*appsv1.ReplicaSet))
	}
	return out
}

// lastReplicas is the last replica count written to each ReplicaSet, by creation or update.
func (f *fixture) lastReplicas() map[string]int32 {
	out := map[string]int32{}
	var written []*appsv1.ReplicaSet
	for _, a := range f.actions("create", "replicasets", "") {
		written = append(written, a.(ktesting.CreateAction).GetObject().(*appsv1.ReplicaSet))
	}
	for _, rs := range append(written, f.rsUpdates()...) {
		out[rs.Name] = *rs.Spec.Replicas
	}
	return out
}

// revisionUpdates are the revisions the controller wrote on the Deployment, by update (its
// upstream role may update deployments, not patch them).
func (f *fixture) revisionUpdates(t *testing.T) []string {
	t.Helper()
	var out []string
	if n := len(f.actions("patch", "deployments", "")); n > 0 {
		t.Errorf("%d patches of the deployment: the deployment-controller role has no patch", n)
	}
	for _, a := range f.actions("update", "deployments", "") {
		d := a.(ktesting.UpdateAction).GetObject().(*appsv1.Deployment)
		out = append(out, d.Annotations[RevisionAnnotation])
	}
	return out
}

func template(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}},
	}
}

func rolling(surge, unavailable intstr.IntOrString) appsv1.DeploymentStrategy {
	return appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}}
}

var defaultRolling = rolling(intstr.FromString("25%"), intstr.FromString("25%"))

func newDeployment(replicas int32, image string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "web-uid", Generation: 1},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: template(image),
			Strategy: defaultRolling,
		},
	}
}

// ownedRS is a ReplicaSet the deployment made for template tmpl.
func ownedRS(d *appsv1.Deployment, image, revision string, replicas, available int32, created time.Time) *appsv1.ReplicaSet {
	tmpl := template(image)
	hash := TemplateHash(&tmpl, nil)
	tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-" + hash, Namespace: d.Namespace, UID: types.UID("rs-" + image),
			CreationTimestamp: metav1.NewTime(created), Labels: tmpl.Labels,
			Annotations:     map[string]string{RevisionAnnotation: revision},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash}},
			Template: tmpl},
		Status: appsv1.ReplicaSetStatus{Replicas: replicas, ReadyReplicas: available, AvailableReplicas: available},
	}
}

func TestFirstSyncCreatesReplicaSet(t *testing.T) {
	d := newDeployment(4, "nginx:1")
	d.Annotations = map[string]string{ChangeCauseAnnotation: "kubectl create"}
	f := newFixture(t, d)
	f.sync(t, "default/web")

	hash := TemplateHash(&d.Spec.Template, nil)
	creates := f.actions("create", "replicasets", "")
	if len(creates) != 1 {
		t.Fatalf("%d replica set creations, want 1", len(creates))
	}
	rs := creates[0].(ktesting.CreateAction).GetObject().(*appsv1.ReplicaSet)
	if rs.Name != "web-"+hash || rs.Namespace != "default" {
		t.Errorf("created %s/%s, want default/web-%s", rs.Namespace, rs.Name, hash)
	}
	if rs.Annotations[RevisionAnnotation] != "1" || rs.Annotations[ChangeCauseAnnotation] != "kubectl create" {
		t.Errorf("annotations %v", rs.Annotations)
	}
	if rs.Annotations[DesiredReplicasAnnotation] != "4" || rs.Annotations[MaxReplicasAnnotation] != "5" {
		t.Errorf("desired/max annotations %v, want 4/5", rs.Annotations)
	}
	if ref := metav1.GetControllerOf(rs); ref == nil || ref.UID != d.UID || ref.Kind != "Deployment" {
		t.Errorf("controller ref %+v", ref)
	}
	if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != hash || rs.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != hash ||
		rs.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] != hash || rs.Spec.Selector.MatchLabels["app"] != "web" {
		t.Errorf("hash label missing: labels %v template %v selector %v", rs.Labels, rs.Spec.Template.Labels, rs.Spec.Selector.MatchLabels)
	}
	if _, ok := d.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; ok {
		t.Error("the deployment's template was mutated")
	}
	// No old replicas: maxSurge (25% of 4 -> 1) leaves room for all 4 at once, so it is created
	// at 4 (as upstream's: a reader never sees it at 0 first) and not scaled after.
	if *rs.Spec.Replicas != 4 {
		t.Errorf("created with %d replicas, want 4", *rs.Spec.Replicas)
	}
	if got := f.rsUpdates(); len(got) != 0 {
		t.Errorf("%d updates after creating it at its size", len(got))
	}
	if got := f.revisionUpdates(t); len(got) != 1 || got[0] != "1" {
		t.Errorf("revision updates %v, want [1]", got)
	}
	st := f.actions("update", "deployments", "status")
	if len(st) != 1 {
		t.Fatalf("%d status updates, want 1", len(st))
	}
	status := st[0].(ktesting.UpdateAction).GetObject().(*appsv1.Deployment).Status
	if status.ObservedGeneration != 1 || status.UnavailableReplicas != 4 {
		t.Errorf("status %+v", status)
	}
	ev := <-f.recorder.Events
	if !strings.HasPrefix(ev, "Normal ScalingReplicaSet Scaled up replica set web-"+hash+" from 0 to 4") {
		t.Errorf("event %q", ev)
	}
}

func TestSyncRollingStepWithinBounds(t *testing.T) {
	// 4 replicas, 25%/25%: surge 1, unavailable 1. The new ReplicaSet gets 1 (total 5); the new
	// pod is not available, so the old one may lose only maxUnavailable: 4 -> 3.
	d := newDeployment(4, "nginx:2")
	old := ownedRS(d, "nginx:1", "1", 4, 4, t0)
	f := newFixture(t, d, old)
	f.sync(t, "default/web")
	newName := "web-" + TemplateHash(&d.Spec.Template, nil)
	got := f.lastReplicas()
	if got[newName] != 1 || got[old.Name] != 3 {
		t.Fatalf("scaled %v, want %s=1 %s=3", got, newName, old.Name)
	}
	// Scale up happens before scale down, as upstream: the new ReplicaSet is created at its
	// first step's size, then the old one is scaled down.
	var order []string
	for _, a := range f.client.Actions() {
		if a.GetResource().Resource != "replicasets" {
			continue
		}
		if w, ok := a.(interface{ GetObject() runtime.Object }); ok {
			order = append(order, a.GetVerb()+" "+w.GetObject().(*appsv1.ReplicaSet).Name)
		}
	}
	if len(order) != 2 || order[0] != "create "+newName || order[1] != "update "+old.Name {
		t.Fatalf("writes %v, want the new one created, then the old one scaled down", order)
	}
	upd := f.rsUpdates()
	if upd[0].Annotations[DesiredReplicasAnnotation] != "4" || upd[0].Annotations[MaxReplicasAnnotation] != "5" {
		t.Errorf("old replica set annotations %v", upd[0].Annotations)
	}
}

func TestPlanRollingUpdate(t *testing.T) {
	type rsState struct {
		name              string
		replicas, avail   int32
		createdMinutesAgo int
	}
	mk := func(s rsState) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: s.name, CreationTimestamp: metav1.NewTime(t0.Add(-time.Duration(s.createdMinutesAgo) * time.Minute))},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(s.replicas)}, Status: appsv1.ReplicaSetStatus{Replicas: s.replicas, AvailableReplicas: s.avail}}
	}
	for _, tc := range []struct {
		name     string
		replicas int32
		strategy appsv1.DeploymentStrategy
		newRS    rsState
		old      []rsState
		want     Plan
	}{
		{
			name: "scale-up bounded by maxSurge, old scaled down by maxUnavailable", replicas: 10, strategy: defaultRolling,
			newRS: rsState{"new", 0, 0, 0}, old: []rsState{{"old", 10, 10, 60}},
			// surge ceil(2.5)=3, unavailable floor(2.5)=2: new 3; old may drop to 8 available.
			want: Plan{"new": 3, "old": 8},
		},
		{
			name: "old not scaled down while new replicas are unavailable", replicas: 10, strategy: defaultRolling,
			newRS: rsState{"new", 3, 0, 0}, old: []rsState{{"old", 8, 8, 60}},
			want: Plan{"new": 5, "old": 8},
		},
		{
			name: "old scaled down as new replicas become available", replicas: 10, strategy: defaultRolling,
			newRS: rsState{"new", 5, 5, 0}, old: []rsState{{"old", 8, 8, 60}},
			// total 13 already: no room; 13 available, min 8, so old may lose 5.
			want: Plan{"new": 5, "old": 3},
		},
		{
			name: "no surge: old goes first within maxUnavailable", replicas: 4, strategy: rolling(intstr.FromInt32(0), intstr.FromInt32(1)),
			newRS: rsState{"new", 0, 0, 0}, old: []rsState{{"old", 4, 4, 60}},
			want: Plan{"new": 0, "old": 3},
		},
		{
			name: "unhealthy old replicas removed first, even from a newer replica set", replicas: 4, strategy: rolling(intstr.FromInt32(0), intstr.FromInt32(2)),
			newRS: rsState{"new", 0, 0, 0}, old: []rsState{{"old-a", 3, 3, 60}, {"old-b", 1, 0, 30}},
			// budget 2: one unhealthy replica of old-b, then one available one of the oldest, old-a.
			want: Plan{"new": 0, "old-a": 2, "old-b": 0},
		},
		{
			name: "unhealthy replicas alone cannot breach availability", replicas: 4, strategy: rolling(intstr.FromInt32(0), intstr.FromInt32(1)),
			newRS: rsState{"new", 0, 0, 0}, old: []rsState{{"old-a", 2, 2, 60}, {"old-b", 2, 0, 30}},
			// 2 available < min 3: only maxScaledDown=1 unhealthy replica may go, no available one.
			want: Plan{"new": 0, "old-a": 2, "old-b": 1},
		},
		{
			name: "both fenceposts 0 means unavailable 1", replicas: 3, strategy: rolling(intstr.FromInt32(0), intstr.FromInt32(0)),
			newRS: rsState{"new", 0, 0, 0}, old: []rsState{{"old", 3, 3, 60}},
			want: Plan{"new": 0, "old": 2},
		},
		{
			name: "oldest old replica set scaled down first", replicas: 4, strategy: rolling(intstr.FromInt32(0), intstr.FromInt32(2)),
			newRS: rsState{"new", 0, 0, 0}, old: []rsState{{"newer-old", 2, 2, 10}, {"oldest", 2, 2, 90}},
			want: Plan{"new": 0, "oldest": 0, "newer-old": 2},
		},
		{
			name: "new replica set above replicas is brought down", replicas: 2, strategy: defaultRolling,
			newRS: rsState{"new", 5, 5, 0},
			want:  Plan{"new": 2},
		},
		{
			name: "complete rollout is left alone", replicas: 3, strategy: defaultRolling,
			newRS: rsState{"new", 3, 3, 0}, old: []rsState{{"old", 0, 0, 60}},
			want: Plan{"new": 3, "old": 0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment(tc.replicas, "x")
			d.Spec.Strategy = tc.strategy
			var old []*appsv1.ReplicaSet
			for _, s := range tc.old {
				old = append(old, mk(s))
			}
			got := PlanRollingUpdate(d, mk(tc.newRS), old)
			if len(got) != len(tc.want) {
				t.Fatalf("plan %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("plan %v, want %v", got, tc.want)
				}
			}
			// Invariants: never above replicas+surge in total.
			surge, _ := ResolveFenceposts(d)
			var total int32
			for _, v := range got {
				total += v
			}
			var before int32 = tc.newRS.replicas
			for _, s := range tc.old {
				before += s.replicas
			}
			if total > max(tc.replicas+surge, before) {
				t.Fatalf("plan total %d above replicas+surge %d", total, tc.replicas+surge)
			}
		})
	}
}

func TestResolveFenceposts(t *testing.T) {
	for _, tc := range []struct {
		name               string
		replicas           int32
		strategy           appsv1.DeploymentStrategy
		surge, unavailable int32
	}{
		{"25% of 10 rounds surge up, unavailable down", 10, defaultRolling, 3, 2},
		{"25% of 4", 4, defaultRolling, 1, 1},
		{"25% of 1", 1, defaultRolling, 1, 0},
		{"defaults when unset", 10, appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{}}, 3, 2},
		{"both zero becomes unavailable 1", 5, rolling(intstr.FromInt32(0), intstr.FromInt32(0)), 0, 1},
		{"both zero percent becomes unavailable 1", 3, rolling(intstr.FromString("0%"), intstr.FromString("10%")), 0, 1},
		{"unavailable capped at replicas", 3, rolling(intstr.FromInt32(1), intstr.FromInt32(10)), 1, 3},
		{"absolute values", 10, rolling(intstr.FromInt32(4), intstr.FromInt32(0)), 4, 0},
		{"recreate", 10, appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment(tc.replicas, "x")
			d.Spec.Strategy = tc.strategy
			s, u := ResolveFenceposts(d)
			if s != tc.surge || u != tc.unavailable {
				t.Fatalf("got surge %d unavailable %d, want %d %d", s, u, tc.surge, tc.unavailable)
			}
		})
	}
}

func TestTemplateChangeCreatesRevision2(t *testing.T) {
	d := newDeployment(3, "nginx:2")
	d.Annotations = map[string]string{RevisionAnnotation: "1"}
	old := ownedRS(d, "nginx:1", "1", 3, 3, t0)
	f := newFixture(t, d, old)
	f.sync(t, "default/web")

	creates := f.actions("create", "replicasets", "")
	if len(creates) != 1 {
		t.Fatalf("%d creations, want 1", len(creates))
	}
	rs := creates[0].(ktesting.CreateAction).GetObject().(*appsv1.ReplicaSet)
	if want := "web-" + TemplateHash(&d.Spec.Template, nil); rs.Name != want || rs.Name == old.Name {
		t.Fatalf("created %s, want %s", rs.Name, want)
	}
	if rs.Annotations[RevisionAnnotation] != "2" {
		t.Fatalf("revision %q, want 2", rs.Annotations[RevisionAnnotation])
	}
	if got := f.revisionUpdates(t); len(got) != 1 || got[0] != "2" {
		t.Fatalf("revision updates %v, want [2]", got)
	}
	// 3 replicas: surge 1, unavailable 0. The new one is scaled to 1, the old one is kept.
	got := f.lastReplicas()
	if got[rs.Name] != 1 {
		t.Errorf("new scaled to %d, want 1", got[rs.Name])
	}
	if r, ok := got[old.Name]; ok {
		t.Errorf("old scaled to %d while the new replica is unavailable", r)
	}
}

func TestRolloutUndoReusesOldReplicaSet(t *testing.T) {
	d := newDeployment(2, "nginx:1") // back to the template of revision 3
	d.Annotations = map[string]string{RevisionAnnotation: "4"}
	a := ownedRS(d, "nginx:1", "3", 0, 0, t0)
	a.Annotations[RevisionHistoryAnnotation] = "1"
	b := ownedRS(d, "nginx:2", "4", 2, 2, t0.Add(time.Hour))
	f := newFixture(t, d, a, b)
	f.sync(t, "default/web")

	if n := len(f.actions("create", "replicasets", "")); n != 0 {
		t.Fatalf("undo created %d replica sets, want the old one reused", n)
	}
	upd := f.rsUpdates()
	if len(upd) == 0 || upd[0].Name != a.Name {
		t.Fatalf("first update %v, want %s re-annotated", upd, a.Name)
	}
	if upd[0].Annotations[RevisionAnnotation] != "5" || upd[0].Annotations[RevisionHistoryAnnotation] != "1,3" {
		t.Fatalf("annotations %v, want revision 5 and history 1,3", upd[0].Annotations)
	}
	if got := f.revisionUpdates(t); len(got) != 1 || got[0] != "5" {
		t.Fatalf("revision updates %v, want [5]", got)
	}
	if got := f.lastReplicas(); got[a.Name] != 1 {
		t.Fatalf("reused replica set scaled to %d, want 1 (surge 1)", got[a.Name])
	}
	// The original informer object is not modified.
	if a.Annotations[RevisionAnnotation] != "3" {
		t.Fatal("cached replica set mutated")
	}
}

func TestRolloutUndoFirstHistoryEntry(t *testing.T) {
	d := newDeployment(1, "nginx:1")
	a := ownedRS(d, "nginx:1", "1", 0, 0, t0)
	b := ownedRS(d, "nginx:2", "2", 1, 1, t0.Add(time.Hour))
	f := newFixture(t, d, a, b)
	f.sync(t, "default/web")
	upd := f.rsUpdates()
	if len(upd) == 0 || upd[0].Annotations[RevisionAnnotation] != "3" || upd[0].Annotations[RevisionHistoryAnnotation] != "1" {
		t.Fatalf("updates %v, want revision 3 history 1", upd)
	}
}

func TestRecreateScalesOldDownBeforeNew(t *testing.T) {
	d := newDeployment(3, "nginx:2")
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	old := ownedRS(d, "nginx:1", "1", 3, 3, t0)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "old-pod", Namespace: "default", UID: "old-pod",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(old, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	f := newFixture(t, d, old, pod)
	f.sync(t, "default/web")
	newName := "web-" + TemplateHash(&d.Spec.Template, nil)
	got := f.lastReplicas()
	if got[old.Name] != 0 {
		t.Fatalf("old scaled to %v, want 0", got)
	}
	if r := got[newName]; r != 0 {
		t.Fatalf("new given %d replicas while an old pod runs", r)
	}

	// Old replicas gone (the last pod finished): the new ReplicaSet gets every replica at once.
	old0 := old.DeepCopy()
	old0.Spec.Replicas, old0.Status = ptr.To[int32](0), appsv1.ReplicaSetStatus{}
	done := pod.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	newRS := ownedRS(d, "nginx:2", "2", 0, 0, t0.Add(time.Hour))
	f = newFixture(t, d, old0, newRS, done)
	f.sync(t, "default/web")
	got = f.lastReplicas()
	if got[newName] != 3 {
		t.Fatalf("new scaled %v, want 3", got)
	}
	if _, ok := got[old.Name]; ok {
		t.Fatal("old replica set touched again")
	}
}

func TestRevisionHistoryLimitCleanup(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limit   *int32
		deleted []string
	}{
		{"limit 2 keeps the two newest idle", ptr.To[int32](2), []string{"v1", "v2"}},
		{"limit 0 deletes every idle", ptr.To[int32](0), []string{"v1", "v2", "v3", "v4"}},
		{"default 10 keeps all", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment(1, "nginx:current")
			d.Spec.RevisionHistoryLimit = tc.limit
			objs := []runtime.Object{d, ownedRS(d, "nginx:current", "9", 1, 1, t0.Add(10*time.Hour))}
			// Idle old ReplicaSets v1..v4, created in that order (listed out of order).
			for _, i := range []int{3, 1, 4, 2} {
				rs := ownedRS(d, "v"+string(rune('0'+i)), string(rune('0'+i)), 0, 0, t0.Add(time.Duration(i)*time.Hour))
				rs.Name = "v" + string(rune('0'+i))
				objs = append(objs, rs)
			}
			// Not idle: scaled to 0 but pods still terminating.
			busy := ownedRS(d, "busy", "5", 0, 0, t0)
			busy.Name, busy.Status.Replicas = "busy", 1
			objs = append(objs, busy)
			f := newFixture(t, objs...)
			f.sync(t, "default/web")
			var deleted []string
			for _, a := range f.actions("delete", "replicasets", "") {
				da := a.(ktesting.DeleteAction)
				deleted = append(deleted, da.GetName())
				if pre := da.GetDeleteOptions().Preconditions; pre == nil || pre.UID == nil || *pre.UID == "" {
					t.Errorf("delete of %s without UID precondition", da.GetName())
				}
			}
			sort.Strings(deleted)
			if strings.Join(deleted, ",") != strings.Join(tc.deleted, ",") {
				t.Fatalf("deleted %v, want %v", deleted, tc.deleted)
			}
		})
	}
}

func TestPausedDeploymentIsNotRolledOut(t *testing.T) {
	d := newDeployment(3, "nginx:2")
	d.Spec.Paused = true
	old := ownedRS(d, "nginx:1", "1", 3, 3, t0)
	f := newFixture(t, d, old)
	f.sync(t, "default/web")
	if upd := f.rsUpdates(); len(upd) != 0 {
		t.Fatalf("paused deployment scaled %v", upd)
	}
	if n := len(f.actions("update", "deployments", "status")); n != 1 {
		t.Fatalf("%d status updates, want 1", n)
	}
}

func TestNameCollisionBumpsCollisionCount(t *testing.T) {
	d := newDeployment(1, "nginx:1")
	hash := TemplateHash(&d.Spec.Template, nil)
	// Someone else's ReplicaSet already has the name the template hashes to.
	squatter := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-" + hash, Namespace: "default", UID: "squatter"}}
	f := newFixture(t, d)
	if err := f.client.Tracker().Add(squatter); err != nil {
		t.Fatal(err)
	}
	if err := f.c.sync(context.Background(), "default/web"); err == nil {
		t.Fatal("sync succeeded despite the name collision")
	}
	st := f.actions("update", "deployments", "status")
	if len(st) != 1 {
		t.Fatalf("%d status updates, want 1", len(st))
	}
	cc := st[0].(ktesting.UpdateAction).GetObject().(*appsv1.Deployment).Status.CollisionCount
	if cc == nil || *cc != 1 {
		t.Fatalf("collisionCount %v, want 1", cc)
	}
	if TemplateHash(&d.Spec.Template, cc) == hash {
		t.Fatal("collisionCount does not change the hash")
	}
}

func cond(s appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

func TestStatus(t *testing.T) {
	for _, tc := range []struct {
		name                                                                 string
		replicas                                                             int32
		strategy                                                             appsv1.DeploymentStrategy
		newStatus                                                            appsv1.ReplicaSetStatus
		oldStatus                                                            []appsv1.ReplicaSetStatus
		wantReplicas, wantUpdated, wantReady, wantAvailable, wantUnavailable int32
		available                                                            corev1.ConditionStatus
		availableReason, progressingReason                                   string
	}{
		{
			name: "complete", replicas: 3, strategy: defaultRolling,
			newStatus:    appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3},
			wantReplicas: 3, wantUpdated: 3, wantReady: 3, wantAvailable: 3, wantUnavailable: 0,
			available: corev1.ConditionTrue, availableReason: "MinimumReplicasAvailable", progressingReason: "NewReplicaSetAvailable",
		},
		{
			name: "rolling, old replicas keep it available", replicas: 3, strategy: defaultRolling,
			newStatus:    appsv1.ReplicaSetStatus{Replicas: 1},
			oldStatus:    []appsv1.ReplicaSetStatus{{Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}},
			wantReplicas: 4, wantUpdated: 1, wantReady: 3, wantAvailable: 3, wantUnavailable: 1,
			available: corev1.ConditionTrue, availableReason: "MinimumReplicasAvailable", progressingReason: "ReplicaSetUpdated",
		},
		{
			name: "below minimum availability", replicas: 4, strategy: rolling(intstr.FromInt32(1), intstr.FromInt32(1)),
			newStatus:    appsv1.ReplicaSetStatus{Replicas: 4, ReadyReplicas: 3, AvailableReplicas: 2},
			wantReplicas: 4, wantUpdated: 4, wantReady: 3, wantAvailable: 2, wantUnavailable: 2,
			available: corev1.ConditionFalse, availableReason: "MinimumReplicasUnavailable", progressingReason: "ReplicaSetUpdated",
		},
		{
			name: "exactly at minimum availability", replicas: 4, strategy: rolling(intstr.FromInt32(1), intstr.FromInt32(1)),
			newStatus:    appsv1.ReplicaSetStatus{Replicas: 4, ReadyReplicas: 3, AvailableReplicas: 3},
			wantReplicas: 4, wantUpdated: 4, wantReady: 3, wantAvailable: 3, wantUnavailable: 1,
			available: corev1.ConditionTrue, availableReason: "MinimumReplicasAvailable", progressingReason: "ReplicaSetUpdated",
		},
		{
			name: "recreate needs every replica", replicas: 2, strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			newStatus:    appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 1, AvailableReplicas: 1},
			wantReplicas: 2, wantUpdated: 2, wantReady: 1, wantAvailable: 1, wantUnavailable: 1,
			available: corev1.ConditionFalse, availableReason: "MinimumReplicasUnavailable", progressingReason: "ReplicaSetUpdated",
		},
		{
			name: "scaling down: more available than wanted", replicas: 2, strategy: defaultRolling,
			newStatus:    appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3},
			wantReplicas: 3, wantUpdated: 3, wantReady: 3, wantAvailable: 3, wantUnavailable: 0,
			available: corev1.ConditionTrue, availableReason: "MinimumReplicasAvailable", progressingReason: "ReplicaSetUpdated",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment(tc.replicas, "x")
			d.Generation = 3
			d.Spec.Strategy = tc.strategy
			d.Status.CollisionCount = ptr.To[int32](2)
			newRS := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-new"}, Status: tc.newStatus}
			var old []*appsv1.ReplicaSet
			for _, s := range tc.oldStatus {
				old = append(old, &appsv1.ReplicaSet{Status: s})
			}
			s := Status(d, newRS, old)
			if s.Replicas != tc.wantReplicas || s.UpdatedReplicas != tc.wantUpdated || s.ReadyReplicas != tc.wantReady ||
				s.AvailableReplicas != tc.wantAvailable || s.UnavailableReplicas != tc.wantUnavailable {
				t.Errorf("counts %d/%d/%d/%d/%d, want %d/%d/%d/%d/%d", s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas,
					s.UnavailableReplicas, tc.wantReplicas, tc.wantUpdated, tc.wantReady, tc.wantAvailable, tc.wantUnavailable)
			}
			if s.ObservedGeneration != 3 || s.CollisionCount == nil || *s.CollisionCount != 2 {
				t.Errorf("observedGeneration %d collisionCount %v", s.ObservedGeneration, s.CollisionCount)
			}
			av, pr := cond(s, appsv1.DeploymentAvailable), cond(s, appsv1.DeploymentProgressing)
			if av == nil || av.Status != tc.available || av.Reason != tc.availableReason {
				t.Errorf("Available %+v, want %s/%s", av, tc.available, tc.availableReason)
			}
			if pr == nil || pr.Status != corev1.ConditionTrue || pr.Reason != tc.progressingReason || !strings.Contains(pr.Message, `"web-new"`) {
				t.Errorf("Progressing %+v, want True/%s", pr, tc.progressingReason)
			}
		})
	}
}

func TestStatusKeepsConditionTimes(t *testing.T) {
	d := newDeployment(1, "x")
	newRS := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-new"}, Status: appsv1.ReplicaSetStatus{Replicas: 1, AvailableReplicas: 1}}
	first := Status(d, newRS, nil)
	old := metav1.NewTime(t0)
	for i := range first.Conditions {
		first.Conditions[i].LastTransitionTime, first.Conditions[i].LastUpdateTime = old, old
	}
	d.Status = first
	again := Status(d, newRS, nil)
	for _, c := range again.Conditions {
		if !c.LastTransitionTime.Equal(&old) || !c.LastUpdateTime.Equal(&old) {
			t.Errorf("%s: times changed on an identical status: %v %v", c.Type, c.LastTransitionTime, c.LastUpdateTime)
		}
	}
	// A new reason with the same status: transition time kept, update time renewed.
	progressing := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-new"}, Status: appsv1.ReplicaSetStatus{Replicas: 0}}
	d.Spec.Replicas = ptr.To[int32](2)
	changed := cond(Status(d, progressing, nil), appsv1.DeploymentProgressing)
	if changed.Reason != "ReplicaSetUpdated" || !changed.LastTransitionTime.Equal(&old) || changed.LastUpdateTime.Equal(&old) {
		t.Errorf("progressing %+v: want transition time kept and update time renewed", changed)
	}
	// A status flip renews the transition time.
	av := cond(Status(d, progressing, nil), appsv1.DeploymentAvailable)
	if av.Status != corev1.ConditionFalse || av.LastTransitionTime.Equal(&old) {
		t.Errorf("available %+v: want False with a new transition time", av)
	}
}

func TestTemplateHash(t *testing.T) {
	a, b := template("nginx:1"), template("nginx:1")
	h := TemplateHash(&a, nil)
	if h != TemplateHash(&b, nil) || h != TemplateHash(&a, nil) {
		t.Fatal("hash not stable for equal templates")
	}
	if !regexp.MustCompile(`^[bcdfghjklmnpqrstvwxz2456789]+$`).MatchString(h) {
		t.Fatalf("hash %q is not a safe label value", h)
	}
	c := template("nginx:2")
	if TemplateHash(&c, nil) == h {
		t.Fatal("different templates hash the same")
	}
	if TemplateHash(&a, ptr.To[int32](1)) == h || TemplateHash(&a, ptr.To[int32](1)) == TemplateHash(&a, ptr.To[int32](2)) {
		t.Fatal("collisionCount does not change the hash")
	}
}

func TestEqualIgnoreHash(t *testing.T) {
	a := template("nginx:1")
	b := template("nginx:1")
	b.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "abc"
	if !EqualIgnoreHash(&a, &b) || !EqualIgnoreHash(&b, &a) {
		t.Fatal("templates differing only by the hash label are not equal")
	}
	if b.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != "abc" {
		t.Fatal("EqualIgnoreHash mutated its argument")
	}
	onlyHash := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: "x"}}}
	if !EqualIgnoreHash(&onlyHash, &corev1.PodTemplateSpec{}) {
		t.Fatal("a hash-only label set is not equal to no labels")
	}
	c := template("nginx:2")
	if EqualIgnoreHash(&a, &c) {
		t.Fatal("different images are equal")
	}
	d := template("nginx:1")
	d.Labels["extra"] = "y"
	if EqualIgnoreHash(&a, &d) {
		t.Fatal("different labels are equal")
	}
}

func TestRevision(t *testing.T) {
	rs := &appsv1.ReplicaSet{}
	if Revision(rs) != 0 {
		t.Fatal("no annotation should be revision 0")
	}
	rs.Annotations = map[string]string{RevisionAnnotation: "12"}
	if Revision(rs) != 12 {
		t.Fatal("revision 12 not parsed")
	}
	rs.Annotations[RevisionAnnotation] = "junk"
	if Revision(rs) != 0 {
		t.Fatal("junk revision not 0")
	}
}

func TestSyncMissingOrDeletingDeployment(t *testing.T) {
	f := newFixture(t)
	f.sync(t, "default/none")
	d := newDeployment(1, "x")
	ts := metav1.NewTime(t0)
	d.DeletionTimestamp = &ts
	f = newFixture(t, d)
	f.sync(t, "default/web")
	if acts := f.client.Actions(); len(acts) != 0 {
		t.Fatalf("actions for a deployment being deleted: %v", acts)
	}
}

// TestAdoptsOrphanReplicaSet: a ReplicaSet the selector matches and nobody controls (left by
// an orphaning delete, or made before the Deployment, as upstream's RollingUpdateDeployment
// conformance spec does) is adopted, and the new revision follows its revision.
func TestAdoptsOrphanReplicaSet(t *testing.T) {
	d := newDeployment(3, "nginx:2")
	orphan := ownedRS(d, "nginx:1", "3546343826724305832", 3, 3, t0)
	orphan.OwnerReferences = nil
	f := newFixture(t, d, orphan)
	f.sync(t, "default/web")
	var adopted bool
	for _, a := range f.actions("patch", "replicasets", "") {
		pa := a.(ktesting.PatchAction)
		adopted = adopted || (pa.GetName() == orphan.Name && strings.Contains(string(pa.GetPatch()), `"uid":"web-uid"`))
	}
	if !adopted {
		t.Fatalf("the orphan ReplicaSet was not adopted: %v", f.client.Actions())
	}
	creates := f.actions("create", "replicasets", "")
	if len(creates) != 1 {
		t.Fatalf("%d creations, want 1", len(creates))
	}
	if rev := creates[0].(ktesting.CreateAction).GetObject().(*appsv1.ReplicaSet).Annotations[RevisionAnnotation]; rev != "3546343826724305833" {
		t.Fatalf("new revision %q, want the adopted one's + 1", rev)
	}
}

// TestAdoptedReplicaSetWithoutAnnotations: an orphan ReplicaSet with no annotations at all
// (made by hand, as upstream's "should delete old replica sets" spec does) is adopted and
// scaled down as an old one without a panic.
func TestAdoptedReplicaSetWithoutAnnotations(t *testing.T) {
	d := newDeployment(1, "nginx:2")
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	orphan := ownedRS(d, "nginx:1", "", 1, 1, t0)
	orphan.OwnerReferences, orphan.Annotations = nil, nil
	f := newFixture(t, d, orphan)
	f.sync(t, "default/web")
	if got := f.lastReplicas(); got[orphan.Name] != 0 {
		t.Fatalf("the adopted old ReplicaSet: %v, want it scaled to 0", got)
	}
}

func TestInitialReplicas(t *testing.T) {
	recreate := func(d *appsv1.Deployment) *appsv1.Deployment {
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		return d
	}
	paused := newDeployment(4, "nginx:2")
	paused.Spec.Paused = true
	fresh := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "new"}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0)}}
	base := newDeployment(4, "nginx:2")
	for _, tc := range []struct {
		name string
		d    *appsv1.Deployment
		old  []*appsv1.ReplicaSet
		want int32
	}{
		{"rolling, nothing old", newDeployment(4, "nginx:2"), nil, 4},
		{"rolling, 4 old available: maxSurge 1", newDeployment(4, "nginx:2"), []*appsv1.ReplicaSet{ownedRS(base, "nginx:1", "1", 4, 4, t0)}, 1},
		{"paused", paused, nil, 0},
		{"recreate, nothing old", recreate(newDeployment(3, "nginx:2")), nil, 3},
		{"recreate, old scaled to 0 and gone", recreate(newDeployment(3, "nginx:2")), []*appsv1.ReplicaSet{ownedRS(base, "nginx:1", "1", 0, 0, t0)}, 3},
		{"recreate, old still has pods", recreate(newDeployment(3, "nginx:2")), []*appsv1.ReplicaSet{ownedRS(base, "nginx:1", "1", 3, 3, t0)}, 0},
	} {
		if got := initialReplicas(tc.d, fresh, tc.old); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// sized is a ReplicaSet of replicas (available of them) last sized for a deployment of
// desired replicas and max replicas with surge ("" leaves the annotation out).
func sized(name string, replicas, available int32, desired, maxReplicas string, created time.Time) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: metav1.NewTime(created),
		Annotations: map[string]string{}},
		Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)},
		Status: appsv1.ReplicaSetStatus{Replicas: replicas, AvailableReplicas: available}}
	if desired != "" {
		rs.Annotations[DesiredReplicasAnnotation] = desired
	}
	if maxReplicas != "" {
		rs.Annotations[MaxReplicasAnnotation] = maxReplicas
	}
	return rs
}

func TestPlanScale(t *testing.T) {
	surge3 := func(replicas int32) *appsv1.Deployment {
		d := newDeployment(replicas, "nginx:3")
		s, u := intstr.FromInt32(3), intstr.FromInt32(2)
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &s, MaxUnavailable: &u}}
		return d
	}
	recreate := newDeployment(5, "nginx:3")
	recreate.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	noAnnotations := surge3(30)
	noAnnotations.Status.Replicas = 13
	t1, t2 := t0.Add(time.Hour), t0.Add(2*time.Hour)
	for _, tc := range []struct {
		name  string
		d     *appsv1.Deployment
		newRS *appsv1.ReplicaSet
		old   []*appsv1.ReplicaSet
		want  Plan
	}{
		// Upstream's conformance spec "deployment should support proportional scaling": 10
		// replicas (maxSurge 3) mid-rollout as 8 old and 5 new, scaled to 30: 8+12 and 5+8.
		{"grow mid-rollout", surge3(30), sized("new", 5, 0, "10", "13", t1), []*appsv1.ReplicaSet{sized("old", 8, 8, "10", "13", t0)},
			Plan{"old": 20, "new": 13}},
		{"shrink mid-rollout", surge3(5), sized("new", 5, 0, "10", "13", t1), []*appsv1.ReplicaSet{sized("old", 8, 8, "10", "13", t0)},
			// allowed 8 of 13: old 8 -> round(8*8/13)=5 (-3), new 5 -> round(5*8/13)=3 (-2).
			Plan{"old": 5, "new": 3}},
		{"rounding leftover goes to the largest", surge3(11), sized("new", 4, 0, "10", "13", t1),
			[]*appsv1.ReplicaSet{sized("a", 5, 5, "10", "13", t0), sized("b", 4, 4, "10", "13", t2)},
			// allowed 14, 13 now: +1. a (largest): round(5*14/13)=5 -> +0; then among the 4s,
			// newer first when growing: b (t2): round(4*14/13)=4 -> +0, new (t1): +0; the 1
			// left over goes to a.
			Plan{"a": 6, "b": 4, "new": 4}},
		{"to zero", surge3(0), sized("new", 5, 0, "10", "13", t1), []*appsv1.ReplicaSet{sized("old", 8, 8, "10", "13", t0)},
			Plan{"old": 0, "new": 0}},
		{"missing annotation: measured against the deployment's pods", noAnnotations, sized("new", 5, 0, "10", "", t1),
			[]*appsv1.ReplicaSet{sized("old", 8, 8, "10", "", t0)}, Plan{"old": 20, "new": 13}},
		{"one active takes all", surge3(7), sized("new", 4, 4, "4", "7", t1), []*appsv1.ReplicaSet{sized("old", 0, 0, "4", "7", t0)},
			Plan{"new": 7}},
		{"none active: the new one", surge3(3), sized("new", 0, 0, "0", "3", t1), []*appsv1.ReplicaSet{sized("old", 0, 0, "0", "3", t0)},
			Plan{"new": 3}},
		{"saturated new one: the old go", surge3(4), sized("new", 4, 4, "4", "7", t1), []*appsv1.ReplicaSet{sized("old", 2, 2, "6", "9", t0)},
			Plan{"old": 0}},
		{"recreate with two active: left as they are", recreate, sized("new", 2, 0, "4", "4", t1), []*appsv1.ReplicaSet{sized("old", 2, 2, "4", "4", t0)},
			Plan{}},
	} {
		got := PlanScale(tc.d, tc.newRS, tc.old)
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestIsScalingEvent(t *testing.T) {
	d := newDeployment(30, "nginx:3")
	if !IsScalingEvent(d, []*appsv1.ReplicaSet{sized("old", 8, 8, "10", "13", t0)}) {
		t.Error("an active ReplicaSet sized for 10 of a deployment of 30: not a scaling event")
	}
	if IsScalingEvent(d, []*appsv1.ReplicaSet{sized("old", 0, 0, "10", "13", t0), sized("new", 30, 0, "30", "38", t0)}) {
		t.Error("only an inactive ReplicaSet sized for another count: a scaling event")
	}
	if IsScalingEvent(d, []*appsv1.ReplicaSet{sized("adopted", 3, 3, "", "", t0)}) {
		t.Error("no annotation: a scaling event")
	}
}

// A deployment resized mid-rollout shares the change among its ReplicaSets, as upstream,
// and takes no rollout step in that sync; once they carry the new size, the rollout goes on.
func TestSyncResizesProportionally(t *testing.T) {
	d := newDeployment(30, "nginx:2")
	s, u := intstr.FromInt32(3), intstr.FromInt32(2)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &s, MaxUnavailable: &u}}
	old := ownedRS(d, "nginx:1", "1", 8, 8, t0)
	newRS := ownedRS(d, "nginx:2", "2", 5, 0, t0.Add(time.Hour))
	for _, rs := range []*appsv1.ReplicaSet{old, newRS} {
		rs.Annotations[DesiredReplicasAnnotation], rs.Annotations[MaxReplicasAnnotation] = "10", "13"
	}
	f := newFixture(t, d, old, newRS)
	f.sync(t, "default/web")
	if n := len(f.actions("create", "replicasets", "")); n != 0 {
		t.Fatalf("%d creations in a resize", n)
	}
	got := f.lastReplicas()
	if got[old.Name] != 20 || got[newRS.Name] != 13 {
		t.Fatalf("resized to %v, want %s=20 %s=13", got, old.Name, newRS.Name)
	}
	for _, rs := range f.rsUpdates() {
		if rs.Annotations[DesiredReplicasAnnotation] != "30" || rs.Annotations[MaxReplicasAnnotation] != "33" {
			t.Errorf("%s annotated %v, want desired 30 and max 33", rs.Name, rs.Annotations)
		}
	}
	updated := f.rsUpdates()
	if IsScalingEvent(d, updated) {
		t.Fatal("still a scaling event after the resize")
	}
}
