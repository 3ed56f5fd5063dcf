package job

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

type fixture struct {
	c       *Controller
	client  *fake.Clientset
	factory informers.SharedInformerFactory
}

// newFixture builds the controller over a fake clientset seeded with objs, which are also
// put straight into the informer caches.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewSimpleClientset(objs...)
	var n atomic.Int32
	client.PrependReactor("create", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
		p := a.(ktesting.CreateAction).GetObject().(*corev1.Pod)
		if p.Name == "" && p.GenerateName != "" {
			p.Name = fmt.Sprintf("%s%05d", p.GenerateName, n.Add(1))
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory.Batch().V1().Jobs(), factory.Core().V1().Pods(), record.NewFakeRecorder(100), slog.New(slog.NewTextHandler(io.Discard, nil)))
	c.now = func() time.Time { return now }
	f := &fixture{c: c, client: client, factory: factory}
	for _, o := range objs {
		switch o := o.(type) {
		case *batchv1.Job:
			_ = factory.Batch().V1().Jobs().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			_ = factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
		}
	}
	return f
}

func TestSyncCreatesIndexedPodsAndWritesStatus(t *testing.T) {
	j := newJob(completionsParallelism(3, 2), indexed)
	j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"job": "j"}}
	j.Spec.Template.Labels = map[string]string{"job": "j"}
	f := newFixture(t, j)
	if err := f.c.sync(context.Background(), "ns/j"); err != nil {
		t.Fatal(err)
	}
	pods, _ := f.client.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	if len(pods.Items) != 2 {
		t.Fatalf("%d pods, want 2", len(pods.Items))
	}
	seen := map[string]bool{}
	for _, p := range pods.Items {
		idx := p.Annotations[CompletionIndex]
		seen[idx] = true
		if p.Labels[CompletionIndex] != idx || p.Spec.Hostname != "j-"+idx || len(p.Finalizers) != 1 || p.Finalizers[0] != Finalizer {
			t.Errorf("pod %s: labels %v hostname %q finalizers %v", p.Name, p.Labels, p.Spec.Hostname, p.Finalizers)
		}
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != j.UID || ref.Kind != "Job" {
			t.Errorf("pod %s owner %+v", p.Name, ref)
		}
		env := p.Spec.Containers[0].Env
		if len(env) != 1 || env[0].Name != "JOB_COMPLETION_INDEX" || env[0].ValueFrom.FieldRef.FieldPath != "metadata.annotations['"+CompletionIndex+"']" {
			t.Errorf("pod %s env %+v", p.Name, env)
		}
	}
	if !seen["0"] || !seen["1"] {
		t.Errorf("indexes %v, want 0 and 1", seen)
	}
	got, _ := f.client.BatchV1().Jobs("ns").Get(context.Background(), "j", metav1.GetOptions{})
	if got.Status.Active != 2 || got.Status.StartTime == nil {
		t.Errorf("status %+v", got.Status)
	}
}

// TestSyncCountsThenReleases: a succeeded pod is written to uncountedTerminatedPods before
// its finalizer is removed (the order that loses no count).
func TestSyncCountsThenReleases(t *testing.T) {
	j := newJob()
	j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"job": "j"}}
	j.Spec.Template.Labels = map[string]string{"job": "j"}
	done := mkPod("a", succeededPod)
	done.Labels = map[string]string{"job": "j"}
	done.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(j, jobKind)}
	f := newFixture(t, j, done)
	if err := f.c.sync(context.Background(), "ns/j"); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, a := range f.client.Actions() {
		switch {
		case a.GetResource().Resource == "jobs" && a.GetSubresource() == "status" && a.GetVerb() == "update":
			st := a.(ktesting.UpdateAction).GetObject().(*batchv1.Job).Status
			if len(st.UncountedTerminatedPods.Succeeded) != 1 {
				t.Errorf("status written without the uncounted pod: %+v", st.UncountedTerminatedPods)
			}
			order = append(order, "status")
		case a.GetResource().Resource == "pods" && a.GetVerb() == "patch":
			order = append(order, "release")
		}
	}
	if fmt.Sprint(order) != "[status release]" {
		t.Errorf("actions %v, want the status first, then the release", order)
	}
	p, _ := f.client.CoreV1().Pods("ns").Get(context.Background(), "a", metav1.GetOptions{})
	if len(p.Finalizers) != 0 {
		t.Errorf("finalizers %v left", p.Finalizers)
	}
}

func TestSyncReleasesPodsOfADeletedJob(t *testing.T) {
	orphan := mkPod("a", succeededPod)
	orphan.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "gone", UID: "x", Controller: ptr(true)}}
	f := newFixture(t, orphan)
	if err := f.c.sync(context.Background(), "ns/gone"); err != nil {
		t.Fatal(err)
	}
	p, _ := f.client.CoreV1().Pods("ns").Get(context.Background(), "a", metav1.GetOptions{})
	if len(p.Finalizers) != 0 {
		t.Errorf("a deleted job's pod keeps %v", p.Finalizers)
	}
}

func TestSyncLeavesJobsManagedByOthers(t *testing.T) {
	j := newJob()
	j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"job": "j"}}
	j.Spec.Template.Labels = map[string]string{"job": "j"}
	other := "example.com/custom-job-controller"
	j.Spec.ManagedBy = &other
	f := newFixture(t, j)
	if err := f.c.sync(context.Background(), "ns/j"); err != nil {
		t.Fatal(err)
	}
	for _, a := range f.client.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" && a.GetVerb() != "get" {
			t.Errorf("a Job managed by %s got %s %s", other, a.GetVerb(), a.GetResource().Resource)
		}
	}
}

func TestOrphanPodQueuesItsJob(t *testing.T) {
	j := newJob()
	j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"job": "j"}}
	f := newFixture(t, j)
	orphan := mkPod("o", noFinalizer)
	orphan.Labels = map[string]string{"job": "j"}
	f.c.podEvent(orphan)
	if n := f.c.loop.Len(); n != 1 {
		t.Errorf("queue length %d after an orphan matching the job, want 1", n)
	}
}

// A pod no Job controls loses the tracking finalizer (it was released, or its Job deleted
// with orphan propagation); nothing else would ever remove it.
func TestOrphanPodLosesTheFinalizer(t *testing.T) {
	orphan := mkPod("o")
	f := newFixture(t, orphan)
	f.c.podEvent(orphan)
	if err := f.c.sync(context.Background(), orphanPodPrefix+"ns/o"); err != nil {
		t.Fatal(err)
	}
	var patched bool
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "pods" {
			patched = true
		}
	}
	if !patched {
		t.Errorf("the orphan's finalizer was not removed: %v", f.client.Actions())
	}
}
