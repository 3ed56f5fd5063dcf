// Package daemonset runs one pod of every DaemonSet on each eligible node (node selector and
// affinity match, taints tolerated, with upstream's extra daemon tolerations), pinning each
// pod to its node with node affinity so the scheduler still checks resources; it replaces
// pods of an old template one at a time within maxUnavailable and reports the status
// `kubectl get ds` prints.
package daemonset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/controlplane/controllers/podutil"
	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's).
const Name = "daemon-set-controller"

// HashLabel marks which template revision a daemon pod runs.
const HashLabel = appsv1.DefaultDaemonSetUniqueLabelKey

// Controller reconciles DaemonSets.
type Controller struct {
	client   kubernetes.Interface
	dsLister appslisters.DaemonSetLister
	nodes    corelisters.NodeLister
	pods     corelisters.PodLister
	// revisions lists the ControllerRevisions snapshot keeps.
	revisions appslisters.ControllerRevisionLister
	synced    []cache.InformerSynced
	recorder  record.EventRecorder
	loop      *loop.Loop
	// backoff spaces out replacing failed daemon pods, per DaemonSet and node.
	backoff *flowcontrol.Backoff
}

// New wires the controller.
func New(client kubernetes.Interface, ds appsinformers.DaemonSetInformer, nodes coreinformers.NodeInformer, pods coreinformers.PodInformer,
	revisions appsinformers.ControllerRevisionInformer, recorder record.EventRecorder, log *slog.Logger) *Controller {
	c := &Controller{client: client, dsLister: ds.Lister(), nodes: nodes.Lister(), pods: pods.Lister(), revisions: revisions.Lister(), recorder: recorder,
		backoff: flowcontrol.NewBackOff(time.Second, 15*time.Minute),
		synced:  []cache.InformerSynced{ds.Informer().HasSynced, nodes.Informer().HasSynced, pods.Informer().HasSynced, revisions.Informer().HasSynced}}
	c.loop = loop.New(Name, c.sync, log)
	_, _ = ds.Informer().AddEventHandler(c.loop.Handler())
	all := func(any) {
		list, _ := c.dsLister.List(labels.Everything())
		for _, d := range list {
			c.loop.Enqueue(d)
		}
	}
	_, _ = nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: all, UpdateFunc: func(_, o any) { all(o) }, DeleteFunc: all})
	owner := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "DaemonSet" {
				c.loop.Add(p.Namespace + "/" + ref.Name)
			}
		}
	}
	_, _ = pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: owner, UpdateFunc: func(_, o any) { owner(o) }, DeleteFunc: owner})
	return c
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	c.loop.Run(ctx, 2)
}

// TemplateHash identifies a DaemonSet's current template.
func TemplateHash(ds *appsv1.DaemonSet) string {
	b, _ := json.Marshal(ds.Spec.Template)
	h := fnv.New32a()
	h.Write(b)
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// daemonTolerations are upstream's: daemons ride out node conditions that evict other pods.
func daemonTolerations(spec *corev1.PodSpec) []corev1.Toleration {
	add := []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	if spec.HostNetwork {
		add = append(add, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	out := append([]corev1.Toleration(nil), spec.Tolerations...)
	for _, t := range add {
		dup := false
		for _, have := range out {
			if have.Key == t.Key && have.Effect == t.Effect {
				dup = true
			}
		}
		if !dup {
			out = append(out, t)
		}
	}
	return out
}

// ShouldRun decides whether a DaemonSet's pod belongs on a node: its node selector and
// required node-affinity terms match, and it tolerates the node's NoSchedule and NoExecute
// taints (with the daemon tolerations).
func ShouldRun(ds *appsv1.DaemonSet, node *corev1.Node) bool {
	spec := &ds.Spec.Template.Spec
	if !labels.SelectorFromSet(spec.NodeSelector).Matches(labels.Set(node.Labels)) {
		return false
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		matched := false
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			if termMatches(term, node) {
				matched = true
				break
			}
		}
		if !matched {
			return false
		}
	}
	tols := daemonTolerations(spec)
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		tolerated := false
		for _, tol := range tols {
			if tol.ToleratesTaint(klog.Background(), t, false) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return false
		}
	}
	return true
}

func termMatches(term corev1.NodeSelectorTerm, node *corev1.Node) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false
	}
	for _, e := range term.MatchExpressions {
		sel, err := labels.NewRequirement(e.Key, nodeOp(e.Operator), e.Values)
		if err != nil || !sel.Matches(labels.Set(node.Labels)) {
			return false
		}
	}
	for _, f := range term.MatchFields {
		if f.Key != "metadata.name" {
			return false
		}
		in := false
		for _, v := range f.Values {
			in = in || v == node.Name
		}
		if (f.Operator == corev1.NodeSelectorOpIn) != in {
			return false
		}
	}
	return true
}

func nodeOp(op corev1.NodeSelectorOperator) selection.Operator {
	switch op {
	case corev1.NodeSelectorOpNotIn:
		return selection.NotIn
	case corev1.NodeSelectorOpExists:
		return selection.Exists
	case corev1.NodeSelectorOpDoesNotExist:
		return selection.DoesNotExist
	case corev1.NodeSelectorOpGt:
		return selection.GreaterThan
	case corev1.NodeSelectorOpLt:
		return selection.LessThan
	}
	return selection.In
}

// podNode is the node a daemon pod is bound or pinned to.
func podNode(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range t.MatchFields {
				if f.Key == "metadata.name" && len(f.Values) == 1 {
					return f.Values[0]
				}
			}
		}
	}
	return ""
}

// newPod builds the daemon pod for a node.
func newPod(ds *appsv1.DaemonSet, node, hash string) *corev1.Pod {
	t := ds.Spec.Template.DeepCopy()
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[HashLabel] = hash
	t.Spec.Tolerations = daemonTolerations(&t.Spec)
	pin := corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}
	if t.Spec.Affinity == nil {
		t.Spec.Affinity = &corev1.Affinity{}
	}
	if t.Spec.Affinity.NodeAffinity == nil {
		t.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	t.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{pin}}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: ds.Name + "-", Namespace: ds.Namespace, Labels: t.Labels, Annotations: t.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))}},
		Spec: t.Spec,
	}
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	ds, err := c.dsLister.DaemonSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	all, err := c.pods.Pods(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	byNode := map[string][]*corev1.Pod{}
	// A node whose daemon pod is being deleted but still runs gets its new pod only once the
	// old one is gone, as upstream's controller (without surge) waits: the two would
	// otherwise run side by side (fighting over a hostPort, or a rollout's old pod still
	// listed beside its replacement).
	terminating := map[string]bool{}
	backingOff := map[string]bool{}
	var errs []error
	for _, p := range all {
		if !podutil.IsControlledBy(p, ds.UID) {
			continue
		}
		if p.Status.Phase == corev1.PodFailed && p.DeletionTimestamp == nil {
			// A failed daemon pod is deleted and replaced, but with a per-node backoff so a
			// node that keeps rejecting it does not get an endless stream of new pods.
			node := podNode(p)
			bk := string(ds.UID) + "/" + node
			if c.backoff.IsInBackOffSinceUpdate(bk, c.backoff.Clock.Now()) {
				backingOff[node] = true
				c.loop.AddAfter(key, c.backoff.Get(bk))
				continue
			}
			c.backoff.Next(bk, c.backoff.Clock.Now())
			c.recorder.Eventf(ds, corev1.EventTypeWarning, "FailedDaemonPod", "Found failed daemon pod %s/%s on node %s, will try to kill it", p.Namespace, p.Name, node)
			errs = append(errs, c.deletePods(ctx, ds, []*corev1.Pod{p}))
			backingOff[node] = true
			continue
		}
		if podutil.IsActive(p) {
			byNode[podNode(p)] = append(byNode[podNode(p)], p)
		} else if p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			terminating[podNode(p)] = true
		}
	}
	hash := TemplateHash(ds)
	if ds.DeletionTimestamp == nil {
		var live []*corev1.Pod
		for _, ps := range byNode {
			live = append(live, ps...)
		}
		if err := c.snapshot(ctx, ds, hash, live); err != nil {
			errs = append(errs, err)
		}
	}
	now := time.Now()
	status := appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, CollisionCount: ds.Status.CollisionCount}
	maxUnavailable := 1
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		maxUnavailable, _ = intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, len(nodes), true)
		maxUnavailable = max(maxUnavailable, 1)
	}
	unavailable := 0
	var outdated []*corev1.Pod
	known := map[string]bool{}
	for _, n := range nodes {
		known[n.Name] = true
		pods := byNode[n.Name]
		run := ShouldRun(ds, n)
		if run {
			status.DesiredNumberScheduled++
		}
		switch {
		case run && len(pods) == 0:
			if ds.DeletionTimestamp == nil && !backingOff[n.Name] && !terminating[n.Name] {
				if _, err := c.client.CoreV1().Pods(ns).Create(ctx, newPod(ds, n.Name, hash), metav1.CreateOptions{}); err != nil {
					errs = append(errs, err)
				} else {
					c.recorder.Eventf(ds, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod on node %s", n.Name)
				}
			}
			unavailable++
		case !run && len(pods) > 0:
			status.NumberMisscheduled++
			errs = append(errs, c.deletePods(ctx, ds, pods))
		case run:
			podutil.SortForDeletion(pods)
			keep := pods[len(pods)-1] // the oldest, most ready one
			if len(pods) > 1 {
				errs = append(errs, c.deletePods(ctx, ds, pods[:len(pods)-1]))
			}
			status.CurrentNumberScheduled++
			if podutil.IsReady(keep) {
				status.NumberReady++
			}
			if podutil.IsAvailable(keep, ds.Spec.MinReadySeconds, now) {
				status.NumberAvailable++
			} else {
				unavailable++
			}
			if keep.Labels[HashLabel] == hash {
				status.UpdatedNumberScheduled++
			} else {
				outdated = append(outdated, keep)
			}
		}
	}
	for node, pods := range byNode {
		if !known[node] && node != "" {
			errs = append(errs, c.deletePods(ctx, ds, pods))
		}
	}
	// Rolling update: replace outdated pods while staying within maxUnavailable.
	if ds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
		podutil.SortForDeletion(outdated)
		for _, p := range outdated {
			if unavailable >= maxUnavailable && podutil.IsReady(p) {
				break
			}
			errs = append(errs, c.deletePods(ctx, ds, []*corev1.Pod{p}))
			if podutil.IsReady(p) {
				unavailable++
			}
		}
	}
	status.NumberUnavailable = max(status.DesiredNumberScheduled-status.NumberAvailable, 0)
	if !apiequality.Semantic.DeepEqual(status, ds.Status) {
		cp := ds.DeepCopy()
		cp.Status = status
		if _, err := c.client.AppsV1().DaemonSets(ns).UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if ds.Spec.MinReadySeconds > 0 && status.NumberReady != status.NumberAvailable {
		c.loop.AddAfter(key, time.Duration(ds.Spec.MinReadySeconds)*time.Second)
	}
	return errors.Join(errs...)
}

func (c *Controller) deletePods(ctx context.Context, ds *appsv1.DaemonSet, pods []*corev1.Pod) error {
	var errs []error
	for _, p := range pods {
		err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		c.recorder.Eventf(ds, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", p.Name)
	}
	return errors.Join(errs...)
}
