package podautoscaler

import (
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

type podOpt func(*corev1.Pod)

// pod is a running pod of the target, requesting cpu (and 100Mi of memory) in its one
// container "c", started 10 minutes ago and ready for 9.
func pod(name, cpu string, opts ...podOpt) *corev1.Pod {
	start := metav1.NewTime(now.Add(-10 * time.Minute))
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("100Mi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &start, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-9 * time.Minute))}}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

func deleting(p *corev1.Pod) { t := metav1.NewTime(now); p.DeletionTimestamp = &t }

func started(ago time.Duration) podOpt {
	return func(p *corev1.Pod) { t := metav1.NewTime(now.Add(-ago)); p.Status.StartTime = &t }
}

func noStartTime(p *corev1.Pod) { p.Status.StartTime = nil }

func noReadyCondition(p *corev1.Pod) { p.Status.Conditions = nil }

// ready sets the Ready condition, last changed ago.
func ready(status corev1.ConditionStatus, ago time.Duration) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(now.Add(-ago))}}
	}
}

// samples is the metrics API's answer: each pod's container "c" using the given amount of
// res, sampled 10 s ago over a 15 s window.
func samples(res corev1.ResourceName, use map[string]string) map[string]PodUsage {
	out := map[string]PodUsage{}
	for name, q := range use {
		out[name] = PodUsage{Containers: map[string]corev1.ResourceList{"c": {res: resource.MustParse(q)}},
			Timestamp: now.Add(-10 * time.Second), Window: 15 * time.Second}
	}
	return out
}

func cpuUtilization(pct int32) *autoscalingv2.ResourceMetricSource {
	return &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(pct)}}
}

func averageValue(res corev1.ResourceName, q string) *autoscalingv2.ResourceMetricSource {
	return &autoscalingv2.ResourceMetricSource{Name: res,
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse(q))}}
}

var defaultTolerances = Tolerances{Down: defaultTolerance, Up: defaultTolerance}

func TestResourceReplicas(t *testing.T) {
	for _, tc := range []struct {
		name    string
		metric  *autoscalingv2.ResourceMetricSource
		current int32
		pods    []*corev1.Pod
		usage   map[string]PodUsage
		tol     Tolerances
		want    int32
		err     string
	}{
		// All pods measured: the ratio applies to them.
		{name: "scale up", metric: cpuUtilization(50), current: 3,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("b", "100m"), pod("c", "100m")},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "100m", "b": "100m", "c": "100m"}), want: 6},
		{name: "scale down", metric: cpuUtilization(50), current: 4,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("b", "100m"), pod("c", "100m"), pod("d", "100m")},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "20m", "b": "20m", "c": "20m", "d": "20m"}), want: 2},
		{name: "within tolerance", metric: cpuUtilization(50), current: 3,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("b", "100m"), pod("c", "100m")},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "53m", "b": "53m", "c": "53m"}), want: 3},
		{name: "just below tolerance", metric: cpuUtilization(50), current: 10,
			pods: []*corev1.Pod{pod("a", "100m"), pod("b", "100m"), pod("c", "100m"), pod("d", "100m"), pod("e", "100m"),
				pod("f", "100m"), pod("g", "100m"), pod("h", "100m"), pod("i", "100m"), pod("j", "100m")},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "44m", "b": "44m", "c": "44m", "d": "44m", "e": "44m",
				"f": "44m", "g": "44m", "h": "44m", "i": "44m", "j": "44m"}), want: 9},
		{name: "a wider scale-up tolerance", metric: cpuUtilization(50), current: 2, tol: Tolerances{Down: 0.1, Up: 0.5},
			pods:  []*corev1.Pod{pod("a", "100m"), pod("b", "100m")},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "70m", "b": "70m"}), want: 2},
		// The spec says 5 but only 2 pods exist and were measured: 2 × 2, not 5 × 2.
		{name: "the ratio applies to the measured pods, not the spec's count", metric: cpuUtilization(50), current: 5,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("b", "100m")},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "100m", "b": "100m"}), want: 4},
		{name: "containers' usage and requests are summed", metric: cpuUtilization(50), current: 1,
			pods: []*corev1.Pod{func() *corev1.Pod {
				p := pod("a", "100m")
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "d", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m")}}})
				return p
			}()},
			usage: map[string]PodUsage{"a": {Containers: map[string]corev1.ResourceList{
				"c": {corev1.ResourceCPU: resource.MustParse("100m")}, "d": {corev1.ResourceCPU: resource.MustParse("300m")}},
				Timestamp: now, Window: 15 * time.Second}}, want: 2},
		{name: "a pod-level request is the pod's", metric: cpuUtilization(25), current: 1,
			pods: []*corev1.Pod{func() *corev1.Pod {
				p := pod("a", "1")
				p.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("400m")}}
				return p
			}()},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "200m"}), want: 2},
		{name: "a sidecar's request counts", metric: cpuUtilization(50), current: 1,
			pods: []*corev1.Pod{func() *corev1.Pod {
				p := pod("a", "100m")
				p.Spec.InitContainers = []corev1.Container{{Name: "sidecar", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}},
					{Name: "init"}} // a plain init container has finished: no request needed
				return p
			}()},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "100m"}), want: 1},

		// Missing pods (running, no sample yet) damp the change.
		{name: "missing pods count as idle on a scale-up", metric: cpuUtilization(50), current: 4,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("b", "100m"), pod("new1", "100m"), pod("new2", "100m")},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "150m", "b": "150m"}), want: 6},
		{name: "missing pods count as busy on a scale-down", metric: cpuUtilization(50), current: 4,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("b", "100m"), pod("c", "100m"), pod("new", "100m")},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "10m", "b": "10m", "c": "10m"}), want: 3},
		{name: "missing pods count as using the target when it is above 100%", metric: cpuUtilization(150), current: 4,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("new1", "100m"), pod("new2", "100m"), pod("new3", "100m")},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "30m"}), want: 4},
		{name: "missing pods flip a scale-down into a scale-up: no change", metric: cpuUtilization(50), current: 4,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("b", "100m"), pod("new1", "100m"), pod("new2", "100m")},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "20m", "b": "20m"}), want: 4},
		// More pods than the count (a surge): the recomputed ratio says down, but applied to
		// all the pods it would add one.
		{name: "a count moving against the ratio: no change", metric: cpuUtilization(50), current: 2,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("b", "100m"), pod("c", "100m"), pod("new", "100m")},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "10m", "b": "10m", "c": "10m"}), want: 2},
		{name: "missing pods bring a scale-up within tolerance", metric: cpuUtilization(50), current: 2,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("new", "100m")},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "105m"}), want: 2},
		{name: "a pod whose sample lacks the resource is missing", metric: cpuUtilization(50), current: 2,
			pods: []*corev1.Pod{pod("a", "100m"), pod("b", "100m")},
			usage: map[string]PodUsage{"a": samples(corev1.ResourceCPU, map[string]string{"a": "100m"})["a"],
				"b": {Containers: map[string]corev1.ResourceList{"c": {corev1.ResourceMemory: resource.MustParse("1Mi")}}}}, want: 2},

		// The live flap: 1 → 3 at 150% of a 50% target; the two new pods have no sample yet
		// (or an untrusted one). Upstream keeps 3; applying 150/50 to the 1 measured pod's
		// share of 3 replicas must not make it 1 or 2.
		{name: "flap: new pods without samples keep the count", metric: cpuUtilization(50), current: 3,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("new1", "100m", started(20*time.Second), ready(corev1.ConditionFalse, 20*time.Second)), pod("new2", "100m", started(20*time.Second), ready(corev1.ConditionFalse, 20*time.Second))},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "150m"}), want: 3},
		{name: "flap: new unready pods keep the count", metric: cpuUtilization(50), current: 3,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("new1", "100m", started(20*time.Second), ready(corev1.ConditionFalse, 20*time.Second)), pod("new2", "100m", started(20*time.Second), ready(corev1.ConditionFalse, 20*time.Second))},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "150m", "new1": "300m", "new2": "1m"}), want: 3},
		{name: "flap: new pods ready but not yet measured over a whole window keep the count", metric: cpuUtilization(50), current: 3,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("new1", "100m", started(20*time.Second), ready(corev1.ConditionTrue, 12*time.Second)), pod("new2", "100m", started(20*time.Second), ready(corev1.ConditionTrue, 12*time.Second))},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "150m", "new1": "1m", "new2": "1m"}), want: 3},

		// Unready pods count as idle against a scale-up, and not at all otherwise.
		{name: "unready pods count as idle on a scale-up", metric: cpuUtilization(50), current: 3,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("b", "100m"), pod("c", "100m", phase(corev1.PodPending))},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "150m", "b": "150m"}), want: 6},
		{name: "unready pods keep a scale-up from turning into a scale-down", metric: cpuUtilization(50), current: 3,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("b", "100m", phase(corev1.PodPending)), pod("c", "100m", noReadyCondition)},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "100m", "c": "100m"}), want: 3},
		{name: "unready pods are left out of a scale-down", metric: cpuUtilization(50), current: 3,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("b", "100m"), pod("c", "100m", ready(corev1.ConditionFalse, 9*time.Minute+50*time.Second))},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "10m", "b": "10m", "c": "100m"}), want: 1},
		{name: "unready pods bring a scale-up within tolerance", metric: cpuUtilization(50), current: 2,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("b", "100m", phase(corev1.PodPending))},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "105m"}), want: 2},
		{name: "a pending pod's sample is not trusted", metric: cpuUtilization(50), current: 2,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("b", "100m", phase(corev1.PodPending))},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "50m", "b": "500m"}), want: 2},

		// CPU readiness, young pods (within 5 minutes of starting).
		{name: "young and ready for a whole window: trusted", metric: cpuUtilization(50), current: 1,
			pods:  []*corev1.Pod{pod("a", "100m", started(time.Minute), ready(corev1.ConditionTrue, 30*time.Second))},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "100m"}), want: 2},
		{name: "young and sampled over a window that began before it was ready: not trusted", metric: cpuUtilization(50), current: 1,
			pods:  []*corev1.Pod{pod("a", "100m", started(time.Minute), ready(corev1.ConditionTrue, 20*time.Second))},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "100m"}), err: "did not receive metrics for targeted pods (pods might be unready)"},
		{name: "young and not ready: not trusted", metric: cpuUtilization(50), current: 1,
			pods:  []*corev1.Pod{pod("a", "100m", started(time.Minute), ready(corev1.ConditionFalse, 5*time.Minute))},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "100m"}), err: "pods might be unready"},
		{name: "young with readiness unknown: trusted", metric: cpuUtilization(50), current: 1,
			pods:  []*corev1.Pod{pod("a", "100m", started(time.Minute), ready(corev1.ConditionUnknown, 30*time.Second))},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "100m"}), want: 2},
		// Old pods (started over 5 minutes ago).
		{name: "old and never ready: not trusted", metric: cpuUtilization(50), current: 1,
			pods:  []*corev1.Pod{pod("a", "100m", ready(corev1.ConditionFalse, 9*time.Minute+40*time.Second))},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "100m"}), err: "pods might be unready"},
		{name: "old and unready after being ready: trusted", metric: cpuUtilization(50), current: 1,
			pods:  []*corev1.Pod{pod("a", "100m", ready(corev1.ConditionFalse, time.Minute))},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "100m"}), want: 2},
		{name: "no Ready condition: not trusted", metric: cpuUtilization(50), current: 1,
			pods: []*corev1.Pod{pod("a", "100m", noReadyCondition)}, usage: samples(corev1.ResourceCPU, map[string]string{"a": "100m"}),
			err: "pods might be unready"},
		{name: "no start time: not trusted", metric: cpuUtilization(50), current: 1,
			pods: []*corev1.Pod{pod("a", "100m", noStartTime)}, usage: samples(corev1.ResourceCPU, map[string]string{"a": "100m"}),
			err: "pods might be unready"},
		// Memory is not distrusted for readiness, only for being pending.
		{name: "memory: unready pods are trusted", metric: averageValue(corev1.ResourceMemory, "100Mi"), current: 1,
			pods:  []*corev1.Pod{pod("a", "100m", noReadyCondition, started(time.Second))},
			usage: samples(corev1.ResourceMemory, map[string]string{"a": "200Mi"}), want: 2},
		{name: "memory: pending pods are not", metric: averageValue(corev1.ResourceMemory, "100Mi"), current: 2,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("b", "100m", phase(corev1.PodPending))},
			usage: samples(corev1.ResourceMemory, map[string]string{"a": "150Mi", "b": "900Mi"}), want: 2},

		// Pods on their way out do not count at all.
		{name: "deleted, failed and succeeded pods are ignored", metric: cpuUtilization(50), current: 2,
			pods: []*corev1.Pod{pod("a", "100m"), pod("b", "100m"), pod("gone", "100m", deleting), pod("failed", "100m", phase(corev1.PodFailed)),
				pod("done", "100m", phase(corev1.PodSucceeded))},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "100m", "b": "100m", "gone": "0"}), want: 4},
		{name: "a deleted pod's sample is ignored", metric: cpuUtilization(50), current: 1,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("gone", "100m", deleting)},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "100m", "gone": "0"}), want: 2},
		{name: "a failed pod is not missing", metric: cpuUtilization(50), current: 1,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("failed", "100m", phase(corev1.PodFailed))},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "100m"}), want: 2},
		{name: "a succeeded pod is not missing", metric: cpuUtilization(50), current: 1,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("done", "100m", phase(corev1.PodSucceeded))},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "100m"}), want: 2},
		{name: "a sample of a pod the lister does not know is ignored", metric: cpuUtilization(50), current: 2,
			pods:  []*corev1.Pod{pod("a", "100m"), pod("b", "100m")},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "100m", "b": "100m", "stranger": "0"}), want: 4},

		// Average value targets.
		{name: "average value: scale up", metric: averageValue(corev1.ResourceCPU, "100m"), current: 2,
			pods:  []*corev1.Pod{pod("a", "1"), pod("b", "1")},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "300m", "b": "300m"}), want: 6},
		{name: "average value: within tolerance", metric: averageValue(corev1.ResourceCPU, "100m"), current: 2,
			pods:  []*corev1.Pod{pod("a", "1"), pod("b", "1")},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "105m", "b": "95m"}), want: 2},
		{name: "average value: missing pods count as using the target on a scale-down", metric: averageValue(corev1.ResourceCPU, "100m"), current: 4,
			pods:  []*corev1.Pod{pod("a", "1"), pod("b", "1"), pod("c", "1"), pod("new", "1")},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "10m", "b": "10m", "c": "10m"}), want: 2},
		{name: "average value: missing pods count as idle on a scale-up", metric: averageValue(corev1.ResourceCPU, "100m"), current: 2,
			pods:  []*corev1.Pod{pod("a", "1"), pod("new", "1")},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "400m"}), want: 4},
		{name: "average value: no request needed", metric: averageValue(corev1.ResourceCPU, "100m"), current: 1,
			pods: []*corev1.Pod{func() *corev1.Pod {
				p := pod("a", "1")
				p.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
				return p
			}()},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "200m"}), want: 2},

		// Errors.
		{name: "missing request", metric: cpuUtilization(50), current: 1,
			pods: []*corev1.Pod{func() *corev1.Pod {
				p := pod("a", "1")
				p.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
				return p
			}()},
			usage: samples(corev1.ResourceCPU, map[string]string{"a": "100m"}),
			err:   "failed to get cpu utilization: missing request for cpu in container c of Pod a"},
		{name: "no samples", metric: cpuUtilization(50), current: 1, pods: []*corev1.Pod{pod("a", "100m")}, usage: map[string]PodUsage{},
			err: "failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API"},
		{name: "no pods", metric: cpuUtilization(50), current: 1, usage: samples(corev1.ResourceCPU, map[string]string{"a": "100m"}),
			err: "no pods returned by selector while calculating replica count"},
		{name: "only missing pods", metric: cpuUtilization(50), current: 1, pods: []*corev1.Pod{pod("a", "100m")},
			usage: samples(corev1.ResourceCPU, map[string]string{"b": "100m"}), err: "did not receive metrics for targeted pods"},
		{name: "average value: errors say usage", metric: averageValue(corev1.ResourceMemory, "1Mi"), current: 1, usage: map[string]PodUsage{},
			err: "failed to get memory usage: unable to get metrics for resource memory"},
		{name: "no target", metric: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU}, current: 1,
			err: "invalid resource metric source: neither an average utilization target nor an average value (usage) target was set"},
	} {
		tol := tc.tol
		if tol == (Tolerances{}) {
			tol = defaultTolerances
		}
		p := ResourceReplicas(tc.metric, tc.current, tc.pods, tc.usage, tol, now)
		switch {
		case tc.err != "":
			if p.Err == nil || !strings.Contains(p.Err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.name, p.Err, tc.err)
			}
		case p.Err != nil:
			t.Errorf("%s: %v", tc.name, p.Err)
		case p.Replicas != tc.want:
			t.Errorf("%s: %d replicas, want %d", tc.name, p.Replicas, tc.want)
		}
	}
}

// The status reports the ready pods' use only: what the ratio was computed from.
func TestMeasure(t *testing.T) {
	pods := []*corev1.Pod{pod("a", "100m"), pod("b", "100m"), pod("nometrics", "100m"), pod("unready", "100m", phase(corev1.PodPending))}
	usage := samples(corev1.ResourceCPU, map[string]string{"a": "150m", "b": "50m", "unready": "900m"})
	p := ResourceReplicas(cpuUtilization(80), 4, pods, usage, defaultTolerances, now)
	if p.Err != nil || ptr.Deref(p.Current.AverageUtilization, -1) != 100 || p.Current.AverageValue == nil || p.Current.AverageValue.String() != "100m" {
		t.Errorf("utilization %+v (%v), want 100%% and 100m average", p.Current, p.Err)
	}
	// Truncated to a whole percentage, as upstream: 2/3 of the request is 66%.
	p = ResourceReplicas(cpuUtilization(80), 1, []*corev1.Pod{pod("a", "3")}, samples(corev1.ResourceCPU, map[string]string{"a": "2"}), defaultTolerances, now)
	if ptr.Deref(p.Current.AverageUtilization, -1) != 66 || p.Current.AverageValue.String() != "2" {
		t.Errorf("utilization %+v, want 66%% and 2", p.Current)
	}
	p = ResourceReplicas(averageValue(corev1.ResourceMemory, "100Mi"), 2, pods[:2], samples(corev1.ResourceMemory, map[string]string{"a": "100Mi", "b": "50Mi"}), defaultTolerances, now)
	if p.Current.AverageUtilization != nil || p.Current.AverageValue == nil || p.Current.AverageValue.String() != "75Mi" {
		t.Errorf("average value %+v, want 75Mi and no utilization", p.Current)
	}
}

func TestTolerancesFor(t *testing.T) {
	h := hpa(1, 5)
	if got := tolerancesFor(h); got != defaultTolerances {
		t.Errorf("no behavior: %+v", got)
	}
	h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{Tolerance: ptr.To(resource.MustParse("0.5"))}}
	if got := tolerancesFor(h); got != (Tolerances{Down: 0.1, Up: 0.5}) {
		t.Errorf("scale-up tolerance: %+v", got)
	}
}
