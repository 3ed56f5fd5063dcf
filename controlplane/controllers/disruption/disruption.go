package disruption

import (
	"context"
	"log/slog"
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
	policyinformers "k8s.io/client-go/informers/policy/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's).
const Name = "disruption-controller"

// Controller reconciles PodDisruptionBudget status.
type Controller struct {
	client   kubernetes.Interface
	pdbs     policylisters.PodDisruptionBudgetLister
	pods     corelisters.PodLister
	rss      appslisters.ReplicaSetLister
	rcs      corelisters.ReplicationControllerLister
	deploys  appslisters.DeploymentLister
	synced   []cache.InformerSynced
	recorder record.EventRecorder
	loop     *loop.Loop
	log      *slog.Logger
	now      func() time.Time
}

// New wires the controller to its informers: the budgets, their pods, and the workloads
// whose replicas are a budget's expected pods.
func New(client kubernetes.Interface, pdbs policyinformers.PodDisruptionBudgetInformer, pods coreinformers.PodInformer,
	rss appsinformers.ReplicaSetInformer, rcs coreinformers.ReplicationControllerInformer, deploys appsinformers.DeploymentInformer,
	recorder record.EventRecorder, log *slog.Logger) *Controller {
	c := &Controller{client: client, pdbs: pdbs.Lister(), pods: pods.Lister(), rss: rss.Lister(), rcs: rcs.Lister(), deploys: deploys.Lister(), recorder: recorder,
		synced: []cache.InformerSynced{pdbs.Informer().HasSynced, pods.Informer().HasSynced, rss.Informer().HasSynced,
			rcs.Informer().HasSynced, deploys.Informer().HasSynced},
		log: log.With("controller", Name), now: time.Now}
	c.loop = loop.New(Name, c.sync, log)
	_, _ = pdbs.Informer().AddEventHandler(c.loop.Handler())
	podEvent := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			c.enqueueFor(p.Namespace, p.Labels)
		}
	}
	_, _ = pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: podEvent, UpdateFunc: func(_, o any) { podEvent(o) }, DeleteFunc: podEvent})
	// A workload's scale changes its budgets' expected pods.
	scaled := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		switch o := obj.(type) {
		case *appsv1.ReplicaSet:
			c.enqueueFor(o.Namespace, o.Spec.Template.Labels)
		case *appsv1.Deployment:
			c.enqueueFor(o.Namespace, o.Spec.Template.Labels)
		case *corev1.ReplicationController:
			if o.Spec.Template != nil {
				c.enqueueFor(o.Namespace, o.Spec.Template.Labels)
			}
		}
	}
	for _, inf := range []cache.SharedIndexInformer{rss.Informer(), rcs.Informer(), deploys.Informer()} {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: scaled, UpdateFunc: func(_, o any) { scaled(o) }, DeleteFunc: scaled})
	}
	return c
}

// enqueueFor queues the budgets whose selector matches a pod's labels.
func (c *Controller) enqueueFor(ns string, lbls map[string]string) {
	list, _ := c.pdbs.PodDisruptionBudgets(ns).List(labels.Everything())
	for _, pdb := range list {
		if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && pdb.Spec.Selector != nil && sel.Matches(labels.Set(lbls)) {
			c.loop.Add(pdb.Namespace + "/" + pdb.Name)
		}
	}
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	c.loop.Run(ctx, 2)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pdb, err := c.pdbs.PodDisruptionBudgets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var pods []*corev1.Pod
	if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && pdb.Spec.Selector != nil && !sel.Empty() {
		if pods, err = c.pods.Pods(ns).List(sel); err != nil {
			return err
		}
	}
	now := c.now()
	st, problem := Compute(pdb, pods, c.expected(pods), now)
	if problem != "" {
		c.recorder.Event(pdb, corev1.EventTypeWarning, "CalculateExpectedPodCountFailed", problem)
	}
	if !apiequality.Semantic.DeepEqual(st, pdb.Status) {
		cp := pdb.DeepCopy()
		cp.Status = st
		if _, err := c.client.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	// Entries of evictions not yet seen through expire: look again then.
	for _, at := range st.DisruptedPods {
		c.loop.AddAfter(key, at.Add(DeletionTimeout).Sub(now)+time.Second)
	}
	return nil
}

// expected sums the replicas of the controllers of pods (each counted once): a ReplicaSet's,
// or its Deployment's when one controls it, or a ReplicationController's; -1 when a pod has
// none that skiff knows.
func (c *Controller) expected(pods []*corev1.Pod) int32 {
	seen := map[types.UID]bool{}
	var total int32
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil {
			return -1
		}
		if seen[ref.UID] {
			continue
		}
		seen[ref.UID] = true
		switch ref.Kind {
		case "ReplicaSet":
			rs, err := c.rss.ReplicaSets(p.Namespace).Get(ref.Name)
			if err != nil || rs.UID != ref.UID {
				return -1
			}
			if dref := metav1.GetControllerOf(rs); dref != nil && dref.Kind == "Deployment" {
				d, err := c.deploys.Deployments(p.Namespace).Get(dref.Name)
				if err != nil || d.UID != dref.UID {
					return -1
				}
				if seen[d.UID] {
					continue
				}
				seen[d.UID] = true
				total += replicas(d.Spec.Replicas)
				continue
			}
			total += replicas(rs.Spec.Replicas)
		case "ReplicationController":
			rc, err := c.rcs.ReplicationControllers(p.Namespace).Get(ref.Name)
			if err != nil || rc.UID != ref.UID {
				return -1
			}
			total += replicas(rc.Spec.Replicas)
		default:
			return -1
		}
	}
	return total
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}
