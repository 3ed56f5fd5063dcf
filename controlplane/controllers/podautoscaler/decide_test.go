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
	h := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Generation: 2, UID: "uid-1"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: &minR, MaxReplicas: maxR,
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", APIVersion: "apps/v1", Name: "web"}}}
	scheme.DefaultHPA(h) // an 80% CPU target
	return h
}

// withMetrics replaces the HPA's metrics.
func withMetrics(h *autoscalingv2.HorizontalPodAutoscaler, ms ...autoscalingv2.MetricSpec) *autoscalingv2.HorizontalPodAutoscaler {
	h.Spec.Metrics = ms
	return h
}

func resourceMetric(m *autoscalingv2.ResourceMetricSource) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: m}
}

func cond(st autoscalingv2.HorizontalPodAutoscalerStatus, t autoscalingv2.HorizontalPodAutoscalerConditionType) autoscalingv2.HorizontalPodAutoscalerCondition {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c
		}
	}
	return autoscalingv2.HorizontalPodAutoscalerCondition{}
}

func proposal(n int32, pct int32) Proposal {
	return Proposal{Replicas: n, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To(pct)}}
}

func TestDecide(t *testing.T) {
	noMetrics := []Proposal{{Err: errors.New("failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API")}}
	memoryFailed := Proposal{Err: errors.New("failed to get memory utilization: did not receive metrics for targeted pods (pods might be unready)")}
	cpuAndMemory := func() *autoscalingv2.HorizontalPodAutoscaler {
		return withMetrics(hpa(1, 10), resourceMetric(cpuUtilization(50)),
			resourceMetric(&autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}))
	}
	for _, tc := range []struct {
		name      string
		h         *autoscalingv2.HorizontalPodAutoscaler
		current   int32
		proposals []Proposal
		want      int32
		conds     map[autoscalingv2.HorizontalPodAutoscalerConditionType]string
		reason    string // the event's, when checked
		message   string // part of ScalingActive's
	}{
		{name: "target scaled to zero", h: hpa(1, 5), current: 0, want: 0,
			conds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScalingActive: "ScalingDisabled", autoscalingv2.AbleToScale: "SucceededGetScale"}},
		{name: "above max, without metrics", h: hpa(1, 5), current: 8, proposals: noMetrics, want: 5,
			conds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.AbleToScale: "SucceededRescale"}, reason: "Current number of replicas above Spec.MaxReplicas"},
		{name: "below min, without metrics", h: hpa(3, 5), current: 1, proposals: noMetrics, want: 3,
			conds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.AbleToScale: "SucceededRescale"}, reason: "Current number of replicas below Spec.MinReplicas"},
		{name: "no metrics API", h: hpa(1, 5), current: 2, proposals: noMetrics, want: 2,
			conds:   map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScalingActive: "FailedGetResourceMetric", autoscalingv2.AbleToScale: "SucceededGetScale"},
			message: "the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics for resource cpu"},
		{name: "a higher proposal is applied", h: hpa(1, 10), current: 2, proposals: []Proposal{proposal(4, 160)}, want: 4,
			conds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScalingActive: "ValidMetricFound", autoscalingv2.AbleToScale: "SucceededRescale",
				autoscalingv2.ScalingLimited: "DesiredWithinRange"},
			reason: "cpu resource utilization (percentage of request) above target", message: "from cpu resource utilization (percentage of request)"},
		{name: "the same count stays", h: hpa(1, 10), current: 4, proposals: []Proposal{proposal(4, 85)}, want: 4,
			conds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.AbleToScale: "ReadyForNewScale"}},
		// The first sync records the current count: a scale-down waits 5 minutes.
		{name: "a lower proposal is stabilized", h: hpa(1, 10), current: 4, proposals: []Proposal{proposal(2, 40)}, want: 4,
			conds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.AbleToScale: "ScaleDownStabilized"}},
		{name: "capped by max", h: hpa(1, 3), current: 2, proposals: []Proposal{proposal(5, 400)}, want: 3,
			conds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScalingLimited: "TooManyReplicas"}},
		{name: "capped by the scale-up limit", h: hpa(1, 10), current: 1, proposals: []Proposal{proposal(10, 1000)}, want: 4,
			conds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScalingLimited: "ScaleUpLimit"}},
		{name: "floored by min", h: behaving(2, 10, autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)}}),
			current: 3, proposals: []Proposal{proposal(1, 1)}, want: 2,
			conds:  map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScalingLimited: "TooFewReplicas", autoscalingv2.AbleToScale: "SucceededRescale"},
			reason: "All metrics below target"},
		{name: "an unsupported metric type", current: 2, want: 2,
			h:       withMetrics(hpa(1, 10), autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType}),
			conds:   map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScalingActive: "FailedGetPodsMetric"},
			message: "metrics of type Pods are not supported by skiff yet"},
		{name: "the largest proposal wins", h: cpuAndMemory(), current: 2, proposals: []Proposal{proposal(3, 75), proposal(5, 125)}, want: 4,
			reason: "memory resource utilization (percentage of request) above target", message: "from memory resource utilization"},
		{name: "a failed metric does not veto a scale-up", h: cpuAndMemory(), current: 2, proposals: []Proposal{proposal(3, 75), memoryFailed}, want: 3,
			conds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScalingActive: "ValidMetricFound"}},
		{name: "a failed metric vetoes a scale-down", h: cpuAndMemory(), current: 4, proposals: []Proposal{proposal(1, 10), memoryFailed}, want: 4,
			conds:   map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScalingActive: "FailedGetResourceMetric"},
			message: "the HPA was unable to compute the replica count: failed to get memory utilization"},
	} {
		d := Decide(tc.h, tc.current, tc.proposals, nil, now)
		if d.Desired != tc.want {
			t.Errorf("%s: desired %d, want %d", tc.name, d.Desired, tc.want)
		}
		failed := cond(d.Status, autoscalingv2.ScalingActive).Status == corev1.ConditionFalse
		if wantStatus := map[bool]int32{false: tc.want, true: tc.h.Status.DesiredReplicas}[failed]; d.Status.DesiredReplicas != wantStatus {
			t.Errorf("%s: status desired %d, want %d", tc.name, d.Status.DesiredReplicas, wantStatus)
		}
		for ty, reason := range tc.conds {
			if c := cond(d.Status, ty); c.Reason != reason {
				t.Errorf("%s: %s reason %q, want %q (%+v)", tc.name, ty, c.Reason, reason, d.Status.Conditions)
			}
		}
		if tc.reason != "" && d.Reason != tc.reason {
			t.Errorf("%s: reason %q, want %q", tc.name, d.Reason, tc.reason)
		}
		if msg := cond(d.Status, autoscalingv2.ScalingActive).Message; !strings.Contains(msg, tc.message) {
			t.Errorf("%s: ScalingActive message %q, want it to contain %q", tc.name, msg, tc.message)
		}
		if d.Status.CurrentReplicas != tc.current || ptr.Deref(d.Status.ObservedGeneration, 0) != 2 {
			t.Errorf("%s: status %+v", tc.name, d.Status)
		}
		if (d.Desired != tc.current) != (d.Status.LastScaleTime != nil) {
			t.Errorf("%s: lastScaleTime %v", tc.name, d.Status.LastScaleTime)
		}
	}
}

// currentMetrics is indexed like spec.metrics, as kubectl reads it: a failed metric's
// entry is empty.
func TestDecideStatuses(t *testing.T) {
	h := withMetrics(hpa(1, 10), autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType}, resourceMetric(cpuUtilization(50)))
	d := Decide(h, 2, []Proposal{{}, proposal(3, 75)}, nil, now)
	if d.Desired != 3 || len(d.Status.CurrentMetrics) != 2 || d.Status.CurrentMetrics[0].Type != "" ||
		d.Status.CurrentMetrics[1].Resource == nil || d.Status.CurrentMetrics[1].Resource.Name != corev1.ResourceCPU ||
		ptr.Deref(d.Status.CurrentMetrics[1].Resource.Current.AverageUtilization, 0) != 75 {
		t.Errorf("desired %d, currentMetrics %+v", d.Desired, d.Status.CurrentMetrics)
	}
}

func TestParsePodMetrics(t *testing.T) {
	got, err := parsePodMetrics([]byte(`{"kind":"PodMetricsList","apiVersion":"metrics.k8s.io/v1beta1","metadata":{},"items":[
		{"metadata":{"name":"a","namespace":"default"},"timestamp":"2026-12-02T11:59:50Z","window":"15.5s",
		 "containers":[{"name":"c","usage":{"cpu":"150m","memory":"10Mi"}},{"name":"d","usage":{"cpu":"1","memory":"0"}}]},
		{"metadata":{"name":"b","namespace":"default"},"timestamp":"2026-12-02T11:59:55Z","window":"15s","containers":[]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	a := got["a"]
	if len(got) != 2 || !a.Timestamp.Equal(now.Add(-10*time.Second)) || a.Window != 15500*time.Millisecond ||
		ptr.To(a.Containers["c"][corev1.ResourceCPU]).MilliValue() != 150 || ptr.To(a.Containers["d"][corev1.ResourceCPU]).MilliValue() != 1000 ||
		ptr.To(a.Containers["c"][corev1.ResourceMemory]).Value() != 10<<20 {
		t.Errorf("parsed %+v", got)
	}
	if _, err := parsePodMetrics([]byte(`{"items":{}}`)); err == nil {
		t.Error("a malformed list parsed")
	}
}

func TestHistoryOf(t *testing.T) {
	c := &Controller{history: map[string]*hpaHistory{}}
	a := c.historyOf("default/web", "uid-1")
	if c.historyOf("default/web", "uid-1") != a {
		t.Error("a second sync got a new history")
	}
	if c.historyOf("default/web", "uid-2") == a {
		t.Error("a new HPA of the same name got the old one's history")
	}
	c.forget("default/web")
	if len(c.history) != 0 {
		t.Errorf("history kept: %+v", c.history)
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

// youngPod is a pod started at start whose Ready condition is status since readySince.
func youngPod(name string, start time.Time, status corev1.ConditionStatus, readySince time.Time) *corev1.Pod {
	p := pod(name, "100m")
	st := metav1.NewTime(start)
	p.Status.StartTime = &st
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(readySince)}}
	return p
}

// The live flap, through the controller: a Deployment at 150% of its CPU request against
// a 50% target goes 1 → 3, its two new pods have no samples, then untrusted ones, then the
// load spreads: it stays at 3, and only goes down 5 minutes after the load does. Each sync
// reads the scale and the samples, rescales, records an event and writes the status.
func TestSync(t *testing.T) {
	h := withMetrics(hpa(1, 10), resourceMetric(cpuUtilization(50)))
	client := fake.NewClientset(h)
	factory := informers.NewSharedInformerFactory(client, 0)
	hpas := factory.Autoscaling().V2().HorizontalPodAutoscalers().Informer().GetIndexer()
	pods := factory.Core().V1().Pods().Informer().GetIndexer()
	_ = hpas.Add(h)
	_ = pods.Add(pod("a", "100m"))
	scales := &fakeScales{replicas: 1}
	var usage map[string]PodUsage
	metrics := func(_ context.Context, ns string, sel labels.Selector) (map[string]PodUsage, error) {
		if sel.String() != "app=web" || ns != "default" {
			t.Errorf("metrics of %s %q", ns, sel)
		}
		return usage, nil
	}
	sampled := func(at time.Time, use map[string]string) map[string]PodUsage {
		out := samples(corev1.ResourceCPU, use)
		for name, u := range out {
			u.Timestamp, u.Window = at, 15*time.Second
			out[name] = u
		}
		return out
	}
	mapping := func(kind, apiVersion string) (schema.GroupResource, error) {
		return schema.GroupResource{Group: "apps", Resource: "deployments"}, nil
	}
	rec := record.NewFakeRecorder(10)
	c := New(client, factory.Autoscaling().V2().HorizontalPodAutoscalers(), factory.Core().V1().Pods(), scales, metrics, mapping, rec,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	sync := func(at time.Time) *autoscalingv2.HorizontalPodAutoscaler {
		t.Helper()
		c.now = func() time.Time { return at }
		if err := c.sync(context.Background(), "default/web"); err != nil {
			t.Fatal(err)
		}
		got, err := client.AutoscalingV2().HorizontalPodAutoscalers("default").Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = hpas.Update(got) // as the informer would
		return got
	}
	event := func(want string) {
		t.Helper()
		select {
		case e := <-rec.Events:
			if !strings.Contains(e, want) {
				t.Errorf("event %q, want %q", e, want)
			}
		default:
			t.Errorf("no event, want %q", want)
		}
	}

	// 150% against 50%: 1 × 3.
	usage = sampled(now.Add(-5*time.Second), map[string]string{"a": "150m"})
	got := sync(now)
	if len(scales.updates) != 1 || scales.updates[0] != 3 {
		t.Fatalf("scale updates %v, want [3]", scales.updates)
	}
	event("SuccessfulRescale New size: 3; reason: cpu resource utilization (percentage of request) above target")
	if got.Status.DesiredReplicas != 3 || got.Status.CurrentReplicas != 1 || len(got.Status.CurrentMetrics) != 1 ||
		*got.Status.CurrentMetrics[0].Resource.Current.AverageUtilization != 150 || got.Status.CurrentMetrics[0].Resource.Current.AverageValue.String() != "150m" ||
		got.Status.LastScaleTime == nil || !got.Status.LastScaleTime.Time.Equal(now) {
		t.Errorf("status %+v", got.Status)
	}

	// The new pods run but have no samples yet: they count as idle, 150/300 = 50%, on target.
	t1 := now.Add(15 * time.Second)
	_ = pods.Add(youngPod("new1", now.Add(5*time.Second), corev1.ConditionFalse, now.Add(5*time.Second)))
	_ = pods.Add(youngPod("new2", now.Add(5*time.Second), corev1.ConditionFalse, now.Add(5*time.Second)))
	usage = sampled(t1.Add(-5*time.Second), map[string]string{"a": "150m"})
	got = sync(t1)
	if len(scales.updates) != 1 {
		t.Errorf("scale updates %v with pods missing samples", scales.updates)
	}
	if c := cond(got.Status, autoscalingv2.AbleToScale); c.Reason != "ReadyForNewScale" || got.Status.DesiredReplicas != 3 || got.Status.CurrentReplicas != 3 {
		t.Errorf("status %+v", got.Status)
	}

	// Ready since t0+20s but sampled over a window that began before: still idle.
	t2 := now.Add(30 * time.Second)
	_ = pods.Update(youngPod("new1", now.Add(5*time.Second), corev1.ConditionTrue, now.Add(20*time.Second)))
	_ = pods.Update(youngPod("new2", now.Add(5*time.Second), corev1.ConditionTrue, now.Add(20*time.Second)))
	usage = sampled(t2.Add(-2*time.Second), map[string]string{"a": "150m", "new1": "5m", "new2": "5m"})
	if got = sync(t2); len(scales.updates) != 1 || got.Status.DesiredReplicas != 3 {
		t.Errorf("scale updates %v with untrusted samples (status %+v)", scales.updates, got.Status)
	}

	// The load spreads: 50% each, on target.
	t3 := now.Add(60 * time.Second)
	usage = sampled(t3.Add(-5*time.Second), map[string]string{"a": "50m", "new1": "50m", "new2": "50m"})
	if got = sync(t3); len(scales.updates) != 1 || *got.Status.CurrentMetrics[0].Resource.Current.AverageUtilization != 50 {
		t.Errorf("scale updates %v on target (status %+v)", scales.updates, got.Status)
	}

	// The load drops to 10%: 1 replica would do, but the last 5 minutes said 3.
	t4 := now.Add(90 * time.Second)
	usage = sampled(t4.Add(-5*time.Second), map[string]string{"a": "10m", "new1": "10m", "new2": "10m"})
	got = sync(t4)
	if len(scales.updates) != 1 {
		t.Errorf("scale updates %v within the stabilization window", scales.updates)
	}
	if c := cond(got.Status, autoscalingv2.AbleToScale); c.Reason != "ScaleDownStabilized" || got.Status.DesiredReplicas != 3 {
		t.Errorf("status %+v", got.Status)
	}

	// 5 minutes on, every recommendation of the window is 1.
	t5 := t4.Add(301 * time.Second)
	usage = sampled(t5.Add(-5*time.Second), map[string]string{"a": "10m", "new1": "10m", "new2": "10m"})
	got = sync(t5)
	if len(scales.updates) != 2 || scales.updates[1] != 1 {
		t.Errorf("scale updates %v, want [3 1]", scales.updates)
	}
	event("SuccessfulRescale New size: 1; reason: All metrics below target")
	if got.Status.DesiredReplicas != 1 || got.Status.CurrentReplicas != 3 || !got.Status.LastScaleTime.Time.Equal(t5) {
		t.Errorf("status %+v", got.Status)
	}

	// A deleted HPA's history goes with it.
	_ = hpas.Delete(got)
	if err := c.sync(context.Background(), "default/web"); err != nil {
		t.Fatal(err)
	}
	if len(c.history) != 0 {
		t.Errorf("history kept for a deleted HPA: %+v", c.history)
	}
}

// A target whose scale cannot be updated keeps its last desired count in the status, and
// the failed rescale is not counted against the rate limits.
func TestSyncFailedUpdate(t *testing.T) {
	h := withMetrics(behaving(1, 10, autoscalingv2.HorizontalPodAutoscalerBehavior{}), resourceMetric(cpuUtilization(50)))
	h.Status.DesiredReplicas = 1
	client := fake.NewClientset(h)
	factory := informers.NewSharedInformerFactory(client, 0)
	_ = factory.Autoscaling().V2().HorizontalPodAutoscalers().Informer().GetIndexer().Add(h)
	_ = factory.Core().V1().Pods().Informer().GetIndexer().Add(pod("a", "100m"))
	metrics := func(context.Context, string, labels.Selector) (map[string]PodUsage, error) {
		return samples(corev1.ResourceCPU, map[string]string{"a": "150m"}), nil
	}
	mapping := func(string, string) (schema.GroupResource, error) {
		return schema.GroupResource{Group: "apps", Resource: "deployments"}, nil
	}
	rec := record.NewFakeRecorder(10)
	c := New(client, factory.Autoscaling().V2().HorizontalPodAutoscalers(), factory.Core().V1().Pods(), failingScales{&fakeScales{replicas: 1}}, metrics, mapping, rec,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	c.now = func() time.Time { return now }
	if err := c.sync(context.Background(), "default/web"); err != nil {
		t.Fatal(err)
	}
	got, _ := client.AutoscalingV2().HorizontalPodAutoscalers("default").Get(context.Background(), "web", metav1.GetOptions{})
	if got.Status.DesiredReplicas != 1 || got.Status.LastScaleTime != nil || cond(got.Status, autoscalingv2.AbleToScale).Reason != "FailedUpdateScale" {
		t.Errorf("status %+v", got.Status)
	}
	if e := <-rec.Events; !strings.Contains(e, "FailedRescale New size: 3") {
		t.Errorf("event %q", e)
	}
	if hist := c.history["default/web"]; hist == nil || len(hist.scaleUps) != 0 {
		t.Errorf("history %+v", hist)
	}
	// Once it can, the rescale counts.
	c.scales = &fakeScales{replicas: 1}
	c.now = func() time.Time { return now.Add(15 * time.Second) }
	if err := c.sync(context.Background(), "default/web"); err != nil {
		t.Fatal(err)
	}
	if hist := c.history["default/web"]; len(hist.scaleUps) != 1 || hist.scaleUps[0].change != 2 {
		t.Errorf("scale-ups %+v, want one of 2", hist.scaleUps)
	}
}

type failingScales struct{ *fakeScales }

func (failingScales) Update(context.Context, string, schema.GroupResource, *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
	return nil, errors.New("conflict")
}
