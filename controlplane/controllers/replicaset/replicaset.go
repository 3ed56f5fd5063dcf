// Package replicaset keeps the number of running pods of every ReplicaSet at spec.replicas:
// it creates pods from the template (owned by the ReplicaSet), deletes surplus ones in
// upstream's order, and reports replicas, ready and available counts in the status.
package replicaset

import (
	"context"
	"errors"
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
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/skiff-sh/skiff/controlplane/controllers/expectations"
	"github.com/skiff-sh/skiff/controlplane/controllers/ownership"
	"github.com/skiff-sh/skiff/controlplane/controllers/podindex"
	"github.com/skiff-sh/skiff/controlplane/controllers/podutil"
	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's).
const Name = "replicaset-controller"

// burst caps the pods created or deleted in one sync, as upstream's burstReplicas.
const burst = 500

// Controller reconciles ReplicaSets.
type Controller struct {
	// podIndex finds pods by controller and by label (podindex).
	podIndex podindex.Lister
	client   kubernetes.Interface
	rsLister appslisters.ReplicaSetLister
	pods     corelisters.PodLister
	synced   []cache.InformerSynced
	recorder record.EventRecorder
	exp      *expectations.Expectations
	loop     *loop.Loop
	log      *slog.Logger
	now      func() time.Time
}

// New wires the controller to ReplicaSet and pod informers.
func New(client kubernetes.Interface, rs appsinformers.ReplicaSetInformer, pods coreinformers.PodInformer, recorder record.EventRecorder, log *slog.Logger) *Controller {
	_ = podindex.Add(pods.Informer()) // without it, the lookups list the namespace
	c := &Controller{client: client, rsLister: rs.Lister(), pods: pods.Lister(), recorder: recorder, exp: expectations.New(),
		podIndex: podindex.Lister{Indexer: pods.Informer().GetIndexer()},
		synced:   []cache.InformerSynced{rs.Informer().HasSynced, pods.Informer().HasSynced}, log: log.With("controller", Name), now: time.Now}
	c.loop = loop.New(Name, c.sync, log)
	_, _ = rs.Informer().AddEventHandler(c.loop.Handler())
	_, _ = pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.podEvent(obj, true, false) },
		UpdateFunc: func(old, obj any) {
			o, n := old.(*corev1.Pod), obj.(*corev1.Pod)
			if o.DeletionTimestamp == nil && n.DeletionTimestamp != nil {
				c.podEvent(obj, false, true)
				return
			}
			c.podEvent(obj, false, false)
			// A pod becoming available later than its readiness change needs another look.
			if n.Status.Phase != o.Status.Phase || podutil.IsReady(n) != podutil.IsReady(o) {
				if ref := metav1.GetControllerOf(n); ref != nil && ref.Kind == "ReplicaSet" {
					if rs, err := c.rsLister.ReplicaSets(n.Namespace).Get(ref.Name); err == nil && rs.Spec.MinReadySeconds > 0 {
						c.loop.AddAfter(n.Namespace+"/"+ref.Name, time.Duration(rs.Spec.MinReadySeconds)*time.Second+time.Second)
					}
				}
			}
		},
		DeleteFunc: func(obj any) { c.podEvent(obj, false, true) },
	})
	return c
}

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
		// An orphan: every ReplicaSet whose selector matches it may adopt it.
		if p.DeletionTimestamp != nil {
			return
		}
		sets, _ := c.rsLister.ReplicaSets(p.Namespace).List(labels.Everything())
		for _, rs := range sets {
			if sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector); err == nil && !sel.Empty() && sel.Matches(labels.Set(p.Labels)) {
				c.loop.Add(rs.Namespace + "/" + rs.Name)
			}
		}
		return
	}
	if ref.Kind != "ReplicaSet" {
		return
	}
	key := p.Namespace + "/" + ref.Name
	if created {
		c.exp.Created(key, 1)
	}
	if deleted {
		// By UID: a pod's deletion is seen twice (deletionTimestamp, then removal).
		c.exp.Deleted(key, p.UID)
	}
	c.loop.Add(key)
}

// claim adopts the orphan pods the ReplicaSet's selector matches and releases the ones it
// controls that no longer match, as upstream, and returns the pods it then controls.
func (c *Controller) claim(ctx context.Context, rs *appsv1.ReplicaSet, all []*corev1.Pod) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		return nil, nil // invalid selectors are refused by validation; nothing to claim
	}
	return ownership.ClaimPods(ctx, c.client, rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), sel, all, nil)
}

// candidates are the pods a claim can concern: those rs controls (it may have to release
// them) and those its selector's matchLabels select (it may adopt the orphans among them);
// pods controlled by others are never claimed. Found through the pod indexes, not by
// listing the namespace: O(the ReplicaSet's pods), as upstream's owner index makes it.
func (c *Controller) candidates(rs *appsv1.ReplicaSet) ([]*corev1.Pod, error) {
	owned, err := c.podIndex.Controlled(rs.Namespace, rs.UID)
	if err != nil {
		return nil, err
	}
	var match map[string]string
	if rs.Spec.Selector != nil {
		match = rs.Spec.Selector.MatchLabels
	}
	selected, err := c.podIndex.Selected(rs.Namespace, match)
	if err != nil {
		return nil, err
	}
	seen := make(map[types.UID]bool, len(owned))
	for _, p := range owned {
		seen[p.UID] = true
	}
	for _, p := range selected {
		if !seen[p.UID] {
			owned = append(owned, p)
		}
	}
	return owned, nil
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
	rs, err := c.rsLister.ReplicaSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.exp.Forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	all, err := c.candidates(rs)
	if err != nil {
		return err
	}
	claimed, err := c.claim(ctx, rs, all)
	if err != nil {
		return err
	}
	var owned, active []*corev1.Pod
	for _, p := range claimed {
		owned = append(owned, p)
		if podutil.IsActive(p) {
			active = append(active, p)
		}
	}
	var manageErr error
	if rs.DeletionTimestamp == nil && c.exp.Satisfied(key) {
		manageErr = c.manage(ctx, key, rs, active)
	}
	status := ComputeStatus(rs, owned, c.now())
	if !apiequality.Semantic.DeepEqual(status, rs.Status) {
		cp := rs.DeepCopy()
		cp.Status = status
		if _, err := c.client.AppsV1().ReplicaSets(ns).UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return errors.Join(manageErr, err)
		}
	}
	if manageErr == nil && rs.Spec.MinReadySeconds > 0 && status.ReadyReplicas != status.AvailableReplicas {
		c.loop.AddAfter(key, time.Duration(rs.Spec.MinReadySeconds)*time.Second)
	}
	return manageErr
}

// Diff is how many pods to create (positive) or delete (negative).
func Diff(rs *appsv1.ReplicaSet, active int) int {
	want := 1
	if rs.Spec.Replicas != nil {
		want = int(*rs.Spec.Replicas)
	}
	d := want - active
	return max(min(d, burst), -burst)
}

func (c *Controller) manage(ctx context.Context, key string, rs *appsv1.ReplicaSet, active []*corev1.Pod) error {
	diff := Diff(rs, len(active))
	switch {
	case diff > 0:
		c.exp.Expect(key, diff, nil)
		// Slow start: 1, 2, 4... so a template that cannot create pods fails fast.
		created, batch := 0, 1
		for created < diff {
			n := min(batch, diff-created)
			errs := make(chan error, n)
			var wg sync.WaitGroup
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := c.client.CoreV1().Pods(rs.Namespace).Create(ctx, NewPod(rs), metav1.CreateOptions{})
					if err != nil {
						c.exp.Created(key, 1)
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			if err := <-errs; err != nil {
				c.exp.Created(key, diff-created-n) // the rest will not be created now
				c.recorder.Eventf(rs, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
				return err
			}
			created += n
			batch *= 2
		}
		c.recorder.Eventf(rs, corev1.EventTypeNormal, "SuccessfulCreate", "Created %d pod(s)", created)
	case diff < 0:
		victims := append([]*corev1.Pod(nil), active...)
		podutil.SortForDeletion(victims)
		victims = victims[:-diff]
		uids := make([]types.UID, len(victims))
		for i, p := range victims {
			uids[i] = p.UID
		}
		c.exp.Expect(key, 0, uids)
		var errs []error
		for _, p := range victims {
			err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
			if err != nil {
				c.exp.Deleted(key, p.UID)
				if !apierrors.IsNotFound(err) {
					errs = append(errs, err)
				}
				continue
			}
			c.recorder.Eventf(rs, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", p.Name)
		}
		return errors.Join(errs...)
	}
	return nil
}

// NewPod builds a pod from the ReplicaSet's template, owned by it.
func NewPod(rs *appsv1.ReplicaSet) *corev1.Pod {
	t := rs.Spec.Template.DeepCopy()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    rs.Name + "-",
			Namespace:       rs.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))},
		},
		Spec: t.Spec,
	}
}

// ComputeStatus derives a ReplicaSet's status from its pods.
func ComputeStatus(rs *appsv1.ReplicaSet, owned []*corev1.Pod, now time.Time) appsv1.ReplicaSetStatus {
	s := appsv1.ReplicaSetStatus{ObservedGeneration: rs.Generation, Conditions: rs.Status.Conditions}
	sel, _ := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	tmplLabels := labels.Set(rs.Spec.Template.Labels)
	for _, p := range owned {
		if !podutil.IsActive(p) {
			if p.DeletionTimestamp != nil {
				n := int32(1)
				if s.TerminatingReplicas == nil {
					s.TerminatingReplicas = new(int32)
				}
				*s.TerminatingReplicas += n
			}
			continue
		}
		s.Replicas++
		if sel != nil && sel.Matches(labels.Set(p.Labels)) && tmplLabels.AsSelector().Matches(labels.Set(p.Labels)) {
			s.FullyLabeledReplicas++
		}
		if podutil.IsReady(p) {
			s.ReadyReplicas++
			if podutil.IsAvailable(p, rs.Spec.MinReadySeconds, now) {
				s.AvailableReplicas++
			}
		}
	}
	return s
}
