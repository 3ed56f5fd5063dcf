// Package ttlafterfinished deletes finished Jobs whose spec.ttlSecondsAfterFinished has
// run out, as upstream's TTL-after-finished controller, so that one-off Jobs (and their
// pods) do not pile up: a Job that finished (Complete or Failed) at T with a TTL of N
// seconds is deleted in the foreground at T+N, its pods before it.
//
// It waits with the workqueue's AddAfter rather than polling, and before deleting it
// reads the Job again from the API: the cached copy may predate a TTL change or a
// replacement of the same name, and the delete is guarded by the UID and resourceVersion
// it checked.
package ttlafterfinished

import (
	"context"
	"log/slog"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's).
const Name = "ttl-after-finished-controller"

// Controller deletes expired finished Jobs.
type Controller struct {
	client kubernetes.Interface
	jobs   batchlisters.JobLister
	synced []cache.InformerSynced
	loop   *loop.Loop
	log    *slog.Logger
	now    func() time.Time
	// after queues a key for later: the loop's, or a test's record of it.
	after func(key string, d time.Duration)
}

// New wires the controller to a Job informer. It records no events, as upstream: the only
// object it could report on is the one it deletes.
func New(client kubernetes.Interface, jobs batchinformers.JobInformer, log *slog.Logger) *Controller {
	c := &Controller{client: client, jobs: jobs.Lister(), synced: []cache.InformerSynced{jobs.Informer().HasSynced},
		log: log.With("controller", Name), now: time.Now}
	c.loop = loop.New(Name, c.sync, log)
	c.after = c.loop.AddAfter
	// Deletions need no handling: a queued key of a gone Job syncs to nothing.
	_, _ = jobs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.jobEvent,
		UpdateFunc: func(_, cur any) { c.jobEvent(cur) },
	})
	return c
}

func (c *Controller) jobEvent(obj any) {
	if j, ok := obj.(*batchv1.Job); ok && NeedsCleanup(j) {
		c.loop.Enqueue(j)
	}
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	c.loop.Run(ctx, 5)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	j, err := c.jobs.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !c.expired(key, j) {
		return nil
	}
	// The cache said it expired; only the API's copy may be deleted on that ground.
	fresh, err := c.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !c.expired(key, fresh) {
		return nil
	}
	err = c.client.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationForeground),
		Preconditions:     &metav1.Preconditions{UID: &fresh.UID, ResourceVersion: &fresh.ResourceVersion},
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		// A Conflict means the Job changed after we read it: the retry reads it again.
		return err
	}
	c.log.Info("deleted job after its TTL", "job", key, "ttlSecondsAfterFinished", *fresh.Spec.TTLSecondsAfterFinished)
	return nil
}

// expired says whether j may be deleted now, queueing it for when it will be otherwise.
func (c *Controller) expired(key string, j *batchv1.Job) bool {
	if !NeedsCleanup(j) {
		return false
	}
	left, ok := TimeLeft(j, c.now())
	if !ok {
		// Nothing to count from; an update that records the time brings the Job back.
		c.log.Warn("finished job has no finish time, not cleaning it up", "job", key)
		return false
	}
	if ttl := time.Duration(*j.Spec.TTLSecondsAfterFinished) * time.Second; left > ttl {
		c.log.Warn("job finished in the future (clock skew?), cleanup deferred", "job", key, "left", left)
	}
	if left > 0 {
		c.after(key, left)
		return false
	}
	return true
}

// NeedsCleanup says whether the controller looks after j: it has a TTL, has finished and
// is not already being deleted.
func NeedsCleanup(j *batchv1.Job) bool {
	return j.DeletionTimestamp == nil && j.Spec.TTLSecondsAfterFinished != nil && finished(j) != nil
}

// finished returns the condition that ended j: Complete or Failed, True. SuccessCriteriaMet
// and FailureTarget come first while pods still terminate; TTL counts from the end.
func finished(j *batchv1.Job) *batchv1.JobCondition {
	for i, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// FinishTime is when j finished: its final condition's lastTransitionTime, else (for an
// object written without one) status.completionTime. ok is false for an unfinished Job or
// one with neither time.
func FinishTime(j *batchv1.Job) (time.Time, bool) {
	c := finished(j)
	switch {
	case c == nil:
		return time.Time{}, false
	case !c.LastTransitionTime.IsZero():
		return c.LastTransitionTime.Time, true
	case j.Status.CompletionTime != nil && !j.Status.CompletionTime.IsZero():
		return j.Status.CompletionTime.Time, true
	}
	return time.Time{}, false
}

// TimeLeft is how long j has until its TTL runs out, counted from its finish time; zero or
// less means it has expired. ok is false for a Job the controller leaves alone (see
// NeedsCleanup) and for one with no finish time.
func TimeLeft(j *batchv1.Job, now time.Time) (left time.Duration, ok bool) {
	if !NeedsCleanup(j) {
		return 0, false
	}
	at, ok := FinishTime(j)
	if !ok {
		return 0, false
	}
	return at.Add(time.Duration(*j.Spec.TTLSecondsAfterFinished) * time.Second).Sub(now), true
}
