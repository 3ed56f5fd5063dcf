package nodelifecycle

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// Upstream's taint keys for nodes that are not ready or not heard from.
var (
	UnreachableNoExecute = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
	UnreachableNoSched   = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}
	NotReadyNoExecute    = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}
	NotReadyNoSched      = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
)

// ReadyStatus returns the node's Ready condition status ("" when it has none).
func ReadyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// WantedTaints are the lifecycle taints a node should carry for its Ready status: unreachable
// when Unknown (or never reported), not-ready when False, none when True.
func WantedTaints(ready corev1.ConditionStatus) []corev1.Taint {
	switch ready {
	case corev1.ConditionTrue:
		return nil
	case corev1.ConditionFalse:
		return []corev1.Taint{NotReadyNoSched, NotReadyNoExecute}
	}
	return []corev1.Taint{UnreachableNoSched, UnreachableNoExecute}
}

// conditionTaints are the NoSchedule taints a node carries while a condition has the status
// (upstream's TaintNodesByCondition): the scheduler keeps new pods off a node under pressure,
// unless they tolerate it (DaemonSet pods do).
var conditionTaints = []struct {
	condition corev1.NodeConditionType
	status    corev1.ConditionStatus
	key       string
}{
	{corev1.NodeMemoryPressure, corev1.ConditionTrue, corev1.TaintNodeMemoryPressure},
	{corev1.NodeDiskPressure, corev1.ConditionTrue, corev1.TaintNodeDiskPressure},
	{corev1.NodePIDPressure, corev1.ConditionTrue, corev1.TaintNodePIDPressure},
	{corev1.NodeNetworkUnavailable, corev1.ConditionTrue, corev1.TaintNodeNetworkUnavailable},
}

// ConditionTaints are the NoSchedule taints the node's conditions call for.
func ConditionTaints(n *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	for _, ct := range conditionTaints {
		for _, c := range n.Status.Conditions {
			if c.Type == ct.condition && c.Status == ct.status {
				out = append(out, corev1.Taint{Key: ct.key, Effect: corev1.TaintEffectNoSchedule})
			}
		}
	}
	return out
}

func isLifecycleTaint(t corev1.Taint) bool {
	if t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady {
		return true
	}
	for _, ct := range conditionTaints {
		if t.Key == ct.key && t.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}

// ReconcileTaints returns the node's taints with the lifecycle ones replaced by wanted (a
// kept taint keeps its timeAdded) and whether anything changed.
func ReconcileTaints(current, wanted []corev1.Taint, now time.Time) ([]corev1.Taint, bool) {
	var out []corev1.Taint
	changed := false
	have := map[string]corev1.Taint{}
	for _, t := range current {
		if isLifecycleTaint(t) {
			have[t.Key+":"+string(t.Effect)] = t
			continue
		}
		out = append(out, t)
	}
	for _, w := range wanted {
		if t, ok := have[w.Key+":"+string(w.Effect)]; ok {
			out = append(out, t)
			delete(have, w.Key+":"+string(w.Effect))
			continue
		}
		if w.Effect == corev1.TaintEffectNoExecute {
			w.TimeAdded = &metav1.Time{Time: now}
		}
		out = append(out, w)
		changed = true
	}
	if len(have) > 0 {
		changed = true
	}
	return out, changed
}

// EvictionTime returns when a pod must leave a node with these taints: the earliest
// timeAdded+tolerationSeconds over the NoExecute taints, timeAdded itself for an untolerated
// one, and ok=false when it may stay forever.
func EvictionTime(pod *corev1.Pod, taints []corev1.Taint) (time.Time, bool) {
	var at time.Time
	found := false
	for _, t := range taints {
		if t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		added := time.Time{}
		if t.TimeAdded != nil {
			added = t.TimeAdded.Time
		}
		deadline, tolerated, forever := added, false, false
		for _, tol := range pod.Spec.Tolerations {
			if !tol.ToleratesTaint(klog.Background(), &t, false) {
				continue
			}
			if tol.TolerationSeconds == nil {
				forever = true
				break
			}
			d := added.Add(time.Duration(max(*tol.TolerationSeconds, 0)) * time.Second)
			if !tolerated || d.Before(deadline) {
				deadline = d
			}
			tolerated = true
		}
		if forever {
			continue
		}
		if !found || deadline.Before(at) {
			at, found = deadline, true
		}
	}
	return at, found
}
