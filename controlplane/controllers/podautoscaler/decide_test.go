package podautoscaler

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/controlplane/scheme"
)

var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func hpa(minR, maxR int32) *autoscalingv2.HorizontalPodAutoscaler {
	h := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Generation: 2},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: &minR, MaxReplicas: maxR,
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", APIVersion: "apps/v1", Name: "web"}}}
	scheme.DefaultHPA(h) // an 80% CPU target
	return h
}

func cond(st autoscalingv2.HorizontalPodAutoscalerStatus, t autoscalingv2.HorizontalPodAutoscalerConditionType) autoscalingv2.HorizontalPodAutoscalerCondition {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c
		}
	}
	return autoscalingv2.HorizontalPodAutoscalerCondition{}
}

func TestDecide(t *testing.T) {
	noMetrics := []Utilization{{Err: errors.New("unable to get metrics for resource cpu: no metrics returned from resource metrics API")}}
	for _, tc := range []struct {
		name     string
		h        *autoscalingv2.HorizontalPodAutoscaler
		current  int32
		metrics  []Utilization
		want     int32
		condType autoscalingv2.HorizontalPodAutoscalerConditionType
		reason   string
	}{
		{"target scaled to zero", hpa(1, 5), 0, nil, 0, autoscalingv2.ScalingActive, "ScalingDisabled"},
		{"above max, without metrics", hpa(1, 5), 8, noMetrics, 5, autoscalingv2.AbleToScale, "SucceededRescale"},
		{"below min, without metrics", hpa(3, 5), 1, noMetrics, 3, autoscalingv2.AbleToScale, "SucceededRescale"},
		{"no metrics API", hpa(1, 5), 2, noMetrics, 2, autoscalingv2.ScalingActive, "FailedGetResourceMetric"},
		{"twice the target doubles", hpa(1, 10), 2, []Utilization{{Percent: 160}}, 4, autoscalingv2.ScalingActive, "ValidMetricFound"},
		{"within tolerance stays", hpa(1, 10), 4, []Utilization{{Percent: 85}}, 4, autoscalingv2.AbleToScale, "ReadyForNewScale"},
		{"half the target halves", hpa(1, 10), 4, []Utilization{{Percent: 40}}, 2, autoscalingv2.AbleToScale, "SucceededRescale"},
		{"capped by max", hpa(1, 3), 2, []Utilization{{Percent: 400}}, 3, autoscalingv2.ScalingLimited, "TooManyReplicas"},
		{"floored by min", hpa(2, 10), 2, []Utilization{{Percent: 1}}, 2, autoscalingv2.ScalingLimited, "TooFewReplicas"},
	} {
		d := Decide(tc.h, tc.current, tc.metrics, now)
		if d.Desired != tc.want || d.Status.DesiredReplicas != tc.want {
			t.Errorf("%s: desired %d (status %d), want %d", tc.name, d.Desired, d.Status.DesiredReplicas, tc.want)
		}
		if c := cond(d.Status, tc.condType); c.Reason != tc.reason {
			t.Errorf("%s: %s reason %q, want %q (%+v)", tc.name, tc.condType, c.Reason, tc.reason, d.Status.Conditions)
		}
		if d.Status.CurrentReplicas != tc.current || ptr.Deref(d.Status.ObservedGeneration, 0) != 2 {
			t.Errorf("%s: status %+v", tc.name, d.Status)
		}
		if (d.Desired != tc.current) != (d.Status.LastScaleTime != nil) {
			t.Errorf("%s: lastScaleTime %v", tc.name, d.Status.LastScaleTime)
		}
	}
	d := Decide(hpa(1, 5), 2, noMetrics, now)
	if msg := cond(d.Status, autoscalingv2.ScalingActive).Message; !strings.Contains(msg, "the HPA was unable to compute the replica count: failed to get cpu utilization") {
		t.Errorf("message %q", msg)
	}
}

func runningPod(name string, cpu string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func TestMeasure(t *testing.T) {
	usage := map[string]map[string]corev1.ResourceList{
		"a": {"c": {corev1.ResourceCPU: resource.MustParse("150m")}},
		"b": {"c": {corev1.ResourceCPU: resource.MustParse("50m")}},
	}
	u := Measure(corev1.ResourceCPU, []*corev1.Pod{runningPod("a", "100m"), runningPod("b", "100m"), runningPod("nometrics", "100m")}, usage)
	if u.Err != nil || u.Percent != 100 || u.Average != 100 {
		t.Errorf("utilization %+v, want 100%% and 100m average", u)
	}
	bare := runningPod("a", "1")
	bare.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	if u := Measure(corev1.ResourceCPU, []*corev1.Pod{bare}, usage); u.Err == nil || !strings.Contains(u.Err.Error(), "missing request for cpu in container c of Pod a") {
		t.Errorf("no request: %v", u.Err)
	}
	if u := Measure(corev1.ResourceCPU, nil, usage); u.Err == nil {
		t.Error("no pods measured without an error")
	}
}

type fakeScales struct {
	replicas int32
	updates  []int32
}

func (f *fakeScales) Get(_ context.Context, ns string, gr schema.GroupResource, name string) (*autoscalingv1.Scale, error) {
	if gr.Resource != "deployments" || name != "web" {
		return nil, errors.New("no such target")
	}
	return &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: f.replicas},
		Status: autoscalingv1.ScaleStatus{Replicas: f.replicas, Selector: "app=web"}}, nil
}

func (f *fakeScales) Update(_ context.Context, _ string, _ schema.GroupResource, s *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
	f.updates = append(f.updates, s.Spec.Replicas)
	f.replicas = s.Spec.Replicas
	return s, nil
}

// A sync reads the scale and the metrics, rescales, records an event and writes the status.
func TestSync(t *testing.T) {
	h := hpa(1, 10)
	pods := []*corev1.Pod{runningPod("a", "100m"), runningPod("b", "100m")}
	client := fake.NewClientset(h)
	factory := informers.NewSharedInformerFactory(client, 0)
	_ = factory.Autoscaling().V2().HorizontalPodAutoscalers().Informer().GetIndexer().Add(h)
	for _, p := range pods {
		_ = factory.Core().V1().Pods().Informer().GetIndexer().Add(p)
	}
	scales := &fakeScales{replicas: 2}
	metrics := func(_ context.Context, ns string, sel labels.Selector) (map[string]map[string]corev1.ResourceList, error) {
		if sel.String() != "app=web" {
			t.Errorf("selector %q", sel)
		}
		return map[string]map[string]corev1.ResourceList{
			"a": {"c": {corev1.ResourceCPU: resource.MustParse("200m")}}, "b": {"c": {corev1.ResourceCPU: resource.MustParse("200m")}}}, nil
	}
	mapping := func(kind, apiVersion string) (schema.GroupResource, error) {
		return schema.GroupResource{Group: "apps", Resource: "deployments"}, nil
	}
	rec := record.NewFakeRecorder(10)
	c := New(client, factory.Autoscaling().V2().HorizontalPodAutoscalers(), factory.Core().V1().Pods(), scales, metrics, mapping, rec,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	c.now = func() time.Time { return now }
	if err := c.sync(context.Background(), "default/web"); err != nil {
		t.Fatal(err)
	}
	// 200% of requests against an 80% target: 2 * 2.5 = 5 replicas.
	if len(scales.updates) != 1 || scales.updates[0] != 5 {
		t.Errorf("scale updates %v, want [5]", scales.updates)
	}
	if e := <-rec.Events; !strings.Contains(e, "SuccessfulRescale New size: 5; reason: cpu resource utilization (percentage of request) above target") {
		t.Errorf("event %q", e)
	}
	got, err := client.AutoscalingV2().HorizontalPodAutoscalers("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.DesiredReplicas != 5 || got.Status.CurrentReplicas != 2 || len(got.Status.CurrentMetrics) != 1 ||
		*got.Status.CurrentMetrics[0].Resource.Current.AverageUtilization != 200 {
		t.Errorf("status %+v", got.Status)
	}
}
