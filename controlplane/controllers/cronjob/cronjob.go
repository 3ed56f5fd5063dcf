// Package cronjob starts the Jobs of batch/v1 CronJobs on their cron schedules, as
// upstream's cronjob controller (v2): at each due start time (in spec.timeZone, or the
// controller's zone) it creates <cronjob>-<minutes since the epoch> from the job template,
// honouring suspend, startingDeadlineSeconds and the concurrency policy; it keeps
// status.active, lastScheduleTime and lastSuccessfulTime, prunes finished jobs beyond the
// history limits, and wakes each CronJob again at its next start time instead of polling.
//
// The decisions (which start time is due, what the concurrency policy allows, which jobs
// are surplus history) are pure functions in decide.go; this file does the API calls.
package cronjob

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's).
const Name = "cronjob-controller"

// Controller reconciles CronJobs.
type Controller struct {
	client   kubernetes.Interface
	cronjobs batchlisters.CronJobLister
	jobs     batchlisters.JobLister
	synced   []cache.InformerSynced
	recorder record.EventRecorder
	loop     *loop.Loop
	log      *slog.Logger
	now      func() time.Time
	// local is the zone of schedules without one: the process's, as upstream's
	// kube-controller-manager.
	local *time.Location
	// after queues a key for later: the loop's, or a test's record of it.
	after func(key string, d time.Duration)
}

// New wires the controller to CronJob and Job informers.
func New(client kubernetes.Interface, cronjobs batchinformers.CronJobInformer, jobs batchinformers.JobInformer, recorder record.EventRecorder, log *slog.Logger) *Controller {
	c := &Controller{client: client, cronjobs: cronjobs.Lister(), jobs: jobs.Lister(), recorder: recorder,
		synced: []cache.InformerSynced{cronjobs.Informer().HasSynced, jobs.Informer().HasSynced},
		log:    log.With("controller", Name), now: time.Now, local: time.Local}
	c.loop = loop.New(Name, c.sync, log)
	c.after = c.loop.AddAfter
	_, _ = cronjobs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.loop.Enqueue,
		UpdateFunc: c.cronJobUpdated,
		DeleteFunc: c.loop.Enqueue,
	})
	_, _ = jobs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.jobEvent,
		UpdateFunc: func(old, cur any) {
			// A job handed to another controller leaves its old CronJob's active list.
			if o, ok := old.(*batchv1.Job); ok {
				if n, ok := cur.(*batchv1.Job); ok && !apiequality.Semantic.DeepEqual(metav1.GetControllerOf(o), metav1.GetControllerOf(n)) {
					c.jobEvent(old)
				}
			}
			c.jobEvent(cur)
		},
		DeleteFunc: c.jobEvent,
	})
	return c
}

// cronJobUpdated syncs at once, except for a new schedule or time zone: that waits for its
// own next start time, as upstream, so editing the schedule does not start the start time
// the new schedule had "missed" since the last run.
func (c *Controller) cronJobUpdated(old, cur any) {
	o, ok1 := old.(*batchv1.CronJob)
	n, ok2 := cur.(*batchv1.CronJob)
	if ok1 && ok2 && (o.Spec.Schedule != n.Spec.Schedule || !ptr.Equal(o.Spec.TimeZone, n.Spec.TimeZone)) {
		if s, err := ParseSchedule(n, c.local); err == nil {
			if d := RequeueAfter(s, Earliest(n), c.now()); d > 0 {
				c.after(n.Namespace+"/"+n.Name, d)
				return
			}
		}
		// Unparseable or never due: the sync reports it.
	}
	c.loop.Enqueue(cur)
}

func (c *Controller) jobEvent(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(j); ref != nil && ref.Kind == "CronJob" {
		c.loop.Add(j.Namespace + "/" + ref.Name)
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
	cj, err := c.cronjobs.CronJobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	all, err := c.jobs.Jobs(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	var owned []*batchv1.Job
	for _, j := range all {
		if metav1.IsControlledBy(j, cj) {
			owned = append(owned, j)
		}
	}
	// The cache lists in no particular order; events and calls should not depend on it.
	sort.Slice(owned, func(a, b int) bool { return owned[a].Name < owned[b].Name })
	cp := cj.DeepCopy()
	c.pruneHistory(ctx, cp, owned)
	stale, runErr := c.track(ctx, cp, owned)
	if stale {
		// The API has a newer CronJob than the cache; its update event brings us back.
		return nil
	}
	var d Decision
	if runErr == nil {
		d = Decide(cp, c.now(), c.local)
		for _, e := range d.Events {
			c.recorder.Event(cj, e.Type, e.Reason, e.Message)
		}
		if d.Start != nil {
			runErr = c.start(ctx, cp, *d.Start, d.ReplaceActive)
		}
	}
	if !apiequality.Semantic.DeepEqual(cp.Status, cj.Status) {
		if _, err := c.client.BatchV1().CronJobs(ns).UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return errors.Join(runErr, err)
		}
	}
	if d.Requeue > 0 {
		c.after(key, d.Requeue)
	}
	return runErr
}

// track brings status.active and lastSuccessfulTime up to date with the CronJob's jobs. It
// reports stale when a job looked unexpected only because the cached CronJob is behind.
func (c *Controller) track(ctx context.Context, cj *batchv1.CronJob, owned []*batchv1.Job) (stale bool, err error) {
	seen := map[types.UID]bool{}
	var fresh *batchv1.CronJob
	for _, j := range owned {
		seen[j.UID] = true
		active := inActive(cj, j.UID)
		cond, finished := Finished(j)
		switch {
		case !finished && !active:
			// Created by us before a crash lost the status update, or the cache is behind our
			// own update: only the API can tell.
			if fresh == nil {
				if fresh, err = c.client.BatchV1().CronJobs(cj.Namespace).Get(ctx, cj.Name, metav1.GetOptions{}); err != nil {
					return false, err
				}
			}
			if inActive(fresh, j.UID) {
				return true, nil
			}
			c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnexpectedJob", "Saw a job that the controller did not create or forgot: %s", j.Name)
		case finished && active:
			removeActive(cj, j.UID)
			c.recorder.Eventf(cj, corev1.EventTypeNormal, "SawCompletedJob", "Saw completed job: %s, condition: %v", j.Name, cond)
		}
		if cond == batchv1.JobComplete && j.Status.CompletionTime != nil {
			if last := cj.Status.LastSuccessfulTime; last == nil || j.Status.CompletionTime.After(last.Time) {
				cj.Status.LastSuccessfulTime = j.Status.CompletionTime.DeepCopy()
			}
		}
	}
	// An active job missing from the cache may be one just created (the watch is behind) or
	// one deleted behind our back: ask the API, or the CronJob would wait on it forever.
	for _, r := range append([]corev1.ObjectReference(nil), cj.Status.Active...) {
		if seen[r.UID] {
			continue
		}
		j, err := c.client.BatchV1().Jobs(cj.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		if err != nil || j.UID != r.UID {
			removeActive(cj, r.UID)
			c.recorder.Eventf(cj, corev1.EventTypeNormal, "MissingJob", "Active job went missing: %v", r.Name)
		}
	}
	return false, nil
}

// pruneHistory deletes finished jobs beyond the history limits.
func (c *Controller) pruneHistory(ctx context.Context, cj *batchv1.CronJob, owned []*batchv1.Job) {
	for _, j := range HistoryToDelete(cj, owned) {
		// A failure is reported and retried at the next sync; it does not hold up starts.
		_ = c.deleteJob(ctx, cj, j.Name, j.UID)
	}
}

// deleteJob deletes a job of the CronJob (in the background: its pods follow through the
// garbage collector, as upstream) and drops it from status.active.
func (c *Controller) deleteJob(ctx context.Context, cj *batchv1.CronJob, name string, uid types.UID) error {
	err := c.client.BatchV1().Jobs(cj.Namespace).Delete(ctx, name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
		Preconditions:     &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedDelete", "Deleted job: %v", err)
		return err
	}
	removeActive(cj, uid)
	if err == nil {
		c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", name)
	}
	return nil
}

// start creates the job of a start time, first deleting the active ones under Replace,
// and records it in the status.
func (c *Controller) start(ctx context.Context, cj *batchv1.CronJob, scheduled time.Time, replace bool) error {
	if replace {
		for _, r := range append([]corev1.ObjectReference(nil), cj.Status.Active...) {
			if err := c.deleteJob(ctx, cj, r.Name, r.UID); err != nil {
				return fmt.Errorf("could not replace job %s/%s: %w", r.Namespace, r.Name, err)
			}
		}
	}
	want := NewJob(cj, scheduled)
	job, err := c.client.BatchV1().Jobs(cj.Namespace).Create(ctx, want, metav1.CreateOptions{})
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return err // nothing can be created there any more
	case apierrors.IsAlreadyExists(err):
		// Made by an earlier sync whose status update was lost, or by someone else.
		job, err = c.client.BatchV1().Jobs(cj.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !metav1.IsControlledBy(job, cj) || inActive(cj, job.UID) {
			return nil
		}
		c.log.Info("job already exists", "cronjob", cj.Namespace+"/"+cj.Name, "job", job.Name)
	case err != nil:
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedCreate", "Error creating job: %v", err)
		return err
	default:
		c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulCreate", "Created job %v", job.Name)
	}
	cj.Status.Active = append(cj.Status.Active, corev1.ObjectReference{
		Kind: "Job", APIVersion: batchv1.SchemeGroupVersion.String(),
		Namespace: job.Namespace, Name: job.Name, UID: job.UID, ResourceVersion: job.ResourceVersion,
	})
	cj.Status.LastScheduleTime = &metav1.Time{Time: scheduled}
	return nil
}

func inActive(cj *batchv1.CronJob, uid types.UID) bool {
	for _, r := range cj.Status.Active {
		if r.UID == uid {
			return true
		}
	}
	return false
}

func removeActive(cj *batchv1.CronJob, uid types.UID) {
	var kept []corev1.ObjectReference
	for _, r := range cj.Status.Active {
		if r.UID != uid {
			kept = append(kept, r)
		}
	}
	cj.Status.Active = kept
}
