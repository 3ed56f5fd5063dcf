// Package job runs batch/v1 Jobs to completion: it creates pods from the template up to
// the parallelism (one per completion index for Indexed Jobs), counts their successes and
// failures through the batch.kubernetes.io/job-tracking finalizer so none is lost, backs
// off after failures, and ends the Job Complete or Failed (backoff limit, deadline, pod
// failure policy) as upstream's Job controller does. Decide is the decision, without I/O;
// this file applies it.
package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/skiff-sh/skiff/controlplane/controllers/expectations"
	"github.com/skiff-sh/skiff/controlplane/controllers/ownership"
	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's).
const Name = "job-controller"

var jobKind = batchv1.SchemeGroupVersion.WithKind("Job")

// Controller reconciles Jobs.
type Controller struct {
	client   kubernetes.Interface
	jobs     batchlisters.JobLister
	pods     corelisters.PodLister
	synced   []cache.InformerSynced
	recorder record.EventRecorder
	loop     *loop.Loop
	log      *slog.Logger
	now      func() time.Time
	// written is the resourceVersion of each Job's last status write by this controller,
	// until the Job cache shows it (see behind).
	writtenMu sync.Mutex
	written   map[string]statusWrite
	// exp holds each Job's pod creations until the pod informer shows them: a sync before
	// then sees an index without its pod and makes a second one (the FailIndex conformance
	// spec saw index 1 made twice within 20 ms, both failed: status.failed 2).
	exp *expectations.Expectations
}

type statusWrite struct {
	rv uint64
	at time.Time
}

// maxStatusWait bounds how long a sync waits for the cache to show its last status write.
const maxStatusWait = 5 * time.Second

// behind says whether the cached Job j is older than this controller's last status write to
// it. A sync must not act on such a Job: its own counts and failed indexes are not in it yet,
// while the pods it released are already without their finalizers — to it, counted long ago
// — so it would remake an index that has failed, or count a pod twice.
func (c *Controller) behind(key string, j *batchv1.Job) bool {
	c.writtenMu.Lock()
	defer c.writtenMu.Unlock()
	w, ok := c.written[key]
	if !ok {
		return false
	}
	cached, err := strconv.ParseUint(j.ResourceVersion, 10, 64)
	if err == nil && cached < w.rv && c.now().Sub(w.at) < maxStatusWait {
		return true
	}
	delete(c.written, key)
	return false
}

func (c *Controller) wrote(key string, j *batchv1.Job) {
	rv, err := strconv.ParseUint(j.ResourceVersion, 10, 64)
	if err != nil {
		return
	}
	c.writtenMu.Lock()
	defer c.writtenMu.Unlock()
	if c.written == nil {
		c.written = map[string]statusWrite{}
	}
	c.written[key] = statusWrite{rv: rv, at: c.now()}
}

// New wires the controller to Job and pod informers.
func New(client kubernetes.Interface, jobs batchinformers.JobInformer, pods coreinformers.PodInformer, recorder record.EventRecorder, log *slog.Logger) *Controller {
	c := &Controller{client: client, jobs: jobs.Lister(), pods: pods.Lister(), recorder: recorder, exp: expectations.New(),
		synced: []cache.InformerSynced{jobs.Informer().HasSynced, pods.Informer().HasSynced}, log: log.With("controller", Name), now: time.Now}
	c.loop = loop.New(Name, c.sync, log)
	_, _ = jobs.Informer().AddEventHandler(c.loop.Handler())
	_, _ = pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.podAdded(obj); c.podEvent(obj) },
		UpdateFunc: func(_, obj any) { c.podEvent(obj) },
		DeleteFunc: c.podEvent,
	})
	return c
}

// podAdded counts a new pod of a Job against the creations its sync expects.
func (c *Controller) podAdded(obj any) {
	if p, ok := obj.(*corev1.Pod); ok {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "Job" {
			c.exp.Created(p.Namespace+"/"+ref.Name, 1)
		}
	}
}

func (c *Controller) podEvent(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(p); ref != nil {
		if ref.Kind == "Job" {
			c.loop.Add(p.Namespace + "/" + ref.Name)
		}
		return
	}
	// An orphan with the tracking finalizer (released by its Job, or orphaned when the Job
	// was deleted with orphan propagation) must lose it, as upstream: no Job counts it now.
	if hasFinalizer(p) {
		c.loop.Add(orphanPodPrefix + p.Namespace + "/" + p.Name)
	}
	// An orphan: every Job whose selector matches it may adopt it.
	if p.DeletionTimestamp != nil {
		return
	}
	jobs, _ := c.jobs.Jobs(p.Namespace).List(labels.Everything())
	for _, j := range jobs {
		if sel, err := metav1.LabelSelectorAsSelector(j.Spec.Selector); err == nil && j.Spec.Selector != nil && !sel.Empty() && sel.Matches(labels.Set(p.Labels)) {
			c.loop.Add(j.Namespace + "/" + j.Name)
		}
	}
}

// ManagedBy is the spec.managedBy of the Jobs this controller reconciles (and of those
// that leave it unset); Jobs managed by anyone else are left to them.
const ManagedBy = "kubernetes.io/job-controller"

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	c.loop.Run(ctx, 5)
}

// orphanPodPrefix marks a queue key naming an orphan pod rather than a Job.
const orphanPodPrefix = "orphan-pod:"

func (c *Controller) sync(ctx context.Context, key string) error {
	if pod, ok := strings.CutPrefix(key, orphanPodPrefix); ok {
		return c.syncOrphanPod(ctx, pod)
	}
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	j, err := c.jobs.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.writtenMu.Lock()
		delete(c.written, key)
		c.writtenMu.Unlock()
		c.exp.Forget(key)
		// The Job is gone: its pods must not keep its finalizer, or they could never go.
		return c.releaseOrphans(ctx, ns, name)
	}
	if err != nil {
		return err
	}
	if c.behind(key, j) || !c.exp.Satisfied(key) {
		// The write's (or the pod's) event queues the Job again; this is in case it comes late.
		c.loop.AddAfter(key, 100*time.Millisecond)
		return nil
	}
	if j.Spec.ManagedBy != nil && *j.Spec.ManagedBy != ManagedBy {
		return nil
	}
	all, err := c.pods.Pods(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	pods, err := c.claim(ctx, j, all)
	if err != nil {
		return err
	}
	plan := Decide(j, pods, c.now())
	var errs []error
	for _, e := range plan.Events {
		c.recorder.Event(j, e[0], e[1], e[2])
	}
	if j.DeletionTimestamp == nil {
		for _, p := range plan.Delete {
			if err := c.client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
				continue
			}
			c.recorder.Eventf(j, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", p.Name)
		}
		c.exp.Expect(key, len(plan.Create), nil)
		for made, i := range plan.Create {
			pod := NewPod(j, i)
			if n, ok := plan.IndexFailures[i]; ok {
				pod.Annotations[IndexFailureCount] = strconv.Itoa(int(n))
			}
			p, err := c.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			if err != nil {
				c.exp.Created(key, len(plan.Create)-made) // these will not show
				if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
					return nil
				}
				c.recorder.Eventf(j, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
				errs = append(errs, err)
				break
			}
			c.recorder.Eventf(j, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", p.Name)
		}
	}
	// Counted before released: the pods recorded as uncounted are written to the status
	// first, so a crash between the two steps loses no count.
	if !apiequality.Semantic.DeepEqual(plan.Status, j.Status) {
		cp := j.DeepCopy()
		cp.Status = plan.Status
		updated, err := c.client.BatchV1().Jobs(ns).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		c.wrote(key, updated)
	}
	released := false
	for _, p := range append(plan.Uncount, plan.Release...) {
		if err := c.removeFinalizer(ctx, p); err != nil {
			errs = append(errs, err)
		}
		released = true
	}
	if released {
		c.loop.Add(key) // fold the released pods into the counts
	}
	if plan.RequeueAfter > 0 {
		c.loop.AddAfter(key, plan.RequeueAfter+100*time.Millisecond)
	}
	return errors.Join(errs...)
}

// claim adopts orphan pods the Job's selector matches and releases the ones that no longer
// match, as the other workload controllers do, returning the pods it controls.
func (c *Controller) claim(ctx context.Context, j *batchv1.Job, all []*corev1.Pod) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(j.Spec.Selector)
	if err != nil || j.Spec.Selector == nil {
		return nil, nil
	}
	return ownership.ClaimPods(ctx, c.client, j, jobKind, sel, all, nil)
}

// removeFinalizer takes the tracking finalizer off a pod with a JSON patch that tests the
// finalizer is still where it was, so a concurrent change is not overwritten.
func (c *Controller) removeFinalizer(ctx context.Context, p *corev1.Pod) error {
	for i, f := range p.Finalizers {
		if f != Finalizer {
			continue
		}
		path := "/metadata/finalizers/" + strconv.Itoa(i)
		patch, _ := json.Marshal([]map[string]any{{"op": "test", "path": path, "value": Finalizer}, {"op": "remove", "path": path}})
		_, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) && len(p.Finalizers) == 0 {
			return nil
		}
		return err
	}
	return nil
}

// releaseOrphans removes the finalizer from the pods of a deleted Job.
// syncOrphanPod takes the tracking finalizer off a pod that no Job controls (any longer);
// one adopted meanwhile is left to its Job.
func (c *Controller) syncOrphanPod(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	p, err := c.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if metav1.GetControllerOf(p) != nil || !hasFinalizer(p) {
		return nil
	}
	return c.removeFinalizer(ctx, p)
}

func (c *Controller) releaseOrphans(ctx context.Context, ns, name string) error {
	pods, err := c.pods.Pods(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.Kind != "Job" || ref.Name != name || !hasFinalizer(p) {
			continue
		}
		errs = append(errs, c.removeFinalizer(ctx, p))
	}
	return errors.Join(errs...)
}

// NewPod builds a pod from the Job's template, owned by it and carrying the tracking
// finalizer; for an Indexed Job (index >= 0) with its completion index in an annotation and
// a label, JOB_COMPLETION_INDEX in every container's environment, and a hostname
// <job>-<index> as upstream gives it.
func NewPod(j *batchv1.Job, index int) *corev1.Pod {
	t := j.Spec.Template.DeepCopy()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    j.Name + "-",
			Namespace:       j.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      []string{Finalizer},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, jobKind)},
		},
		Spec: t.Spec,
	}
	if index >= 0 {
		s := strconv.Itoa(index)
		p.GenerateName = fmt.Sprintf("%s-%d-", j.Name, index)
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Annotations[CompletionIndex] = s
		p.Labels[CompletionIndex] = s
		if p.Spec.Hostname == "" {
			p.Spec.Hostname = fmt.Sprintf("%s-%d", j.Name, index)
		}
		env := corev1.EnvVar{Name: "JOB_COMPLETION_INDEX", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			APIVersion: "v1", FieldPath: fmt.Sprintf("metadata.annotations['%s']", CompletionIndex)}}}
		for i := range p.Spec.InitContainers {
			p.Spec.InitContainers[i].Env = append(p.Spec.InitContainers[i].Env, env)
		}
		for i := range p.Spec.Containers {
			p.Spec.Containers[i].Env = append(p.Spec.Containers[i].Env, env)
		}
	}
	return p
}
