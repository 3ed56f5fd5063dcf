package podautoscaler

import (
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// downscaleStabilization is --horizontal-pod-autoscaler-downscale-stabilization: how long a
// scale-down waits for the highest recommendation of the window to come down too, when the
// HPA's behavior does not say.
const downscaleStabilization = 5 * time.Minute

// Without a behavior upstream keeps its older rule: a sync may at most double the count, or
// go to 4 replicas if that is more (scaleUpLimitFactor and scaleUpLimitMinimum).
const (
	scaleUpLimitFactor  = 2
	scaleUpLimitMinimum = 4
)

// History is what an HPA's past syncs leave for the next: the recommendations the
// stabilization windows look back over and the scale events the rate limits count. The
// controller keeps one per HPA, in memory, as upstream (a restart forgets them, and the
// first sync then records the current count, so a restart never lets a scale-down through
// early).
type History struct {
	started         bool
	recommendations []recommendation
	scaleUps        []scaleEvent
	scaleDowns      []scaleEvent
}

type recommendation struct {
	at       time.Time
	replicas int32
}

// scaleEvent is a rescale: when, and by how many replicas (always positive; the list says
// which way).
type scaleEvent struct {
	at     time.Time
	change int32
}

// condition is a condition a decision sets.
type condition struct {
	status          corev1.ConditionStatus
	reason, message string
}

// start records the current count as the first recommendation, as upstream's
// recordInitialRecommendation.
func (hist *History) start(current int32, now time.Time) {
	if !hist.started {
		hist.started = true
		hist.recommendations = append(hist.recommendations, recommendation{now, current})
	}
}

// record remembers a recommendation, forgetting those older than keep, which no window
// looks back to.
func (hist *History) record(replicas int32, keep time.Duration, now time.Time) {
	cutoff := now.Add(-keep)
	kept := hist.recommendations[:0]
	for _, r := range hist.recommendations {
		if !r.at.Before(cutoff) {
			kept = append(kept, r)
		}
	}
	hist.recommendations = append(kept, recommendation{now, replicas})
}

// RecordScale remembers a rescale the controller made, for the rate limits of a behavior
// (without one there are none to count against, as upstream). Events older than the longest
// policy period of either direction are forgotten: scale-up limits count scale-downs too.
func (hist *History) RecordScale(b *autoscalingv2.HorizontalPodAutoscalerBehavior, from, to int32, now time.Time) {
	if b == nil || from == to {
		return
	}
	up, down := rules(b)
	var longest int32
	for _, p := range append(append([]autoscalingv2.HPAScalingPolicy{}, up.Policies...), down.Policies...) {
		longest = max(longest, p.PeriodSeconds)
	}
	cutoff := now.Add(-seconds(longest))
	prune := func(events []scaleEvent) []scaleEvent {
		kept := events[:0]
		for _, e := range events {
			if !e.at.Before(cutoff) {
				kept = append(kept, e)
			}
		}
		return kept
	}
	hist.scaleUps, hist.scaleDowns = prune(hist.scaleUps), prune(hist.scaleDowns)
	if to > from {
		hist.scaleUps = append(hist.scaleUps, scaleEvent{now, to - from})
	} else {
		hist.scaleDowns = append(hist.scaleDowns, scaleEvent{now, from - to})
	}
}

func seconds(s int32) time.Duration { return time.Duration(s) * time.Second }

// rules is the behavior's scaling rules with whatever is unset filled with upstream's
// defaults (the API server's defaulting already does, bar the scale-down window, which is
// the controller's flag; the rest is for HPAs stored before defaulting).
func rules(b *autoscalingv2.HorizontalPodAutoscalerBehavior) (up, down autoscalingv2.HPAScalingRules) {
	up = autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0), SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}}
	down = autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(int32(downscaleStabilization / time.Second)),
		SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies:     []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}}
	fill := func(to *autoscalingv2.HPAScalingRules, from *autoscalingv2.HPAScalingRules) {
		if from == nil {
			return
		}
		if from.StabilizationWindowSeconds != nil {
			to.StabilizationWindowSeconds = from.StabilizationWindowSeconds
		}
		if from.SelectPolicy != nil {
			to.SelectPolicy = from.SelectPolicy
		}
		if from.Policies != nil {
			to.Policies = from.Policies
		}
	}
	if b != nil {
		fill(&up, b.ScaleUp)
		fill(&down, b.ScaleDown)
	}
	return up, down
}

// normalize bounds the metrics' proposal as upstream's normalizeDesiredReplicas (no
// behavior) or normalizeDesiredReplicasWithBehaviors: stabilization first, then the rate
// limits and the replica range. It returns the count and the AbleToScale and ScalingLimited
// conditions to set, and records the proposal.
func (hist *History) normalize(h *autoscalingv2.HorizontalPodAutoscaler, current, proposal, minR int32, now time.Time) (int32, condition, condition) {
	stable, able := proposal, condition{corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size"}
	var desired int32
	var limited condition
	if h.Spec.Behavior == nil {
		stable = hist.stabilizeDown(proposal, downscaleStabilization, now)
		if stable != proposal {
			able = condition{corev1.ConditionTrue, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation"}
		}
		desired, limited = bound(current, stable, minR, h.Spec.MaxReplicas)
	} else {
		up, down := rules(h.Spec.Behavior)
		var reason, message string
		stable, reason, message = hist.stabilize(current, proposal, seconds(*up.StabilizationWindowSeconds), seconds(*down.StabilizationWindowSeconds), now)
		if stable != proposal {
			able = condition{corev1.ConditionTrue, reason, message}
		}
		desired, limited = hist.rateLimit(current, stable, minR, h.Spec.MaxReplicas, up, down, now)
	}
	limited.status = corev1.ConditionFalse
	if desired != stable {
		limited.status = corev1.ConditionTrue
	}
	return desired, able, limited
}

// stabilizeDown is upstream's rule without a behavior: the highest recommendation of the
// window (this one included), so a dip in load does not remove pods the next peak needs.
func (hist *History) stabilizeDown(proposal int32, window time.Duration, now time.Time) int32 {
	highest := proposal
	cutoff := now.Add(-window)
	for _, r := range hist.recommendations {
		if !r.at.Before(cutoff) {
			highest = max(highest, r.replicas)
		}
	}
	hist.record(proposal, window, now)
	return highest
}

// stabilize is upstream's rule with a behavior: the count moves up no further than the
// lowest recommendation of the scale-up window and down no further than the highest of the
// scale-down window (both including this one).
func (hist *History) stabilize(current, proposal int32, upWindow, downWindow time.Duration, now time.Time) (int32, string, string) {
	up, down := proposal, proposal
	upCutoff, downCutoff := now.Add(-upWindow), now.Add(-downWindow)
	for _, r := range hist.recommendations {
		if r.at.After(upCutoff) {
			up = min(up, r.replicas)
		}
		if r.at.After(downCutoff) {
			down = max(down, r.replicas)
		}
	}
	hist.record(proposal, max(upWindow, downWindow), now)
	stable := min(max(current, up), down)
	if proposal >= current {
		return stable, "ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation"
	}
	return stable, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation"
}

// bound is upstream's convertDesiredReplicasWithRules: the replica range, and at most
// doubling (or 4) per sync.
func bound(current, desired, minR, maxR int32) (int32, condition) {
	limit := max(scaleUpLimitFactor*current, scaleUpLimitMinimum)
	upper := condition{reason: "TooManyReplicas", message: "the desired replica count is more than the maximum replica count"}
	if maxR > limit {
		upper = condition{reason: "ScaleUpLimit", message: "the desired replica count is increasing faster than the maximum scale rate"}
	} else {
		limit = maxR
	}
	switch {
	case desired < minR:
		return minR, condition{reason: "TooFewReplicas", message: "the desired replica count is less than the minimum replica count"}
	case desired > limit:
		return limit, upper
	}
	return desired, condition{reason: "DesiredWithinRange", message: "the desired count is within the acceptable range"}
}

// rateLimit is upstream's convertDesiredReplicasWithBehaviorRate: the policies' limit on
// the change over their periods, and the replica range.
func (hist *History) rateLimit(current, desired, minR, maxR int32, up, down autoscalingv2.HPAScalingRules, now time.Time) (int32, condition) {
	switch {
	case desired > current:
		limit := max(hist.scaleUpLimit(current, up, now), current) // past changes may have used it all up
		upper := condition{reason: "TooManyReplicas", message: "the desired replica count is more than the maximum replica count"}
		if maxR > limit {
			upper = condition{reason: "ScaleUpLimit", message: "the desired replica count is increasing faster than the maximum scale rate"}
		} else {
			limit = maxR
		}
		if desired > limit {
			return limit, upper
		}
	case desired < current:
		limit := min(hist.scaleDownLimit(current, down, now), current)
		lower := condition{reason: "TooFewReplicas", message: "the desired replica count is less than the minimum replica count"}
		if minR < limit {
			lower = condition{reason: "ScaleDownLimit", message: "the desired replica count is decreasing faster than the maximum scale rate"}
		} else {
			limit = minR
		}
		if desired < limit {
			return limit, lower
		}
	}
	return desired, condition{reason: "DesiredWithinRange", message: "the desired count is within the acceptable range"}
}

// periodStart is how many replicas there were a period ago: the policies limit the change
// since then, not per sync.
func (hist *History) periodStart(current, period int32, now time.Time) int32 {
	cutoff := now.Add(-seconds(period))
	start := current
	for _, e := range hist.scaleUps {
		if e.at.After(cutoff) {
			start -= e.change
		}
	}
	for _, e := range hist.scaleDowns {
		if e.at.After(cutoff) {
			start += e.change
		}
	}
	return start
}

// scaleUpLimit is the highest count the scale-up policies allow, scaleDownLimit the
// lowest the scale-down ones do.
func (hist *History) scaleUpLimit(current int32, r autoscalingv2.HPAScalingRules, now time.Time) int32 {
	return hist.policyLimit(current, r, now, true)
}

func (hist *History) scaleDownLimit(current int32, r autoscalingv2.HPAScalingRules, now time.Time) int32 {
	return hist.policyLimit(current, r, now, false)
}

// policyLimit is the count a direction's policies allow: Max picks the policy that allows
// the most change (the highest count going up, the lowest going down), Min the least,
// Disabled none. Each policy limits the change since its period began.
func (hist *History) policyLimit(current int32, r autoscalingv2.HPAScalingRules, now time.Time, up bool) int32 {
	sel := ptr.Deref(r.SelectPolicy, autoscalingv2.MaxChangePolicySelect)
	if sel == autoscalingv2.DisabledPolicySelect {
		return current
	}
	// Going up with Max, or down with Min, the higher proposal wins.
	higher := up == (sel != autoscalingv2.MinChangePolicySelect)
	limit, applied := current, false
	for _, p := range r.Policies {
		start := hist.periodStart(current, p.PeriodSeconds, now)
		var proposed int32
		switch {
		case p.Type == autoscalingv2.PodsScalingPolicy && up:
			proposed = start + p.Value
		case p.Type == autoscalingv2.PodsScalingPolicy:
			proposed = start - p.Value
		case p.Type == autoscalingv2.PercentScalingPolicy && up:
			// Rounded up, or a small count could never grow.
			proposed = int32(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		case p.Type == autoscalingv2.PercentScalingPolicy:
			// Truncated, as upstream: a percentage never removes less than it says.
			proposed = int32(float64(start) * (1 - float64(p.Value)/100))
		default:
			continue
		}
		if !applied || (higher && proposed > limit) || (!higher && proposed < limit) {
			limit = proposed
		}
		applied = true
	}
	return limit
}
