package podautoscaler

import (
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/controlplane/scheme"
)

// behaving is an HPA with a behavior, defaulted as the API server stores it.
func behaving(minR, maxR int32, b autoscalingv2.HorizontalPodAutoscalerBehavior) *autoscalingv2.HorizontalPodAutoscaler {
	h := hpa(minR, maxR)
	h.Spec.Behavior = &b
	scheme.DefaultHPA(h)
	return h
}

func policies(sel autoscalingv2.ScalingPolicySelect, window int32, ps ...autoscalingv2.HPAScalingPolicy) *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{SelectPolicy: ptr.To(sel), StabilizationWindowSeconds: ptr.To(window), Policies: ps}
}

func podsPolicy(n, period int32) autoscalingv2.HPAScalingPolicy {
	return autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: n, PeriodSeconds: period}
}

func percentPolicy(n, period int32) autoscalingv2.HPAScalingPolicy {
	return autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: n, PeriodSeconds: period}
}

// step is one sync: at some time after now, the target has current replicas and the metrics
// propose proposal; the normalized count and the reasons of AbleToScale and ScalingLimited
// are checked ("" is not checked).
type step struct {
	at                time.Duration
	current, proposal int32
	want              int32
	able, limited     string
}

// Each case runs its syncs against one History, recording each rescale as the controller
// does once the scale is updated.
func TestNormalize(t *testing.T) {
	noDownWindow := autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)}}
	for _, tc := range []struct {
		name  string
		h     *autoscalingv2.HorizontalPodAutoscaler
		steps []step
	}{
		// No behavior: upstream's older rules.
		{"no behavior: a lower recommendation waits for the 300 s window", hpa(1, 10), []step{
			{0, 5, 5, 5, "ReadyForNewScale", "DesiredWithinRange"},
			{60 * time.Second, 5, 2, 5, "ScaleDownStabilized", "DesiredWithinRange"},
			{299 * time.Second, 5, 2, 5, "ScaleDownStabilized", ""},
			{300 * time.Second, 5, 2, 5, "ScaleDownStabilized", ""}, // upstream's cutoff is inclusive here
			{301 * time.Second, 5, 2, 2, "ReadyForNewScale", "DesiredWithinRange"},
		}},
		{"no behavior: the first sync's count holds a scale-down too", hpa(1, 10), []step{
			{0, 4, 1, 4, "ScaleDownStabilized", ""},
			{301 * time.Second, 4, 1, 1, "ReadyForNewScale", ""},
		}},
		{"no behavior: a scale-up is immediate", hpa(1, 10), []step{
			{0, 2, 1, 2, "ScaleDownStabilized", ""},
			{15 * time.Second, 2, 3, 3, "ReadyForNewScale", "DesiredWithinRange"},
		}},
		{"no behavior: at most doubling, or 4", hpa(1, 20), []step{
			{0, 1, 10, 4, "", "ScaleUpLimit"},
			{15 * time.Second, 4, 10, 8, "", "ScaleUpLimit"},
			{30 * time.Second, 8, 10, 10, "", "DesiredWithinRange"},
		}},
		{"no behavior: capped by max", hpa(1, 3), []step{{0, 1, 10, 3, "", "TooManyReplicas"}}},
		{"no behavior: floored by min", hpa(3, 10), []step{{0, 3, 1, 3, "ScaleDownStabilized", "DesiredWithinRange"}, {301 * time.Second, 3, 1, 3, "", "TooFewReplicas"}}},
		// Upstream's older rule stabilizes towards the highest recommendation of the window
		// even when the count is below it (a capped scale-up carries on).
		{"no behavior: a capped scale-up carries on", hpa(1, 20), []step{
			{0, 2, 10, 4, "", "ScaleUpLimit"},
			{15 * time.Second, 4, 3, 8, "ScaleDownStabilized", "ScaleUpLimit"},
		}},

		// A behavior with upstream's defaults: 4 pods or 100% per 15 s up, 300 s window down.
		{"default behavior: a lower recommendation waits for the 300 s window", behaving(1, 10, autoscalingv2.HorizontalPodAutoscalerBehavior{}), []step{
			{0, 5, 5, 5, "ReadyForNewScale", "DesiredWithinRange"},
			{60 * time.Second, 5, 2, 5, "ScaleDownStabilized", "DesiredWithinRange"},
			{299 * time.Second, 5, 3, 5, "ScaleDownStabilized", ""},
			{301 * time.Second, 5, 2, 3, "ScaleDownStabilized", "DesiredWithinRange"},
			{600 * time.Second, 3, 2, 2, "ReadyForNewScale", "DesiredWithinRange"},
		}},
		{"default behavior: from 1 at most 5, and the period counts the earlier rescale", behaving(1, 20, autoscalingv2.HorizontalPodAutoscalerBehavior{}), []step{
			{0, 1, 10, 5, "ReadyForNewScale", "ScaleUpLimit"},
			{10 * time.Second, 5, 10, 5, "", "ScaleUpLimit"},
			{15 * time.Second, 5, 12, 10, "", "ScaleUpLimit"},
			{30 * time.Second, 10, 12, 12, "", "DesiredWithinRange"},
		}},
		{"default behavior: capped by max", behaving(1, 6, autoscalingv2.HorizontalPodAutoscalerBehavior{}), []step{{0, 4, 20, 6, "", "TooManyReplicas"}}},
		{"default behavior: floored by min", behaving(2, 10, noDownWindow), []step{{0, 5, 1, 2, "ReadyForNewScale", "TooFewReplicas"}}},
		{"default behavior: a scale-down in the period raises the scale-up limit", behaving(1, 30, noDownWindow), []step{
			{0, 10, 5, 5, "", "DesiredWithinRange"},
			{5 * time.Second, 5, 20, 20, "", "DesiredWithinRange"},
		}},

		// Custom behaviors.
		{"scale-up stabilization window", behaving(1, 10, autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60)}}), []step{
			{0, 2, 2, 2, "ReadyForNewScale", ""},
			{30 * time.Second, 2, 6, 2, "ScaleUpStabilized", "DesiredWithinRange"},
			{61 * time.Second, 2, 6, 6, "ReadyForNewScale", "DesiredWithinRange"},
		}},
		{"scale-up selectPolicy Min", behaving(1, 100, autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp: policies(autoscalingv2.MinChangePolicySelect, 0, podsPolicy(4, 15), percentPolicy(100, 15))}), []step{
			{0, 10, 30, 14, "", "ScaleUpLimit"},
		}},
		{"scale-up selectPolicy Max", behaving(1, 100, autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp: policies(autoscalingv2.MaxChangePolicySelect, 0, podsPolicy(4, 15), percentPolicy(100, 15))}), []step{
			{0, 10, 30, 20, "", "ScaleUpLimit"},
		}},
		{"scale-up Percent rounds up", behaving(1, 100, autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp: policies(autoscalingv2.MaxChangePolicySelect, 0, percentPolicy(10, 60))}), []step{
			{0, 3, 10, 4, "", "ScaleUpLimit"},
		}},
		{"scale-up Disabled", behaving(1, 10, autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp: policies(autoscalingv2.DisabledPolicySelect, 0, podsPolicy(4, 15))}), []step{
			{0, 3, 6, 3, "ReadyForNewScale", "ScaleUpLimit"},
		}},
		{"scale-down Disabled", behaving(1, 10, autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleDown: policies(autoscalingv2.DisabledPolicySelect, 0, percentPolicy(100, 15))}), []step{
			{0, 3, 1, 3, "ReadyForNewScale", "ScaleDownLimit"},
		}},
		{"scale-down selectPolicy Max picks the larger change", behaving(1, 10, autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleDown: policies(autoscalingv2.MaxChangePolicySelect, 0, podsPolicy(1, 15), percentPolicy(50, 15))}), []step{
			{0, 10, 1, 5, "", "ScaleDownLimit"},
		}},
		{"scale-down selectPolicy Min picks the smaller change", behaving(1, 10, autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleDown: policies(autoscalingv2.MinChangePolicySelect, 0, podsPolicy(1, 15), percentPolicy(50, 15))}), []step{
			{0, 10, 1, 9, "", "ScaleDownLimit"},
		}},
		{"scale-down Percent truncates", behaving(1, 10, autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleDown: policies(autoscalingv2.MaxChangePolicySelect, 0, percentPolicy(50, 15))}), []step{
			{0, 5, 1, 2, "", "ScaleDownLimit"},
		}},
		{"scale-down Pods over a period counts the earlier rescale", behaving(1, 10, autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleDown: policies(autoscalingv2.MaxChangePolicySelect, 0, podsPolicy(1, 60))}), []step{
			{0, 5, 1, 4, "", "ScaleDownLimit"},
			{30 * time.Second, 4, 1, 4, "", "ScaleDownLimit"},
			{61 * time.Second, 4, 1, 3, "", "ScaleDownLimit"},
		}},
		{"scale-down window from the behavior", behaving(1, 10, autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60)}}), []step{
			{0, 4, 4, 4, "", ""},
			{30 * time.Second, 4, 1, 4, "ScaleDownStabilized", ""},
			{61 * time.Second, 4, 1, 1, "ReadyForNewScale", "DesiredWithinRange"},
		}},
		// An HPA stored before defaulting: unset rules are upstream's defaults.
		{"undefaulted behavior", func() *autoscalingv2.HorizontalPodAutoscaler {
			h := hpa(1, 20)
			h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{}
			return h
		}(), []step{
			{0, 1, 10, 5, "", "ScaleUpLimit"},
			{15 * time.Second, 5, 2, 5, "ScaleDownStabilized", ""},
		}},
	} {
		hist := &History{}
		minR := ptr.Deref(tc.h.Spec.MinReplicas, 1)
		for i, s := range tc.steps {
			at := now.Add(s.at)
			hist.start(s.current, at)
			got, able, limited := hist.normalize(tc.h, s.current, s.proposal, minR, at)
			if got != s.want {
				t.Errorf("%s, step %d: %d replicas, want %d", tc.name, i, got, s.want)
			}
			if s.able != "" && able.reason != s.able {
				t.Errorf("%s, step %d: AbleToScale %q, want %q", tc.name, i, able.reason, s.able)
			}
			if s.limited != "" && limited.reason != s.limited {
				t.Errorf("%s, step %d: ScalingLimited %q, want %q", tc.name, i, limited.reason, s.limited)
			}
			if got != s.current {
				hist.RecordScale(tc.h.Spec.Behavior, s.current, got, at)
			}
		}
	}
}

// The conditions' messages are upstream's.
func TestNormalizeMessages(t *testing.T) {
	for _, tc := range []struct {
		h                 *autoscalingv2.HorizontalPodAutoscaler
		current, proposal int32
		able, limited     condition
	}{
		{behaving(1, 20, autoscalingv2.HorizontalPodAutoscalerBehavior{}), 1, 10,
			condition{corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size"},
			condition{corev1.ConditionTrue, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"}},
		{behaving(1, 20, autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: policies(autoscalingv2.MaxChangePolicySelect, 0, podsPolicy(1, 15))}), 5, 1,
			condition{corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size"},
			condition{corev1.ConditionTrue, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate"}},
		{hpa(1, 20), 5, 1,
			condition{corev1.ConditionTrue, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation"},
			condition{corev1.ConditionFalse, "DesiredWithinRange", "the desired count is within the acceptable range"}},
		{behaving(1, 20, autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60)}}), 1, 5,
			condition{corev1.ConditionTrue, "ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation"},
			condition{corev1.ConditionFalse, "DesiredWithinRange", "the desired count is within the acceptable range"}},
		{hpa(1, 3), 2, 5,
			condition{corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size"},
			condition{corev1.ConditionTrue, "TooManyReplicas", "the desired replica count is more than the maximum replica count"}},
		{behaving(4, 20, autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: policies(autoscalingv2.MaxChangePolicySelect, 0, percentPolicy(100, 15))}), 5, 1,
			condition{corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size"},
			condition{corev1.ConditionTrue, "TooFewReplicas", "the desired replica count is less than the minimum replica count"}},
	} {
		hist := &History{}
		hist.start(tc.current, now)
		_, able, limited := hist.normalize(tc.h, tc.current, tc.proposal, ptr.Deref(tc.h.Spec.MinReplicas, 1), now)
		if able != tc.able || limited != tc.limited {
			t.Errorf("%d → %d: AbleToScale %+v, ScalingLimited %+v; want %+v, %+v", tc.current, tc.proposal, able, limited, tc.able, tc.limited)
		}
	}
}

// A History keeps only what its windows and periods look back to.
func TestHistoryForgets(t *testing.T) {
	h := behaving(1, 100, autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp:   policies(autoscalingv2.MaxChangePolicySelect, 0, podsPolicy(1, 30)),
		ScaleDown: policies(autoscalingv2.MaxChangePolicySelect, 120, podsPolicy(1, 60))})
	hist := &History{}
	current := int32(50)
	for i := 0; i < 100; i++ {
		at := now.Add(time.Duration(i) * 15 * time.Second)
		hist.start(current, at)
		proposal := current + 1
		if i%2 == 1 {
			proposal = current - 1
		}
		got, _, _ := hist.normalize(h, current, proposal, 1, at)
		hist.RecordScale(h.Spec.Behavior, current, got, at)
		current = got
	}
	// 120 s of recommendations at one per 15 s, the newest included; 60 s of events.
	if n := len(hist.recommendations); n != 9 {
		t.Errorf("%d recommendations kept, want 9", n)
	}
	if n := len(hist.scaleUps) + len(hist.scaleDowns); n > 5 {
		t.Errorf("%d scale events kept, want at most 5", n)
	}
	// Without a behavior no events are kept (nothing counts them).
	hist = &History{}
	hist.RecordScale(nil, 1, 4, now)
	if len(hist.scaleUps) != 0 {
		t.Errorf("events kept without a behavior: %+v", hist.scaleUps)
	}
}

// Rescales made under other rules (the behavior was edited) may already exceed what the
// rules allow over their period: the count then stays, never moving against the proposal.
func TestRateLimitNeverReverses(t *testing.T) {
	rules := *policies(autoscalingv2.MaxChangePolicySelect, 0, podsPolicy(2, 15))
	hist := &History{scaleUps: []scaleEvent{{now.Add(-5 * time.Second), 6}}}
	if got, limited := hist.rateLimit(10, 12, 1, 20, rules, rules, now); got != 10 || limited.reason != "ScaleUpLimit" {
		t.Errorf("scale-up: %d, %+v; want 10, ScaleUpLimit", got, limited)
	}
	hist = &History{scaleDowns: []scaleEvent{{now.Add(-5 * time.Second), 6}}}
	if got, limited := hist.rateLimit(4, 1, 1, 20, rules, rules, now); got != 4 || limited.reason != "ScaleDownLimit" {
		t.Errorf("scale-down: %d, %+v; want 4, ScaleDownLimit", got, limited)
	}
}
