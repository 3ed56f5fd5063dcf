package core

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
)

// metadataNameField is the only field node selector terms may match on.
const metadataNameField = "metadata.name"

// tolerates reports whether toleration t covers taint. An empty effect or key is a wildcard;
// operator Exists ignores the value. Lt/Gt sit behind an alpha feature gate upstream that is off
// by default, so they tolerate nothing here.
func tolerates(t *corev1.Toleration, taint *corev1.Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case "", corev1.TolerationOpEqual:
		return t.Value == taint.Value
	case corev1.TolerationOpExists:
		return true
	default:
		return false
	}
}

func toleratedBy(tols []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tols {
		if tolerates(&tols[i], taint) {
			return true
		}
	}
	return false
}

// nodeTerm is one parsed NodeSelectorTerm: all requirements must hold.
type nodeTerm struct {
	labels []*labels.Requirement
	fields []fieldReq
}

type fieldReq struct {
	notIn bool
	value string
}

var nodeSelectorOps = map[corev1.NodeSelectorOperator]selection.Operator{
	corev1.NodeSelectorOpIn:           selection.In,
	corev1.NodeSelectorOpNotIn:        selection.NotIn,
	corev1.NodeSelectorOpExists:       selection.Exists,
	corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
	corev1.NodeSelectorOpGt:           selection.GreaterThan,
	corev1.NodeSelectorOpLt:           selection.LessThan,
}

// parseNodeTerm parses t the way upstream's nodeaffinity helper does. ok is false for a term
// that selects nothing: an empty term, or one with a requirement upstream cannot parse (it
// skips such terms rather than failing the pod, for backwards compatibility).
func parseNodeTerm(t *corev1.NodeSelectorTerm) (nodeTerm, bool) {
	var out nodeTerm
	if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
		return out, false
	}
	for _, e := range t.MatchExpressions {
		op, known := nodeSelectorOps[e.Operator]
		if !known {
			return out, false
		}
		r, err := labels.NewRequirement(e.Key, op, e.Values)
		if err != nil {
			return out, false
		}
		out.labels = append(out.labels, r)
	}
	for _, e := range t.MatchFields {
		if e.Key != metadataNameField || len(e.Values) != 1 {
			return out, false
		}
		switch e.Operator {
		case corev1.NodeSelectorOpIn:
			out.fields = append(out.fields, fieldReq{value: e.Values[0]})
		case corev1.NodeSelectorOpNotIn:
			out.fields = append(out.fields, fieldReq{notIn: true, value: e.Values[0]})
		default:
			return out, false
		}
	}
	return out, true
}

func (t *nodeTerm) matches(node *corev1.Node) bool {
	if len(t.labels) > 0 {
		set := labels.Set(node.Labels)
		for _, r := range t.labels {
			if !r.Matches(set) {
				return false
			}
		}
	}
	// Upstream has no fields to match for a nameless node and then ignores field requirements.
	if node.Name != "" {
		for _, f := range t.fields {
			if (node.Name == f.value) == f.notIn {
				return false
			}
		}
	}
	return true
}

// requiredAffinity is spec.nodeSelector ANDed with the required node affinity, whose terms are
// ORed.
type requiredAffinity struct {
	selector    map[string]string
	hasAffinity bool // a required node affinity exists; with no valid terms it matches nothing
	terms       []nodeTerm
}

func parseRequiredAffinity(pod *corev1.Pod) *requiredAffinity {
	var ra requiredAffinity
	if len(pod.Spec.NodeSelector) > 0 {
		ra.selector = pod.Spec.NodeSelector
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		ra.hasAffinity = true
		for i := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			if t, ok := parseNodeTerm(&a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[i]); ok {
				ra.terms = append(ra.terms, t)
			}
		}
	}
	if ra.selector == nil && !ra.hasAffinity {
		return nil
	}
	return &ra
}

func (ra *requiredAffinity) matches(node *corev1.Node) bool {
	for k, v := range ra.selector {
		if lv, ok := node.Labels[k]; !ok || lv != v {
			return false
		}
	}
	if !ra.hasAffinity {
		return true
	}
	for i := range ra.terms {
		if ra.terms[i].matches(node) {
			return true
		}
	}
	return false
}

type weightedTerm struct {
	weight int64
	term   nodeTerm
}

// parsePreferred keeps the preferred terms that can ever score: non-zero weight and parseable.
func parsePreferred(pod *corev1.Pod) []weightedTerm {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil {
		return nil
	}
	var out []weightedTerm
	for i := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		p := &a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution[i]
		if p.Weight == 0 {
			continue
		}
		if t, ok := parseNodeTerm(&p.Preference); ok {
			out = append(out, weightedTerm{weight: int64(p.Weight), term: t})
		}
	}
	return out
}

// nodeNameRestriction mirrors upstream NodeAffinity's PreFilter: when every required term pins
// metadata.name with In (as DaemonSet pods do), only those nodes can match and only they are
// evaluated. restricted is false when any term leaves other nodes eligible; a restriction with
// no names means the terms contradict each other.
func nodeNameRestriction(pod *corev1.Pod) (names []string, restricted bool) {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil, false
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		return nil, false
	}
	all := sets.New[string]()
	for i := range terms {
		var term sets.Set[string]
		for _, r := range terms[i].MatchFields {
			if r.Key != metadataNameField || r.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			s := sets.New(r.Values...)
			if term == nil {
				term = s
			} else {
				term = term.Intersection(s)
			}
		}
		if term == nil {
			return nil, false
		}
		all = all.Union(term)
	}
	return sets.List(all), true
}
