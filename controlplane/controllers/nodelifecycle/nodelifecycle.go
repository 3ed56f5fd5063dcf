// Package nodelifecycle watches node heartbeats (Leases in kube-node-lease): a node whose
// Lease is not renewed within the grace period (40 s) is marked Ready=Unknown and tainted
// unreachable; a node reporting Ready=False is tainted not-ready; the NoExecute taints evict
// pods once their tolerationSeconds run out; a recovered node loses the taints. Pressure
// conditions (memory, disk, PID) and NetworkUnavailable taint the node NoSchedule while true.
package nodelifecycle

import (
	"context"
	"log/slog"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coordinationinformers "k8s.io/client-go/informers/coordination/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// Name is the controller's name (and its service account's).
const Name = "node-controller"

// LeaseNamespace holds the node heartbeat Leases.
const LeaseNamespace = "kube-node-lease"

const nodeNameIndex = "spec.nodeName"

// Options tune the controller.
type Options struct {
	// GracePeriod is how long a Lease may go unrenewed before the node is Unknown (40 s).
	GracePeriod time.Duration
	// MonitorPeriod is how often nodes are checked (2 s).
	MonitorPeriod time.Duration
}

// Controller monitors nodes.
type Controller struct {
	client   kubernetes.Interface
	nodes    corelisters.NodeLister
	leases   coordinationlisters.LeaseLister
	pods     cache.Indexer
	synced   []cache.InformerSynced
	recorder record.EventRecorder
	opts     Options
	log      *slog.Logger
	now      func() time.Time

	mu sync.Mutex
	// seen is when this controller last saw each node's Lease renewal change. Using our own
	// clock, not the agent's renewTime, keeps clock skew between machines out of the verdict.
	seen map[string]observation
}

type observation struct {
	renew metav1.MicroTime
	at    time.Time
}

// New wires the controller.
func New(client kubernetes.Interface, nodes coreinformers.NodeInformer, leases coordinationinformers.LeaseInformer,
	pods coreinformers.PodInformer, recorder record.EventRecorder, o Options, log *slog.Logger) *Controller {
	if o.GracePeriod == 0 {
		o.GracePeriod = 40 * time.Second
	}
	if o.MonitorPeriod == 0 {
		o.MonitorPeriod = 2 * time.Second
	}
	_ = pods.Informer().AddIndexers(cache.Indexers{nodeNameIndex: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}})
	return &Controller{client: client, nodes: nodes.Lister(), leases: leases.Lister(), pods: pods.Informer().GetIndexer(),
		synced:   []cache.InformerSynced{nodes.Informer().HasSynced, leases.Informer().HasSynced, pods.Informer().HasSynced},
		recorder: recorder, opts: o, log: log.With("controller", Name), now: time.Now, seen: map[string]observation{}}
}

// Run monitors nodes every MonitorPeriod until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	t := time.NewTicker(c.opts.MonitorPeriod)
	defer t.Stop()
	for {
		c.monitor(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Controller) monitor(ctx context.Context) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	now := c.now()
	for _, n := range nodes {
		if err := c.monitorNode(ctx, n, now); err != nil && ctx.Err() == nil {
			c.log.Warn("monitor node", "node", n.Name, "err", err)
		}
	}
}

// lastHeard is when this controller last saw the node's Lease renewed.
func (c *Controller) lastHeard(n *corev1.Node, lease *coordinationv1.Lease, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var renew metav1.MicroTime
	if lease != nil && lease.Spec.RenewTime != nil {
		renew = *lease.Spec.RenewTime
	}
	o, ok := c.seen[n.Name]
	if !ok || !o.renew.Equal(&renew) {
		o = observation{renew: renew, at: now}
		c.seen[n.Name] = o
	}
	return o.at
}

func (c *Controller) monitorNode(ctx context.Context, n *corev1.Node, now time.Time) error {
	lease, err := c.leases.Leases(LeaseNamespace).Get(n.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if apierrors.IsNotFound(err) {
		lease = nil
	}
	ready := ReadyStatus(n)
	if now.Sub(c.lastHeard(n, lease, now)) > c.opts.GracePeriod && ready != corev1.ConditionUnknown {
		// Continue from the node the status update returned: the cached one carries the old
		// resourceVersion, and the taint update below would fail with a conflict.
		updated, err := c.markUnknown(ctx, n, now)
		if err != nil {
			return err
		}
		n = updated
		ready = corev1.ConditionUnknown
		c.recorder.Eventf(n, corev1.EventTypeNormal, "NodeNotReady", "Node %s status is now: NodeNotReady", n.Name)
	}
	taints, changed := ReconcileTaints(n.Spec.Taints, append(WantedTaints(ready), ConditionTaints(n)...), now)
	if changed {
		cp := n.DeepCopy()
		cp.Spec.Taints = taints
		updated, err := c.client.CoreV1().Nodes().Update(ctx, cp, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		n = updated
		c.log.Info("node lifecycle taints", "node", n.Name, "ready", ready, "taints", len(taints))
	}
	return c.evict(ctx, n, now)
}

func (c *Controller) markUnknown(ctx context.Context, n *corev1.Node, now time.Time) (*corev1.Node, error) {
	cp := n.DeepCopy()
	types := []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure}
	for _, t := range types {
		found := false
		for i := range cp.Status.Conditions {
			c := &cp.Status.Conditions[i]
			if c.Type == t {
				found = true
				if c.Status != corev1.ConditionUnknown {
					c.Status, c.Reason, c.Message = corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."
					c.LastTransitionTime = metav1.NewTime(now)
				}
			}
		}
		if !found {
			cp.Status.Conditions = append(cp.Status.Conditions, corev1.NodeCondition{Type: t, Status: corev1.ConditionUnknown,
				Reason: "NodeStatusNeverUpdated", Message: "Kubelet never posted node status.",
				LastHeartbeatTime: metav1.NewTime(n.CreationTimestamp.Time), LastTransitionTime: metav1.NewTime(now)})
		}
	}
	return c.client.CoreV1().Nodes().UpdateStatus(ctx, cp, metav1.UpdateOptions{})
}

// evict deletes the pods whose toleration of the node's NoExecute taints ran out.
func (c *Controller) evict(ctx context.Context, n *corev1.Node, now time.Time) error {
	hasNoExecute := false
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			hasNoExecute = true
		}
	}
	if !hasNoExecute {
		return nil
	}
	objs, err := c.pods.ByIndex(nodeNameIndex, n.Name)
	if err != nil {
		return err
	}
	for _, o := range objs {
		p := o.(*corev1.Pod)
		if p.DeletionTimestamp != nil {
			continue
		}
		at, evict := EvictionTime(p, n.Spec.Taints)
		if !evict || at.After(now) {
			continue
		}
		err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
		c.recorder.Eventf(p, corev1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod %s/%s", p.Namespace, p.Name)
		c.log.Info("evicted pod", "pod", p.Namespace+"/"+p.Name, "node", n.Name)
	}
	return nil
}
