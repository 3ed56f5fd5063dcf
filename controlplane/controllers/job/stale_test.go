package job

import (
	"context"
	"strconv"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktesting "k8s.io/client-go/testing"
)

// A sync must not act on a cached Job older than its own last status write. The conformance
// spec "should mark indexes as failed when the FailIndex action is matched in podFailurePolicy"
// saw status.failed 2, want 1: a sync counted the failed pod of index 1, marked the index
// failed and released the pod's finalizer; the next sync still saw the Job without that status
// and the pod without its finalizer (so, to it, counted long ago), found index 1 with no pod
// and no failure, and made it a new pod, which failed too.
func TestSyncWaitsForItsOwnStatusWrite(t *testing.T) {
	failIndex := func(j *batchv1.Job) {
		j.Spec.BackoffLimit = nil
		j.Spec.BackoffLimitPerIndex = ptr(int32(1))
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailIndex,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{1}}}}}
		j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"job": "j"}}
		j.Spec.Template.Labels = map[string]string{"job": "j"}
	}
	j := newJob(completionsParallelism(2, 2), indexed, failIndex)
	j.ResourceVersion = "10"
	owned := func(p *corev1.Pod) {
		p.Labels = map[string]string{"job": "j"}
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}
	}
	running := mkPod("j-0", withIndex(0), owned)
	failed := mkPod("j-1", withIndex(1), owned, failedAt(now.Add(-10*time.Second)))
	f := newFixture(t, j, running, failed)
	rv := 10
	f.client.PrependReactor("update", "jobs", func(a ktesting.Action) (bool, runtime.Object, error) {
		rv++
		a.(ktesting.UpdateAction).GetObject().(*batchv1.Job).ResourceVersion = strconv.Itoa(rv)
		return false, nil, nil
	})

	// Sync 1 counts the failure (failedIndexes "1") and releases the pod's finalizer.
	if err := f.c.sync(context.Background(), "ns/j"); err != nil {
		t.Fatal(err)
	}
	written, err := f.client.BatchV1().Jobs("ns").Get(context.Background(), "j", metav1.GetOptions{})
	if err != nil || written.Status.FailedIndexes == nil || *written.Status.FailedIndexes != "1" {
		t.Fatalf("after the first sync: %+v %v", written.Status, err)
	}
	// The pod cache has seen the release; the Job cache has not seen the status write.
	released := failed.DeepCopy()
	released.Finalizers = nil
	if err := f.factory.Core().V1().Pods().Informer().GetIndexer().Update(released); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	if err := f.c.sync(context.Background(), "ns/j"); err != nil {
		t.Fatal(err)
	}
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
			t.Fatalf("a sync on a Job older than its own status write made a pod: %v", a)
		}
	}
	// Once the cache shows the write, the sync goes on (folding the released pod into the count).
	if err := f.factory.Batch().V1().Jobs().Informer().GetIndexer().Update(written); err != nil {
		t.Fatal(err)
	}
	if err := f.c.sync(context.Background(), "ns/j"); err != nil {
		t.Fatal(err)
	}
	got, _ := f.client.BatchV1().Jobs("ns").Get(context.Background(), "j", metav1.GetOptions{})
	if got.Status.Failed != 1 {
		t.Fatalf("status.failed %d, want 1", got.Status.Failed)
	}
}

// A sync must not act before the pod cache shows the pods the last one made: the FailIndex
// conformance spec saw index 1 made twice within 20 ms (the Job's own events queued a second
// sync at once), both pods failed, and status.failed was 2.
func TestSyncWaitsForThePodsItMade(t *testing.T) {
	selected := func(j *batchv1.Job) {
		j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"job": "j"}}
		j.Spec.Template.Labels = map[string]string{"job": "j"}
	}
	j := newJob(completionsParallelism(2, 2), indexed, selected)
	f := newFixture(t, j)
	creates := func() int {
		n := 0
		for _, a := range f.client.Actions() {
			if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
				n++
			}
		}
		return n
	}
	if err := f.c.sync(context.Background(), "ns/j"); err != nil {
		t.Fatal(err)
	}
	if n := creates(); n != 2 {
		t.Fatalf("the first sync made %d pods, want 2", n)
	}
	// The pod cache has not seen them: the next sync makes nothing.
	f.client.ClearActions()
	if err := f.c.sync(context.Background(), "ns/j"); err != nil {
		t.Fatal(err)
	}
	if n := creates(); n != 0 {
		t.Fatalf("a sync before the cache showed the pods it made made %d more", n)
	}
	// Once the informer shows them, syncs go on, and make nothing more either.
	list, _ := f.client.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	for i := range list.Items {
		if err := f.factory.Core().V1().Pods().Informer().GetIndexer().Add(&list.Items[i]); err != nil {
			t.Fatal(err)
		}
		f.c.podAdded(&list.Items[i]) // what the informer's add event does
	}
	if !f.c.exp.Satisfied("ns/j") {
		t.Fatal("both pods seen, and the creations still expected")
	}
	f.client.ClearActions()
	if err := f.c.sync(context.Background(), "ns/j"); err != nil {
		t.Fatal(err)
	}
	if n := creates(); n != 0 {
		t.Fatalf("a sync with both pods in the cache made %d more", n)
	}
}
