// Package replicationcontroller keeps the number of running pods of every core/v1
// ReplicationController at spec.replicas, as upstream's replication manager: it creates pods
// from the template (controlled by the RC), adopts matching orphans and releases pods that
// stopped matching, deletes surplus pods in upstream's order, and reports replicas,
// fullyLabeled, ready and available counts and the ReplicaFailure condition in the status.
//
// Upstream runs RCs through its ReplicaSet controller, converting each RC to the ReplicaSet
// it is an older version of. skiff does the same for the pure parts — the replica diff and
// the status counts come from the replicaset package, fed a ReplicaSet view of the RC — and
// keeps here what an RC does differently: a map selector that falls back to the template's
// labels, a template that may be absent, the v1 ReplicationController owner reference,
// upstream's per-pod event messages and the ReplicaFailure condition.
package replicationcontroller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/skiff-sh/skiff/controlplane/controllers/expectations"
	"github.com/skiff-sh/skiff/controlplane/controllers/ownership"
	"github.com/skiff-sh/skiff/controlplane/controllers/podutil"
	"github.com/skiff-sh/skiff/controlplane/controllers/replicaset"
	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's, as upstream's).
const Name = "replication-controller"

// controllerKind is what the pods' controller references name.
var controllerKind = corev1.SchemeGroupVersion.WithKind("ReplicationController")

// Controller reconciles ReplicationControllers.
type Controller struct {
	client   kubernetes.Interface
	rcs      corelisters.ReplicationControllerLister
	pods     corelisters.PodLister
	synced   []cache.InformerSynced
	recorder record.EventRecorder
	exp      *expectations.Expectations
	loop     *loop.Loop
	log      *slog.Logger
	now      func() time.Time
}

// New wires the controller to ReplicationController and pod informers.
func New(client kubernetes.Interface, rcs coreinformers.ReplicationControllerInformer, pods coreinformers.PodInformer, recorder record.EventRecorder, log *slog.Logger) *Controller {
	c := &Controller{client: client, rcs: rcs.Lister(), pods: pods.Lister(), recorder: recorder, exp: expectations.New(),
		synced: []cache.InformerSynced{rcs.Informer().HasSynced, pods.Informer().HasSynced}, log: log.With("controller", Name), now: time.Now}
	c.loop = loop.New(Name, c.sync, log)
	_, _ = rcs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.loop.Enqueue,
		UpdateFunc: func(old, obj any) {
			o, n := old.(*corev1.ReplicationController), obj.(*corev1.ReplicationController)
			if o.UID != n.UID {
				// Deleted and recreated under the same name between two events: what the old
				// one was waiting for is not the new one's business.
				c.exp.Forget(n.Namespace + "/" + n.Name)
			}
			c.loop.Enqueue(obj)
		},
		DeleteFunc: c.loop.Enqueue,
	})
	_, _ = pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			// A pod already being deleted when first seen (after a restart) is a deletion to
			// observe, not a creation.
			p, ok := obj.(*corev1.Pod)
			c.podEvent(obj, ok && p.DeletionTimestamp == nil, ok && p.DeletionTimestamp != nil)
		},
		UpdateFunc: func(old, obj any) {
			o, n := old.(*corev1.Pod), obj.(*corev1.Pod)
			if o.ResourceVersion == n.ResourceVersion {
				return // a resync: nothing changed
			}
			if oref, nref := metav1.GetControllerOf(o), metav1.GetControllerOf(n); oref != nil && (nref == nil || nref.UID != oref.UID) {
				// Released or taken over: the previous controller recounts without it.
				if rc := c.resolve(o.Namespace, oref); rc != nil {
					c.loop.Add(rc.Namespace + "/" + rc.Name)
				}
			}
			if o.DeletionTimestamp == nil && n.DeletionTimestamp != nil {
				// A graceful deletion has begun: that is the deletion the RC waits for; the
				// pod stops counting now, not when the kubelet is done with it.
				c.podEvent(obj, false, true)
				return
			}
			c.podEvent(obj, false, false)
			// A pod that just became ready becomes available only after minReadySeconds, and
			// nothing else will say so.
			if !podutil.IsReady(o) && podutil.IsReady(n) {
				if ref := metav1.GetControllerOf(n); ref != nil {
					if rc := c.resolve(n.Namespace, ref); rc != nil && rc.Spec.MinReadySeconds > 0 {
						c.loop.AddAfter(rc.Namespace+"/"+rc.Name, time.Duration(rc.Spec.MinReadySeconds)*time.Second+time.Second)
					}
				}
			}
		},
		DeleteFunc: func(obj any) { c.podEvent(obj, false, true) },
	})
	return c
}

// resolve returns the RC a controller reference points to, if it is still that one: the
// name alone may belong to a newer RC by now.
func (c *Controller) resolve(ns string, ref *metav1.OwnerReference) *corev1.ReplicationController {
	if ref.Kind != controllerKind.Kind {
		return nil
	}
	rc, err := c.rcs.ReplicationControllers(ns).Get(ref.Name)
	if err != nil || rc.UID != ref.UID {
		return nil
	}
	return rc
}

// podEvent queues the RC a pod belongs to, counting the creation or deletion against its
// expectations; an orphan queues every RC that could adopt it.
func (c *Controller) podEvent(obj any, created, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		// Nobody adopts a pod on its way out.
		if deleted || p.DeletionTimestamp != nil {
			return
		}
		rcs, _ := c.rcs.ReplicationControllers(p.Namespace).List(labels.Everything())
		for _, rc := range rcs {
			if Selector(rc).Matches(labels.Set(p.Labels)) {
				c.loop.Add(rc.Namespace + "/" + rc.Name)
			}
		}
		return
	}
	rc := c.resolve(p.Namespace, ref)
	if rc == nil {
		return
	}
	key := rc.Namespace + "/" + rc.Name
	if created {
		c.exp.Created(key, 1)
	}
	if deleted {
		c.exp.Deleted(key, p.UID)
	}
	c.loop.Add(key)
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
	rc, err := c.rcs.ReplicationControllers(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.exp.Forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	if len(selectorSet(rc)) == 0 {
		// The API defaults an empty selector to the template's labels and refuses an RC with
		// neither; one stored without both would match no pod and create pods forever.
		c.log.Warn("replication controller selects no pods; not managing it", "key", key)
		return nil
	}
	// Read before listing pods, as upstream: a pod event landing in between leaves this sync
	// acting on a cache that already holds the pod, never the other way round.
	satisfied := c.exp.Satisfied(key)
	all, err := c.pods.Pods(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	// Only active pods are claimed and counted, as upstream: a finished or terminating pod is
	// neither adopted nor released, and does not stand in for a replica.
	var candidates []*corev1.Pod
	for _, p := range all {
		if podutil.IsActive(p) {
			candidates = append(candidates, p)
		}
	}
	active, err := c.claim(ctx, rc, candidates)
	if err != nil {
		return err
	}
	var manageErr error
	if satisfied && rc.DeletionTimestamp == nil {
		manageErr = c.manage(ctx, key, rc, active)
	}
	now := c.now()
	status := ComputeStatus(rc, active, manageErr, now)
	if !apiequality.Semantic.DeepEqual(status, rc.Status) {
		cp := rc.DeepCopy()
		cp.Status = status
		if _, err := c.client.CoreV1().ReplicationControllers(ns).UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return errors.Join(manageErr, err)
		}
	}
	if manageErr != nil {
		return manageErr
	}
	if d, ok := nextAvailabilityCheck(rc.Spec.MinReadySeconds, active, now); ok {
		c.loop.AddAfter(key, d)
	}
	return nil
}

// claim adopts the orphans the RC's selector matches and releases the pods it controls that
// no longer match, and returns the pods it then controls.
func (c *Controller) claim(ctx context.Context, rc *corev1.ReplicationController, pods []*corev1.Pod) ([]*corev1.Pod, error) {
	// Before the first adoption, a fresh read that the RC still exists, is the same one and
	// is not being deleted, as upstream: the cached copy may lag a deletion, and pods adopted
	// by a deleted RC would only be collected along with it. The error is deliberately not an
	// API status: ownership.Apply would take a NotFound for "this pod is gone" and carry on.
	canAdopt := func() error {
		fresh, err := c.client.CoreV1().ReplicationControllers(rc.Namespace).Get(ctx, rc.Name, metav1.GetOptions{})
		switch {
		case err != nil:
			return fmt.Errorf("cannot adopt pods for %s/%s: %v", rc.Namespace, rc.Name, err)
		case fresh.UID != rc.UID:
			return fmt.Errorf("original ReplicationController %s/%s is gone: got uid %v, wanted %v", rc.Namespace, rc.Name, fresh.UID, rc.UID)
		case fresh.DeletionTimestamp != nil:
			return fmt.Errorf("ReplicationController %s/%s has just been deleted at %v", rc.Namespace, rc.Name, fresh.DeletionTimestamp)
		}
		return nil
	}
	return ownership.ClaimPods(ctx, c.client, rc, controllerKind, Selector(rc), pods, canAdopt)
}

// manage creates or deletes pods to bring the active ones to spec.replicas.
func (c *Controller) manage(ctx context.Context, key string, rc *corev1.ReplicationController, active []*corev1.Pod) error {
	diff := replicaset.Diff(asReplicaSet(rc), len(active))
	switch {
	case diff > 0:
		c.exp.Expect(key, diff, nil)
		created, err := slowStart(diff, func() error { return c.createPod(ctx, key, rc) })
		// Failed and untried creations will never show up in the informer.
		if missing := diff - created; missing > 0 {
			c.exp.Created(key, missing)
		}
		return err
	case diff < 0:
		victims := append([]*corev1.Pod(nil), active...)
		podutil.SortForDeletion(victims)
		victims = victims[:-diff]
		uids := make([]types.UID, len(victims))
		for i, p := range victims {
			uids[i] = p.UID
		}
		c.exp.Expect(key, 0, uids)
		errs := make([]error, len(victims))
		var wg sync.WaitGroup
		for i, p := range victims {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.deletePod(ctx, rc, p); err != nil {
					c.exp.Deleted(key, p.UID)
					if !apierrors.IsNotFound(err) {
						errs[i] = err
					}
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	return nil
}

// createPod creates one pod from the template and records upstream's event for it.
func (c *Controller) createPod(ctx context.Context, key string, rc *corev1.ReplicationController) error {
	pod := NewPod(rc)
	if len(pod.Labels) == 0 {
		// As upstream: a pod without labels could never be matched back to its RC.
		return errors.New("unable to create pods, no labels")
	}
	created, err := c.client.CoreV1().Pods(rc.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			// Every creation fails while the namespace, and the RC with it, goes away: not a
			// failure worth an event or a condition (as upstream). No pod will show either.
			c.exp.Created(key, 1)
			return nil
		}
		c.recorder.Eventf(rc, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
		return err
	}
	c.recorder.Eventf(rc, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", created.Name)
	return nil
}

// deletePod deletes one pod, guarded by its UID so a same-named replacement survives.
func (c *Controller) deletePod(ctx context.Context, rc *corev1.ReplicationController, p *corev1.Pod) error {
	err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if apierrors.IsNotFound(err) {
		return err // already gone: what was wanted, no event
	}
	if err != nil {
		c.recorder.Eventf(rc, corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
		return fmt.Errorf("unable to delete pods: %w", err)
	}
	c.recorder.Eventf(rc, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", p.Name)
	return nil
}

// slowStart calls fn count times in batches of 1, 2, 4..., stopping after the first batch
// with a failure, and returns how many calls succeeded. A template that cannot make pods (a
// quota, an admission denial) so fails once instead of count times, as upstream.
func slowStart(count int, fn func() error) (int, error) {
	done := 0
	for batch := min(count, 1); batch > 0; batch = min(2*batch, count-done) {
		errs := make(chan error, batch)
		var wg sync.WaitGroup
		for i := 0; i < batch; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := fn(); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		done += batch - len(errs)
		if err := <-errs; err != nil {
			return done, err
		}
	}
	return done, nil
}

// selectorSet is the RC's selector map, or its template's labels when that is empty.
func selectorSet(rc *corev1.ReplicationController) labels.Set {
	if len(rc.Spec.Selector) > 0 {
		return rc.Spec.Selector
	}
	if rc.Spec.Template != nil {
		return rc.Spec.Template.Labels
	}
	return nil
}

// Selector is the RC's pod selector: spec.selector, or the template's labels when the
// selector is empty (API defaulting does this on create; an RC stored without it is still
// handled). An RC with neither selects nothing — never everything.
func Selector(rc *corev1.ReplicationController) labels.Selector {
	set := selectorSet(rc)
	if len(set) == 0 {
		return labels.Nothing()
	}
	return labels.SelectorFromSet(set)
}

// asReplicaSet views the RC as the ReplicaSet it is an older version of, carrying just what
// replicaset.Diff and replicaset.ComputeStatus read.
func asReplicaSet(rc *corev1.ReplicationController) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: rc.Namespace, Name: rc.Name, UID: rc.UID, Generation: rc.Generation},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        rc.Spec.Replicas,
			MinReadySeconds: rc.Spec.MinReadySeconds,
			Selector:        &metav1.LabelSelector{MatchLabels: selectorSet(rc)},
		},
	}
	if rc.Spec.Template != nil {
		rs.Spec.Template.Labels = rc.Spec.Template.Labels
	}
	return rs
}

// NewPod builds a pod from the RC's template, controlled by the RC.
func NewPod(rc *corev1.ReplicationController) *corev1.Pod {
	var t corev1.PodTemplateSpec
	if rc.Spec.Template != nil {
		t = *rc.Spec.Template.DeepCopy()
	}
	// The dash makes generated names read <rc>-<suffix>, unless it would make the prefix
	// longer than a name may be (upstream's rule).
	prefix := rc.Name + "-"
	if len(prefix) > validation.DNS1123SubdomainMaxLength {
		prefix = rc.Name
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    prefix,
			Namespace:       rc.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rc, controllerKind)},
		},
		Spec: t.Spec,
	}
}

// ComputeStatus derives an RC's status from the active pods it controls (as they were before
// this sync created or deleted any, as upstream) and the error, if any, from managing them.
// A failure sets the ReplicaFailure condition — FailedCreate when pods were missing,
// FailedDelete when there were too many — and keeps an existing one as it is, so its
// transition time stays the first failure's; a sync without a failure removes it.
func ComputeStatus(rc *corev1.ReplicationController, active []*corev1.Pod, manageErr error, now time.Time) corev1.ReplicationControllerStatus {
	rs := asReplicaSet(rc)
	counts := replicaset.ComputeStatus(rs, active, now)
	s := corev1.ReplicationControllerStatus{
		Replicas:             counts.Replicas,
		FullyLabeledReplicas: counts.FullyLabeledReplicas,
		ReadyReplicas:        counts.ReadyReplicas,
		AvailableReplicas:    counts.AvailableReplicas,
		ObservedGeneration:   rc.Generation,
	}
	failed := false
	for _, cond := range rc.Status.Conditions {
		if cond.Type == corev1.ReplicationControllerReplicaFailure {
			failed = true
			if manageErr == nil {
				continue
			}
		}
		s.Conditions = append(s.Conditions, cond)
	}
	if manageErr != nil && !failed {
		var reason string
		switch d := replicaset.Diff(rs, int(counts.Replicas)); {
		case d > 0:
			reason = "FailedCreate"
		case d < 0:
			reason = "FailedDelete"
		}
		s.Conditions = append(s.Conditions, corev1.ReplicationControllerCondition{
			Type:               corev1.ReplicationControllerReplicaFailure,
			Status:             corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now),
			Reason:             reason,
			Message:            manageErr.Error(),
		})
	}
	return s
}

// nextAvailabilityCheck is when to look again at an RC whose ready pods are not all available
// yet: no pod event marks the moment minReadySeconds runs out. As upstream: when the first of
// them gets there, or after minReadySeconds if that cannot be told.
func nextAvailabilityCheck(minReadySeconds int32, active []*corev1.Pod, now time.Time) (time.Duration, bool) {
	if minReadySeconds <= 0 {
		return 0, false
	}
	wait := time.Duration(minReadySeconds) * time.Second
	var next time.Duration
	pending := false
	for _, p := range active {
		if !podutil.IsReady(p) || podutil.IsAvailable(p, minReadySeconds, now) {
			continue
		}
		if !pending {
			next, pending = wait, true
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && !cond.LastTransitionTime.IsZero() {
				if d := cond.LastTransitionTime.Add(wait).Sub(now); d > 0 && d < next {
					next = d
				}
			}
		}
	}
	return next, pending
}
