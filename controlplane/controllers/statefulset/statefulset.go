// Package statefulset runs the pods of every StatefulSet with upstream's guarantees: each
// pod has a stable identity (<set>-<ordinal>, its hostname under the set's service) and its
// own PVCs from the volume claim templates, kept across rescheduling and retained or deleted
// as spec.persistentVolumeClaimRetentionPolicy says; OrderedReady sets start and stop pods
// one at a time in ordinal order, Parallel ones all at once; template changes roll out
// through ControllerRevisions (RollingUpdate with partition and maxUnavailable, or OnDelete),
// so `kubectl rollout status|history|undo` work. Decide is the decision, without I/O; this
// file reads the caches and carries it out.
package statefulset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
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

	"github.com/skiff-sh/skiff/controlplane/controllers/history"
	"github.com/skiff-sh/skiff/controlplane/controllers/ownership"
	"github.com/skiff-sh/skiff/controlplane/controllers/podutil"
	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's).
const Name = "statefulset-controller"

// Controller reconciles StatefulSets.
type Controller struct {
	client   kubernetes.Interface
	sets     appslisters.StatefulSetLister
	pods     corelisters.PodLister
	pvcs     corelisters.PersistentVolumeClaimLister
	history  *history.History
	synced   []cache.InformerSynced
	recorder record.EventRecorder
	loop     *loop.Loop
	log      *slog.Logger
	now      func() time.Time
}

// New wires the controller to StatefulSet, pod, ControllerRevision and PVC informers.
func New(client kubernetes.Interface, sets appsinformers.StatefulSetInformer, pods coreinformers.PodInformer, revisions appsinformers.ControllerRevisionInformer,
	pvcs coreinformers.PersistentVolumeClaimInformer, recorder record.EventRecorder, log *slog.Logger) *Controller {
	c := &Controller{client: client, sets: sets.Lister(), pods: pods.Lister(), pvcs: pvcs.Lister(),
		history: history.NewHistory(client, revisions.Lister()), recorder: recorder,
		synced: []cache.InformerSynced{sets.Informer().HasSynced, pods.Informer().HasSynced, revisions.Informer().HasSynced, pvcs.Informer().HasSynced},
		log:    log.With("controller", Name), now: time.Now}
	c.loop = loop.New(Name, c.sync, log)
	_, _ = sets.Informer().AddEventHandler(c.loop.Handler())
	_, _ = pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.podEvent(nil, obj) },
		UpdateFunc: func(old, obj any) {
			c.podEvent(old, obj)
		},
		DeleteFunc: func(obj any) { c.podEvent(nil, obj) },
	})
	return c
}

// podEvent queues the set controlling the pod (and the one that did, if that changed), or,
// for an orphan, every set whose selector matches it. A pod turning ready is looked at
// again once minReadySeconds have made it available.
func (c *Controller) podEvent(old, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	var o *corev1.Pod
	if old != nil {
		o, _ = old.(*corev1.Pod)
		if o != nil && o.ResourceVersion == p.ResourceVersion {
			return
		}
		if o != nil {
			if ref := metav1.GetControllerOf(o); ref != nil && !apiequality.Semantic.DeepEqual(ref, metav1.GetControllerOf(p)) {
				if set := c.resolve(o.Namespace, ref); set != nil {
					c.loop.Add(set.Namespace + "/" + set.Name)
				}
			}
		}
	}
	if ref := metav1.GetControllerOf(p); ref != nil {
		set := c.resolve(p.Namespace, ref)
		if set == nil {
			return
		}
		key := set.Namespace + "/" + set.Name
		c.loop.Add(key)
		if o != nil && !podutil.IsReady(o) && podutil.IsReady(p) && set.Spec.MinReadySeconds > 0 {
			c.loop.AddAfter(key, time.Duration(set.Spec.MinReadySeconds)*time.Second+100*time.Millisecond)
		}
		return
	}
	if p.DeletionTimestamp != nil {
		return
	}
	sets, _ := c.sets.StatefulSets(p.Namespace).List(labels.Everything())
	for _, s := range sets {
		if sel, err := metav1.LabelSelectorAsSelector(s.Spec.Selector); err == nil && !sel.Empty() && sel.Matches(labels.Set(p.Labels)) {
			c.loop.Add(s.Namespace + "/" + s.Name)
		}
	}
}

// resolve is the set a controller reference names, if it is still that set.
func (c *Controller) resolve(ns string, ref *metav1.OwnerReference) *appsv1.StatefulSet {
	if ref.Kind != setKind.Kind {
		return nil
	}
	set, err := c.sets.StatefulSets(ns).Get(ref.Name)
	if err != nil || set.UID != ref.UID {
		return nil
	}
	return set
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
	cached, err := c.sets.StatefulSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	sel, err := metav1.LabelSelectorAsSelector(cached.Spec.Selector)
	if err != nil || cached.Spec.Selector == nil {
		return nil // refused by validation; nothing to select
	}
	set := withDefaults(cached)
	canAdopt := func() error {
		// Adopt only for the set as it is now: not a same-named successor, not one being deleted.
		fresh, err := c.client.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if fresh.UID != set.UID {
			return fmt.Errorf("StatefulSet %s/%s is gone: uid %s, want %s", ns, name, fresh.UID, set.UID)
		}
		if fresh.DeletionTimestamp != nil {
			return fmt.Errorf("StatefulSet %s/%s is being deleted", ns, name)
		}
		return nil
	}
	revs, err := c.history.Claim(ctx, set, setKind, sel, canAdopt)
	if err != nil {
		return err
	}
	pods, err := c.claimPods(ctx, set, sel, canAdopt)
	if err != nil {
		return err
	}
	history.Sort(revs)
	current, update, cc, err := c.revisions(ctx, set, revs)
	if err != nil {
		return err
	}

	plan := Decide(set, pods, Revisions{Current: current.Name, Update: update.Name, CollisionCount: cc}, c.staleClaims(set, pods), c.now())
	var errs []error
	if set.DeletionTimestamp == nil {
		if err := c.apply(ctx, set, current, update, plan); err != nil {
			errs = append(errs, err)
		}
	}
	if !apiequality.Semantic.DeepEqual(plan.Status, cached.Status) {
		cp := cached.DeepCopy()
		cp.Status = plan.Status
		if _, err := c.client.AppsV1().StatefulSets(ns).UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if err := c.truncate(ctx, set, pods, revs, current, update); err != nil {
		errs = append(errs, err)
	}
	if plan.RequeueAfter > 0 {
		c.loop.AddAfter(key, plan.RequeueAfter+100*time.Millisecond)
	}
	return errors.Join(errs...)
}

// claimPods adopts the orphans the selector matches that are named as the set's pods, and
// releases those it controls that no longer match (or are not named as its pods), as
// upstream; it returns the pods it then controls.
func (c *Controller) claimPods(ctx context.Context, set *appsv1.StatefulSet, sel labels.Selector, canAdopt func() error) ([]*corev1.Pod, error) {
	all, err := c.pods.Pods(set.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var members []*corev1.Pod
	for _, p := range all {
		if isMember(set, p) {
			members = append(members, p)
			continue
		}
		if podutil.IsControlledBy(p, set.UID) && set.DeletionTimestamp == nil {
			_, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, ownership.ReleasePatch(set, p.UID), metav1.PatchOptions{})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) {
				return nil, err
			}
		}
	}
	return ownership.ClaimPods(ctx, c.client, set, setKind, sel, members, canAdopt)
}

// revisions finds (creating or renumbering one if needed) the update revision, the set's
// template, and the current revision, the one status.currentRevision names (the update
// revision when there is none yet), as upstream; it returns the collision count to record.
func (c *Controller) revisions(ctx context.Context, set *appsv1.StatefulSet, sorted []*appsv1.ControllerRevision) (current, update *appsv1.ControllerRevision, cc int32, err error) {
	if set.Status.CollisionCount != nil {
		cc = *set.Status.CollisionCount
	}
	proposed, err := NewRevision(set, history.Next(sorted), &cc)
	if err != nil {
		return nil, nil, cc, err
	}
	switch step, existing := chooseUpdateRevision(set, sorted, proposed); step {
	case reuseLatest:
		update = existing
	case renumber:
		if update, err = c.history.UpdateRevision(ctx, existing, proposed.Revision); err != nil {
			return nil, nil, cc, err
		}
	default:
		if update, err = c.history.Create(ctx, set, proposed, &cc); err != nil {
			return nil, nil, cc, err
		}
	}
	current = update
	for _, r := range sorted {
		if r.Name == set.Status.CurrentRevision {
			current = r
			break
		}
	}
	return current, update, cc, nil
}

// truncate deletes the oldest revisions beyond revisionHistoryLimit that neither the status
// nor any pod uses.
func (c *Controller) truncate(ctx context.Context, set *appsv1.StatefulSet, pods []*corev1.Pod, sorted []*appsv1.ControllerRevision, current, update *appsv1.ControllerRevision) error {
	live := map[string]bool{current.Name: true, update.Name: true}
	for _, p := range pods {
		live[revisionOf(p)] = true
	}
	for _, r := range history.ToTruncate(sorted, live, *set.Spec.RevisionHistoryLimit) {
		if err := c.history.Delete(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// apply carries out the plan: claims first (a condemned pod's claims take its owner
// reference before the pod goes, so the garbage collector deletes them with it), then
// relabelling, deletions and creations.
func (c *Controller) apply(ctx context.Context, set *appsv1.StatefulSet, current, update *appsv1.ControllerRevision, plan Plan) error {
	var errs []error
	for _, p := range plan.Claims {
		if err := c.fixClaims(ctx, set, p); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range plan.Relabel {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q,%q:%q}}}`, appsv1.StatefulSetPodNameLabel, p.Name, appsv1.PodIndexLabel, strconv.Itoa(ordinalOf(p)))
		_, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		c.podOpEvent("update", set, p.Name, err)
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	for _, p := range plan.Delete {
		err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if apierrors.IsNotFound(err) {
			err = nil
		}
		c.podOpEvent("delete", set, p.Name, err)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(plan.Create) == 0 {
		return errors.Join(errs...)
	}
	sets := map[string]*appsv1.StatefulSet{}
	for _, r := range []*appsv1.ControllerRevision{current, update} {
		if _, ok := sets[r.Name]; ok {
			continue
		}
		s, err := ApplyRevision(set, r)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		sets[r.Name] = s
	}
	for _, cr := range plan.Create {
		if err := c.createPod(ctx, set, NewPod(sets[cr.Revision], cr.Ordinal, cr.Revision)); err != nil {
			// As upstream's slow start: a failing template fails once, not once per pod.
			errs = append(errs, err)
			break
		}
	}
	return errors.Join(errs...)
}

// createPod creates the pod's missing PVCs, then the pod.
func (c *Controller) createPod(ctx context.Context, set *appsv1.StatefulSet, p *corev1.Pod) error {
	if err := c.createClaims(ctx, set, p); err != nil {
		c.podOpEvent("create", set, p.Name, err)
		return err
	}
	_, err := c.client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil // the cache is behind; its add event brings the next sync
	}
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return nil
	}
	c.podOpEvent("create", set, p.Name, err)
	if err != nil {
		return err
	}
	// Claims that existed already (kept from an earlier pod) take the policy's references.
	return c.fixClaims(ctx, set, p)
}

// verbs are the event words for the pod operations, as upstream's recordPodEvent writes them.
var verbs = map[string]string{"create": "Create", "delete": "Delete", "update": "Update"}

// podOpEvent records upstream's event for a pod operation: "SuccessfulCreate" "Create Pod
// web-0 in StatefulSet web successful", or Failed<Verb> with the error.
func (c *Controller) podOpEvent(verb string, set *appsv1.StatefulSet, pod string, err error) {
	if err == nil {
		c.recorder.Eventf(set, corev1.EventTypeNormal, "Successful"+verbs[verb], "%s Pod %s in StatefulSet %s successful", verbs[verb], pod, set.Name)
		return
	}
	c.recorder.Eventf(set, corev1.EventTypeWarning, "Failed"+verbs[verb], "%s Pod %s in StatefulSet %s failed error: %s", verbs[verb], pod, set.Name, err)
}
