package podautoscaler

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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
	autoscalinginformers "k8s.io/client-go/informers/autoscaling/v2"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/skiff-sh/skiff/controlplane/controllers/loop"
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

// Metrics reads pods' usage from the resource metrics API: per pod, per container, per
// resource, in milli-units.
type Metrics func(ctx context.Context, namespace string, selector labels.Selector) (map[string]map[string]corev1.ResourceList, error)

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
}

// New wires the controller. mapping turns a scaleTargetRef's kind and apiVersion into the
// resource whose scale subresource it uses.
func New(client kubernetes.Interface, hpas autoscalinginformers.HorizontalPodAutoscalerInformer, pods coreinformers.PodInformer,
	scales Scales, metrics Metrics, mapping func(kind, apiVersion string) (schema.GroupResource, error), recorder record.EventRecorder, log *slog.Logger) *Controller {
	c := &Controller{client: client, hpas: hpas.Lister(), pods: pods.Lister(), scales: scales, metrics: metrics, mapping: mapping,
		synced: []cache.InformerSynced{hpas.Informer().HasSynced, pods.Informer().HasSynced}, recorder: recorder, now: time.Now}
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
	d := Decide(h, scale.Spec.Replicas, c.utilization(ctx, h, scale), now)
	if d.Desired != scale.Spec.Replicas {
		scale.Spec.Replicas = d.Desired
		if _, err := c.scales.Update(ctx, ns, gr, scale); err != nil {
			st := d.Status
			setCondition(&st, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedUpdateScale", fmt.Sprintf("the HPA controller was unable to update the target scale: %v", err), now)
			c.recorder.Eventf(h, corev1.EventTypeWarning, "FailedRescale", "New size: %d; reason: %s; error: %v", d.Desired, d.Reason, err)
			return c.writeStatus(ctx, h, st)
		}
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

// utilization measures each Resource metric of the HPA over the target's running pods.
func (c *Controller) utilization(ctx context.Context, h *autoscalingv2.HorizontalPodAutoscaler, scale *autoscalingv1.Scale) []Utilization {
	out := make([]Utilization, len(h.Spec.Metrics))
	sel, err := labels.Parse(scale.Status.Selector)
	if err == nil && scale.Status.Selector == "" {
		err = fmt.Errorf("the target's scale has no selector")
	}
	var usage map[string]map[string]corev1.ResourceList
	if err == nil {
		usage, err = c.metrics(ctx, h.Namespace, sel)
	}
	var pods []*corev1.Pod
	if err == nil {
		pods, err = c.pods.Pods(h.Namespace).List(sel)
	}
	for i, m := range h.Spec.Metrics {
		if err != nil {
			out[i].Err = err
			continue
		}
		if m.Type != autoscalingv2.ResourceMetricSourceType || m.Resource == nil {
			continue
		}
		out[i] = Measure(m.Resource.Name, pods, usage)
	}
	return out
}

// Measure is the pods' use of a resource as a percentage of their requests (and the
// average use), over the running pods that have metrics, as upstream's replica calculator.
func Measure(name corev1.ResourceName, pods []*corev1.Pod, usage map[string]map[string]corev1.ResourceList) Utilization {
	var used, requested int64
	n := 0
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		containers, ok := usage[p.Name]
		if !ok {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			req, ok := ctr.Resources.Requests[name]
			if !ok {
				return Utilization{Err: fmt.Errorf("missing request for %s in container %s of Pod %s", name, ctr.Name, p.Name)}
			}
			requested += req.MilliValue()
			if q, ok := containers[ctr.Name][name]; ok {
				used += q.MilliValue()
			}
		}
		n++
	}
	if n == 0 || requested == 0 {
		return Utilization{Err: fmt.Errorf("unable to get metrics for resource %s: no metrics returned from resource metrics API", name)}
	}
	return Utilization{Percent: int32(used * 100 / requested), Average: used / int64(n)}
}

// ResourceMetrics reads PodMetrics from metrics.k8s.io/v1beta1 through client's REST client.
func ResourceMetrics(client kubernetes.Interface) Metrics {
	return func(ctx context.Context, namespace string, selector labels.Selector) (map[string]map[string]corev1.ResourceList, error) {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/namespaces", namespace, "pods").
			Param("labelSelector", selector.String()).DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("unable to get metrics for resource: unable to fetch metrics from resource metrics API: %w", err)
		}
		var list struct {
			Items []struct {
				Metadata   metav1.ObjectMeta `json:"metadata"`
				Containers []struct {
					Name  string                       `json:"name"`
					Usage map[string]resource.Quantity `json:"usage"`
				} `json:"containers"`
			} `json:"items"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			return nil, fmt.Errorf("resource metrics API: %w", err)
		}
		out := map[string]map[string]corev1.ResourceList{}
		for _, it := range list.Items {
			cs := map[string]corev1.ResourceList{}
			for _, ctr := range it.Containers {
				rl := corev1.ResourceList{}
				for k, v := range ctr.Usage {
					rl[corev1.ResourceName(k)] = v
				}
				cs[ctr.Name] = rl
			}
			out[it.Metadata.Name] = cs
		}
		return out, nil
	}
}
