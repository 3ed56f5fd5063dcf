// Package deployment rolls Deployments out through ReplicaSets, as upstream's deployment
// controller: one ReplicaSet per pod template (named <deployment>-<pod-template-hash>), the
// rolling-update and recreate strategies, revision annotations that `kubectl rollout
// history|undo` read, the revision history limit, and the status and conditions that
// `kubectl rollout status` waits on.
package deployment

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

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

	"github.com/skiff-sh/skiff/controlplane/controllers/ownership"
	"github.com/skiff-sh/skiff/controlplane/controllers/podutil"
	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's).
const Name = "deployment-controller"

// Controller reconciles Deployments.
type Controller struct {
	client   kubernetes.Interface
	deploys  appslisters.DeploymentLister
	rsLister appslisters.ReplicaSetLister
	pods     corelisters.PodLister
	synced   []cache.InformerSynced
	recorder record.EventRecorder
	loop     *loop.Loop
	log      *slog.Logger
}

// New wires the controller to Deployment, ReplicaSet and pod informers.
func New(client kubernetes.Interface, d appsinformers.DeploymentInformer, rs appsinformers.ReplicaSetInformer, pods coreinformers.PodInformer,
	recorder record.EventRecorder, log *slog.Logger) *Controller {
	c := &Controller{client: client, deploys: d.Lister(), rsLister: rs.Lister(), pods: pods.Lister(), recorder: recorder,
		synced: []cache.InformerSynced{d.Informer().HasSynced, rs.Informer().HasSynced, pods.Informer().HasSynced},
		log:    log.With("controller", Name)}
	c.loop = loop.New(Name, c.sync, log)
	_, _ = d.Informer().AddEventHandler(c.loop.Handler())
	owner := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		m, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		if ref := metav1.GetControllerOf(m); ref != nil {
			if ref.Kind == "Deployment" {
				c.loop.Add(m.GetNamespace() + "/" + ref.Name)
			}
			return
		}
		// An orphan ReplicaSet: every Deployment whose selector matches it may adopt it.
		if rs, ok := obj.(*appsv1.ReplicaSet); ok && rs.DeletionTimestamp == nil {
			ds, _ := c.deploys.Deployments(rs.Namespace).List(labels.Everything())
			for _, d := range ds {
				if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil && !sel.Empty() && sel.Matches(labels.Set(rs.Labels)) {
					c.loop.Add(d.Namespace + "/" + d.Name)
				}
			}
		}
	}
	_, _ = rs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: owner, UpdateFunc: func(_, o any) { owner(o) }, DeleteFunc: owner})
	// Recreate waits for old pods to be gone: their deletion wakes the deployment.
	_, _ = pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "ReplicaSet" {
				if rs, err := c.rsLister.ReplicaSets(p.Namespace).Get(ref.Name); err == nil {
					owner(rs)
				}
			}
		}
	}})
	return c
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
	d, err := c.deploys.Deployments(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if d.DeletionTimestamp != nil {
		return nil
	}
	all, err := c.rsLister.ReplicaSets(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	owned, err := c.claim(ctx, d, all)
	if err != nil {
		return err
	}
	if IsScalingEvent(d, owned) {
		// Resized (paused or not): share the change among the ReplicaSets before any rollout
		// step, as upstream; the next sync goes on with the rollout. Resized together with a
		// new template (no ReplicaSet of it yet), it is left to the rollout below, which sizes
		// the new ReplicaSet within the new count.
		if newRS, old := splitByTemplate(d, owned); newRS != nil {
			if err := c.resize(ctx, d, newRS, old); err != nil {
				return err
			}
			return c.updateStatus(ctx, d, newRS, old)
		}
	}
	newRS, old, err := c.newReplicaSet(ctx, d, owned)
	if err != nil {
		return err
	}
	if !d.Spec.Paused {
		if err := c.rollout(ctx, d, newRS, old); err != nil {
			return err
		}
		if err := c.cleanup(ctx, d, old); err != nil {
			return err
		}
	}
	return c.updateStatus(ctx, d, newRS, old)
}

// claim adopts the orphan ReplicaSets the Deployment's selector matches (a Deployment
// re-created after `kubectl delete --cascade=orphan` takes its old ReplicaSets and their
// revisions back) and releases those it controls that no longer match, as upstream, and
// returns the live ones it then controls.
func (c *Controller) claim(ctx context.Context, d *appsv1.Deployment, all []*appsv1.ReplicaSet) ([]*appsv1.ReplicaSet, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, nil
	}
	objs := make([]metav1.Object, len(all))
	for i, rs := range all {
		objs[i] = rs
	}
	gvk := appsv1.SchemeGroupVersion.WithKind("Deployment")
	idx, err := ownership.Apply(ownership.Claim(d, sel, objs),
		func(i int) error {
			patch, err := ownership.AdoptPatch(d, gvk, all[i].UID)
			if err == nil {
				_, err = c.client.AppsV1().ReplicaSets(d.Namespace).Patch(ctx, all[i].Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			}
			return err
		},
		func(i int) error {
			_, err := c.client.AppsV1().ReplicaSets(d.Namespace).Patch(ctx, all[i].Name, types.StrategicMergePatchType, ownership.ReleasePatch(d, all[i].UID), metav1.PatchOptions{})
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("replica sets of %s: %w", d.Name, err)
	}
	var owned []*appsv1.ReplicaSet
	for _, i := range idx {
		if all[i].DeletionTimestamp == nil {
			owned = append(owned, all[i])
		}
	}
	return owned, nil
}

// newReplicaSet finds the ReplicaSet of the current template, creating it (with the next
// revision) when there is none; an old one whose template matches again (rollout undo) is
// reused and given the next revision.
func (c *Controller) newReplicaSet(ctx context.Context, d *appsv1.Deployment, owned []*appsv1.ReplicaSet) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	newRS, old := splitByTemplate(d, owned)
	maxOld := int64(0)
	for _, rs := range old {
		maxOld = max(maxOld, Revision(rs))
	}
	revision := strconv.FormatInt(maxOld+1, 10)
	if newRS != nil {
		if Revision(newRS) <= maxOld || newRS.Annotations[DesiredReplicasAnnotation] != strconv.Itoa(int(replicasOf(d))) {
			cp := newRS.DeepCopy()
			if cp.Annotations == nil {
				cp.Annotations = map[string]string{}
			}
			if Revision(newRS) <= maxOld {
				if prev := cp.Annotations[RevisionAnnotation]; prev != "" {
					hist := cp.Annotations[RevisionHistoryAnnotation]
					if hist != "" {
						hist += ","
					}
					cp.Annotations[RevisionHistoryAnnotation] = hist + prev
				}
				cp.Annotations[RevisionAnnotation] = revision
			}
			setReplicaAnnotations(cp, d)
			updated, err := c.client.AppsV1().ReplicaSets(cp.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
			if err != nil {
				return nil, nil, err
			}
			newRS = updated
		}
		return newRS, old, c.setRevision(ctx, d, newRS.Annotations[RevisionAnnotation])
	}
	hash := TemplateHash(&d.Spec.Template, d.Status.CollisionCount)
	tmpl := d.Spec.Template.DeepCopy()
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	sel := d.Spec.Selector.DeepCopy()
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	sel.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	replicas := int32(0)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            d.Name + "-" + hash,
			Namespace:       d.Namespace,
			Labels:          tmpl.Labels,
			Annotations:     map[string]string{RevisionAnnotation: revision},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, MinReadySeconds: d.Spec.MinReadySeconds, Selector: sel, Template: *tmpl},
	}
	if cause := d.Annotations[ChangeCauseAnnotation]; cause != "" {
		rs.Annotations[ChangeCauseAnnotation] = cause
	}
	setReplicaAnnotations(rs, d)
	// It starts at the size its first rollout step gives it, as upstream's does: a client that
	// reads the new ReplicaSet once (as the conformance suite's garbage-collector specs do) sees
	// the size it will keep, not a 0 scaled up a moment later.
	replicas = initialReplicas(d, rs, old)
	created, err := c.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, rs, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// A ReplicaSet of that name with another template: bump collisionCount, as upstream.
		cp := d.DeepCopy()
		n := int32(1)
		if cp.Status.CollisionCount != nil {
			n = *cp.Status.CollisionCount + 1
		}
		cp.Status.CollisionCount = &n
		_, uerr := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
		return nil, nil, fmt.Errorf("replica set name collision for %s: %w", rs.Name, errorsJoin(err, uerr))
	}
	if err != nil {
		return nil, nil, err
	}
	c.log.Info("created replica set", "deployment", d.Namespace+"/"+d.Name, "replicaset", created.Name, "revision", revision, "replicas", replicas)
	if replicas > 0 {
		c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d", created.Name, replicas)
	}
	return created, old, c.setRevision(ctx, d, revision)
}

// initialReplicas is the size a new ReplicaSet rs of d is created with: none while d is paused
// or, with the Recreate strategy, while an old ReplicaSet still has pods; else what a rolling
// update's first step scales it to (everything, when there is no old ReplicaSet).
func initialReplicas(d *appsv1.Deployment, rs *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) int32 {
	if d.Spec.Paused {
		return 0
	}
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		for _, o := range old {
			if rsReplicas(o) > 0 || o.Status.Replicas > 0 {
				return 0
			}
		}
		return replicasOf(d)
	}
	return PlanRollingUpdate(d, rs, old)[rs.Name]
}

func setReplicaAnnotations(rs *appsv1.ReplicaSet, d *appsv1.Deployment) {
	if rs.Annotations == nil { // an adopted ReplicaSet may have none
		rs.Annotations = map[string]string{}
	}
	rs.Annotations[DesiredReplicasAnnotation], rs.Annotations[MaxReplicasAnnotation] = replicaAnnotations(d)
}

func errorsJoin(a, b error) error {
	if b == nil {
		return a
	}
	return fmt.Errorf("%v; %v", a, b)
}

func (c *Controller) setRevision(ctx context.Context, d *appsv1.Deployment, revision string) error {
	if d.Annotations[RevisionAnnotation] == revision {
		return nil
	}
	// An update, not a patch: upstream's deployment-controller role may update deployments
	// but not patch them. A conflict requeues the deployment.
	d = d.DeepCopy()
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[RevisionAnnotation] = revision
	_, err := c.client.AppsV1().Deployments(d.Namespace).Update(ctx, d, metav1.UpdateOptions{})
	return err
}

// splitByTemplate finds, without writing anything, the ReplicaSet of d's current template
// (nil if there is none yet) and the others.
func splitByTemplate(d *appsv1.Deployment, owned []*appsv1.ReplicaSet) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet) {
	var newRS *appsv1.ReplicaSet
	var old []*appsv1.ReplicaSet
	for _, rs := range owned {
		if newRS == nil && EqualIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			newRS = rs
			continue
		}
		old = append(old, rs)
	}
	return newRS, old
}

// resize applies PlanScale, oldest ReplicaSet first.
func (c *Controller) resize(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) error {
	plan := PlanScale(d, newRS, old)
	all := append(append([]*appsv1.ReplicaSet(nil), old...), newRS)
	sortOldestFirst(all)
	for _, rs := range all {
		n, ok := plan[rs.Name]
		if !ok {
			if rsReplicas(rs) == 0 {
				continue
			}
			// Kept at its size, but annotated for d's: else the scaling event never ends.
			n = rsReplicas(rs)
		}
		if err := c.scale(ctx, d, rs, n, true); err != nil {
			return err
		}
	}
	return nil
}

// scale gives rs n replicas, and the desired- and max-replicas annotations of d's size (which
// tell the next resize what rs was sized for). A ReplicaSet of the right size is left alone
// unless annotate is set: a resize also writes the annotations of a ReplicaSet whose share
// was none, since they are what ends the scaling event.
func (c *Controller) scale(ctx context.Context, d *appsv1.Deployment, rs *appsv1.ReplicaSet, n int32, annotate bool) error {
	desired, maxReplicas := replicaAnnotations(d)
	annotated := rs.Annotations[DesiredReplicasAnnotation] == desired && rs.Annotations[MaxReplicasAnnotation] == maxReplicas
	if rsReplicas(rs) == n && (!annotate || annotated) {
		return nil
	}
	cp := rs.DeepCopy()
	from := rsReplicas(rs)
	cp.Spec.Replicas = &n
	setReplicaAnnotations(cp, d)
	if _, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, cp, metav1.UpdateOptions{}); err != nil {
		return err
	}
	if n == from {
		return nil
	}
	verb := "up"
	if n < from {
		verb = "down"
	}
	c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d", verb, rs.Name, from, n)
	return nil
}

func (c *Controller) rollout(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) error {
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		for _, rs := range old {
			if err := c.scale(ctx, d, rs, 0, false); err != nil {
				return err
			}
		}
		// The new pods start only once every old pod is gone.
		pods, err := c.pods.Pods(d.Namespace).List(labels.Everything())
		if err != nil {
			return err
		}
		for _, p := range pods {
			for _, rs := range old {
				if podutil.IsControlledBy(p, rs.UID) && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
					return nil
				}
			}
		}
		return c.scale(ctx, d, newRS, replicasOf(d), false)
	}
	plan := PlanRollingUpdate(d, newRS, old)
	// Scale up first, then down, as upstream.
	if err := c.scale(ctx, d, newRS, plan[newRS.Name], false); err != nil {
		return err
	}
	for _, rs := range old {
		if err := c.scale(ctx, d, rs, plan[rs.Name], false); err != nil {
			return err
		}
	}
	return nil
}

// cleanup deletes old, scaled-down ReplicaSets beyond revisionHistoryLimit, oldest first.
func (c *Controller) cleanup(ctx context.Context, d *appsv1.Deployment, old []*appsv1.ReplicaSet) error {
	limit := int32(10)
	if d.Spec.RevisionHistoryLimit != nil {
		limit = *d.Spec.RevisionHistoryLimit
	}
	var idle []*appsv1.ReplicaSet
	for _, rs := range old {
		if rsReplicas(rs) == 0 && rs.Status.Replicas == 0 {
			idle = append(idle, rs)
		}
	}
	if int32(len(idle)) <= limit {
		return nil
	}
	sortOldestFirst(idle)
	for _, rs := range idle[:int32(len(idle))-limit] {
		err := c.client.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &rs.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// Status computes the deployment's status from its ReplicaSets.
func Status(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) appsv1.DeploymentStatus {
	s := appsv1.DeploymentStatus{ObservedGeneration: d.Generation, CollisionCount: d.Status.CollisionCount}
	for _, rs := range append([]*appsv1.ReplicaSet{newRS}, old...) {
		s.Replicas += rs.Status.Replicas
		s.ReadyReplicas += rs.Status.ReadyReplicas
		s.AvailableReplicas += rs.Status.AvailableReplicas
	}
	s.UpdatedReplicas = newRS.Status.Replicas
	want := replicasOf(d)
	s.UnavailableReplicas = max(s.Replicas, want) - s.AvailableReplicas
	if s.UnavailableReplicas < 0 {
		s.UnavailableReplicas = 0
	}
	_, unavailable := ResolveFenceposts(d)
	now := metav1.Now()
	cond := func(t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, msg string) {
		c := appsv1.DeploymentCondition{Type: t, Status: status, Reason: reason, Message: msg, LastUpdateTime: now, LastTransitionTime: now}
		for _, prev := range d.Status.Conditions {
			if prev.Type == t {
				if prev.Status == status {
					c.LastTransitionTime = prev.LastTransitionTime
				}
				if prev.Status == status && prev.Reason == reason && prev.Message == msg {
					c.LastUpdateTime = prev.LastUpdateTime
				}
			}
		}
		s.Conditions = append(s.Conditions, c)
	}
	if s.AvailableReplicas >= want-unavailable {
		cond(appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable", "Deployment has minimum availability.")
	} else {
		cond(appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable", "Deployment does not have minimum availability.")
	}
	complete := s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want && s.ObservedGeneration >= d.Generation
	if complete {
		cond(appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable", fmt.Sprintf("ReplicaSet %q has successfully progressed.", newRS.Name))
	} else {
		cond(appsv1.DeploymentProgressing, corev1.ConditionTrue, "ReplicaSetUpdated", fmt.Sprintf("ReplicaSet %q is progressing.", newRS.Name))
	}
	return s
}

func (c *Controller) updateStatus(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) error {
	s := Status(d, newRS, old)
	if apiequality.Semantic.DeepEqual(s, d.Status) {
		return nil
	}
	cp := d.DeepCopy()
	cp.Status = s
	_, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
