// Package podgc is upstream's pod garbage collector: every 20 s it force-deletes the pods
// bound to nodes that no longer exist (their agent will never finish them), terminating
// pods that were never scheduled, and the oldest finished pods beyond a threshold, each
// marked DisruptionTarget (DeletionByPodGC) first so their controllers see why.
package podgc

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Name is the controller's name; its service account is upstream's.
const Name = "pod-garbage-collector"

// Upstream's defaults: the period, and how many finished pods may stay.
const (
	period                  = 20 * time.Second
	TerminatedPodsThreshold = 12500
	// quarantine is how long a node must be missing before its pods go, as upstream: a
	// node being re-registered is not a node gone.
	quarantine = 40 * time.Second
)

// Plan is what one pass deletes, decided without I/O.
type Plan struct {
	// Orphans are bound to nodes that do not exist.
	Orphans []*corev1.Pod
	// Unscheduled are terminating pods no node will finish.
	Unscheduled []*corev1.Pod
	// Terminated are the oldest finished pods beyond the threshold.
	Terminated []*corev1.Pod
}

// Decide picks the pods to collect from all pods and the names of the nodes that exist.
// A node missing from the cache must be confirmed gone by the caller before its pods go.
func Decide(pods []*corev1.Pod, nodes map[string]bool, threshold int) Plan {
	var p Plan
	var finished []*corev1.Pod
	for _, pod := range pods {
		switch {
		case pod.Spec.NodeName == "" && pod.DeletionTimestamp != nil:
			p.Unscheduled = append(p.Unscheduled, pod)
		case pod.Spec.NodeName != "" && !nodes[pod.Spec.NodeName]:
			p.Orphans = append(p.Orphans, pod)
		case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
			finished = append(finished, pod)
		}
	}
	if threshold > 0 && len(finished) > threshold {
		sort.Slice(finished, func(i, j int) bool { return finished[i].CreationTimestamp.Before(&finished[j].CreationTimestamp) })
		p.Terminated = finished[:len(finished)-threshold]
	}
	return p
}

// Controller collects pods.
type Controller struct {
	client kubernetes.Interface
	pods   corelisters.PodLister
	nodes  corelisters.NodeLister
	synced []cache.InformerSynced
	log    *slog.Logger
	// missingSince is when each missing node was first found missing.
	missingSince map[string]time.Time
	now          func() time.Time
}

// New wires the controller.
func New(client kubernetes.Interface, pods coreinformers.PodInformer, nodes coreinformers.NodeInformer, log *slog.Logger) *Controller {
	return &Controller{client: client, pods: pods.Lister(), nodes: nodes.Lister(),
		synced: []cache.InformerSynced{pods.Informer().HasSynced, nodes.Informer().HasSynced}, log: log.With("controller", Name),
		missingSince: map[string]time.Time{}, now: time.Now}
}

// Run collects every period until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		if err := c.collect(ctx); err != nil {
			c.log.Warn("pod garbage collection", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Controller) collect(ctx context.Context) error {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return err
	}
	nodeList, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	nodes := map[string]bool{}
	for _, n := range nodeList {
		nodes[n.Name] = true
	}
	plan := Decide(pods, nodes, TerminatedPodsThreshold)
	var errs []error
	gone := map[string]bool{}
	missing := map[string]bool{}
	for _, p := range plan.Orphans {
		node := p.Spec.NodeName
		missing[node] = true
		if _, seen := gone[node]; !seen {
			since, ok := c.missingSince[node]
			if !ok {
				since = c.now()
				c.missingSince[node] = since
			}
			// The cache may not know a node that just registered: ask, after the quarantine.
			gone[node] = false
			if c.now().Sub(since) >= quarantine {
				_, err := c.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
				gone[node] = apierrors.IsNotFound(err)
			}
		}
		if !gone[node] {
			continue
		}
		errs = append(errs, c.delete(ctx, p, "PodGC: node no longer exists"))
	}
	for node := range c.missingSince {
		if !missing[node] {
			delete(c.missingSince, node)
		}
	}
	for _, p := range plan.Unscheduled {
		errs = append(errs, c.delete(ctx, p, ""))
	}
	for _, p := range plan.Terminated {
		errs = append(errs, c.delete(ctx, p, ""))
	}
	return errors.Join(errs...)
}

// delete force-deletes a pod, after marking a live one DisruptionTarget with why.
func (c *Controller) delete(ctx context.Context, p *corev1.Pod, why string) error {
	if why != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		patch, _ := json.Marshal(map[string]any{"status": map[string]any{
			"phase": corev1.PodFailed,
			"conditions": []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: "DeletionByPodGC", Message: why, LastTransitionTime: metav1.Now()}},
		}})
		if _, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	zero := int64(0)
	err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	c.log.Info("collected pod", "pod", p.Namespace+"/"+p.Name, "node", p.Spec.NodeName, "why", why)
	return nil
}
