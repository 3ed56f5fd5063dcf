package podautoscaler

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	autoscalinginformers "k8s.io/client-go/informers/autoscaling/v2"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name; its service account is upstream's.
const Name = "horizontal-pod-autoscaler"

// syncPeriod is how often each HPA is looked at, upstream's default.
const syncPeriod = 15 * time.Second

// Scales reads and writes a target's scale subresource.
type Scales interface {
	Get(ctx context.Context, namespace string, gr schema.GroupResource, name string) (*autoscalingv1.Scale, error)
	Update(ctx context.Context, namespace string, gr schema.GroupResource, scale *autoscalingv1.Scale) (*autoscalingv1.Scale, error)
}

// Metrics reads the samples of the pods a selector matches from the resource metrics API,
// by pod name.
type Metrics func(ctx context.Context, namespace string, selector labels.Selector) (map[string]PodUsage, error)

// Controller reconciles HPAs.
type Controller struct {
	client   kubernetes.Interface
	hpas     autoscalinglisters.HorizontalPodAutoscalerLister
	pods     corelisters.PodLister
	scales   Scales
	metrics  Metrics
	mapping  func(kind, apiVersion string) (schema.GroupResource, error)
	synced   []cache.InformerSynced
	recorder record.EventRecorder
	loop     *loop.Loop
	now      func() time.Time

	// mu guards history, which the workers share; one HPA's History is only used by the
	// worker syncing it (the queue never hands a key to two workers at once).
	mu      sync.Mutex
	history map[string]*hpaHistory
}

// hpaHistory is an HPA's History, tied to the object's UID so that an HPA deleted and
// created again under the same name starts afresh.
type hpaHistory struct {
	uid types.UID
	History
}

// New wires the controller. mapping turns a scaleTargetRef's kind and apiVersion into the
// resource whose scale subresource it uses.
func New(client kubernetes.Interface, hpas autoscalinginformers.HorizontalPodAutoscalerInformer, pods coreinformers.PodInformer,
	scales Scales, metrics Metrics, mapping func(kind, apiVersion string) (schema.GroupResource, error), recorder record.EventRecorder, log *slog.Logger) *Controller {
	c := &Controller{client: client, hpas: hpas.Lister(), pods: pods.Lister(), scales: scales, metrics: metrics, mapping: mapping,
		synced: []cache.InformerSynced{hpas.Informer().HasSynced, pods.Informer().HasSynced}, recorder: recorder, now: time.Now,
		history: map[string]*hpaHistory{}}
	c.loop = loop.New(Name, c.sync, log)
	_, _ = hpas.Informer().AddEventHandler(c.loop.Handler())
	return c
}

// Run syncs until ctx ends.
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
	h, err := c.hpas.HorizontalPodAutoscalers(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	defer c.loop.AddAfter(key, syncPeriod)
	now := c.now()
	ref := h.Spec.ScaleTargetRef
	gr, err := c.mapping(ref.Kind, ref.APIVersion)
	var scale *autoscalingv1.Scale
	if err == nil {
		scale, err = c.scales.Get(ctx, ns, gr, ref.Name)
	}
	if err != nil {
		st := *h.Status.DeepCopy()
		setCondition(&st, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedGetScale", fmt.Sprintf("the HPA controller was unable to get the target's current scale: %v", err), now)
		c.recorder.Eventf(h, corev1.EventTypeWarning, "FailedGetScale", "%v", err)
		return c.writeStatus(ctx, h, st)
	}
	current := scale.Spec.Replicas
	hist := c.historyOf(key, h.UID)
	d := Decide(h, current, c.propose(ctx, h, scale, now), hist, now)
	if d.Desired != current {
		scale.Spec.Replicas = d.Desired
		if _, err := c.scales.Update(ctx, ns, gr, scale); err != nil {
			// Nothing changed: the last desired count and scale time stand, as upstream.
			st := d.Status
			st.DesiredReplicas, st.LastScaleTime = h.Status.DesiredReplicas, h.Status.LastScaleTime
			setCondition(&st, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedUpdateScale", fmt.Sprintf("the HPA controller was unable to update the target scale: %v", err), now)
			c.recorder.Eventf(h, corev1.EventTypeWarning, "FailedRescale", "New size: %d; reason: %s; error: %v", d.Desired, d.Reason, err)
			return c.writeStatus(ctx, h, st)
		}
		hist.RecordScale(h.Spec.Behavior, current, d.Desired, now)
		c.recorder.Eventf(h, corev1.EventTypeNormal, "SuccessfulRescale", "New size: %d; reason: %s", d.Desired, d.Reason)
	}
	return c.writeStatus(ctx, h, d.Status)
}

func (c *Controller) writeStatus(ctx context.Context, h *autoscalingv2.HorizontalPodAutoscaler, st autoscalingv2.HorizontalPodAutoscalerStatus) error {
	if apiequality.Semantic.DeepEqual(st, h.Status) {
		return nil
	}
	cp := h.DeepCopy()
	cp.Status = st
	_, err := c.client.AutoscalingV2().HorizontalPodAutoscalers(h.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
	return err
}

// historyOf is the HPA's history, a new one the first time (or for a new HPA of that name).
func (c *Controller) historyOf(key string, uid types.UID) *History {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.history[key]
	if !ok || h.uid != uid {
		h = &hpaHistory{uid: uid}
		c.history[key] = h
	}
	return &h.History
}

// forget drops a deleted HPA's history.
func (c *Controller) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.history, key)
}

// propose reads the target's pods and their samples and asks each Resource metric of the
// HPA for a replica count (others are left for Decide to refuse).
func (c *Controller) propose(ctx context.Context, h *autoscalingv2.HorizontalPodAutoscaler, scale *autoscalingv1.Scale, now time.Time) []Proposal {
	out := make([]Proposal, len(h.Spec.Metrics))
	sel, err := labels.Parse(scale.Status.Selector)
	if err == nil && scale.Status.Selector == "" {
		err = fmt.Errorf("the target's scale has no selector")
	}
	var usage map[string]PodUsage
	var metricsErr error // worded per resource, as upstream
	if err == nil {
		usage, metricsErr = c.metrics(ctx, h.Namespace, sel)
	}
	var pods []*corev1.Pod
	if err == nil && metricsErr == nil {
		if pods, err = c.pods.Pods(h.Namespace).List(sel); err != nil {
			err = fmt.Errorf("unable to get pods while calculating replica count: %w", err)
		}
	}
	tol := tolerancesFor(h)
	for i, m := range h.Spec.Metrics {
		if m.Type != autoscalingv2.ResourceMetricSourceType || m.Resource == nil {
			continue
		}
		switch {
		case err != nil:
			out[i].Err = failed(m.Resource, err)
		case metricsErr != nil:
			out[i].Err = failed(m.Resource, fmt.Errorf("unable to get metrics for resource %s: %w", m.Resource.Name, metricsErr))
		default:
			out[i] = ResourceReplicas(m.Resource, scale.Spec.Replicas, pods, usage, tol, now)
		}
	}
	return out
}

// ResourceMetrics reads PodMetrics from metrics.k8s.io/v1beta1 through client's REST client:
// each pod's containers' usage, and when and over how long it was measured.
func ResourceMetrics(client kubernetes.Interface) Metrics {
	return func(ctx context.Context, namespace string, selector labels.Selector) (map[string]PodUsage, error) {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/namespaces", namespace, "pods").
			Param("labelSelector", selector.String()).DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("unable to fetch metrics from resource metrics API: %w", err)
		}
		return parsePodMetrics(body)
	}
}

// parsePodMetrics reads a PodMetricsList (metrics.k8s.io/v1beta1, which skiff does not
// import the types of).
func parsePodMetrics(body []byte) (map[string]PodUsage, error) {
	var list struct {
		Items []struct {
			Metadata   metav1.ObjectMeta `json:"metadata"`
			Timestamp  metav1.Time       `json:"timestamp"`
			Window     metav1.Duration   `json:"window"`
			Containers []struct {
				Name  string                       `json:"name"`
				Usage map[string]resource.Quantity `json:"usage"`
			} `json:"containers"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("resource metrics API: %w", err)
	}
	out := make(map[string]PodUsage, len(list.Items))
	for _, it := range list.Items {
		cs := make(map[string]corev1.ResourceList, len(it.Containers))
		for _, ctr := range it.Containers {
			rl := corev1.ResourceList{}
			for k, v := range ctr.Usage {
				rl[corev1.ResourceName(k)] = v
			}
			cs[ctr.Name] = rl
		}
		out[it.Metadata.Name] = PodUsage{Containers: cs, Timestamp: it.Timestamp.Time, Window: it.Window.Duration}
	}
	return out, nil
}
