package core

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Messages of upstream's DefaultPreemption, verbatim.
const (
	msgNotEligibleNever       = "not eligible due to preemptionPolicy=Never."
	msgNotEligibleTerminating = "not eligible due to a terminating pod on the nominated node."
	// ReasonNoVictims counts nodes that could be fixed by removing pods but hold none of lower
	// priority.
	ReasonNoVictims = "No preemption victims found for incoming pod"
	// ReasonPreemptionNotHelpful counts nodes no removal of pods can fix (taints, affinity, ...).
	ReasonPreemptionNotHelpful = "Preemption is not helpful for scheduling"
)

// Upstream's DefaultPreemptionArgs defaults: dry-run preemption on at least 10% of the
// candidate nodes or 100 of them, whichever is more, once a PDB-respecting candidate exists.
const (
	minCandidateNodesPercentage = 10
	minCandidateNodesAbsolute   = 100
)

// PreemptionResult is the outcome of Preempt.
type PreemptionResult struct {
	// Node is where the pod should be nominated; empty when preemption cannot help.
	Node string
	// Victims are the pods to evict from Node, most important first.
	Victims []*corev1.Pod
	// NumPDBViolations counts victims whose eviction a PodDisruptionBudget does not allow.
	NumPDBViolations int
	// LowerNominated are the pods of lower priority than the preemptor nominated to Node:
	// upstream clears their nominatedNodeName, since the room freed is for the preemptor.
	LowerNominated []*corev1.Pod
	// ClearNominatedNode is set when no node can be freed for the pod: upstream then clears
	// the pod's own nominatedNodeName.
	ClearNominatedNode bool
	// Message is what upstream's DefaultPreemption PostFilter reports, prefix included, e.g.
	// "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.";
	// it goes into FitError.PostFilterMsg.
	Message string
}

// Preempt is upstream's DefaultPreemption for a pod that fits nowhere (Schedule returned a
// FitError): it finds the node where evicting pods of lower priority than pod lets it fit,
// evicting as few and as unimportant pods as possible, preferring evictions that
// PodDisruptionBudgets allow. ok is false when preemption cannot help or the pod may not
// preempt. o.Start rotates where the search begins (upstream picks a random offset); o.Volumes
// must be what Schedule was given.
//
// The snapshot is modified while nodes are tried and restored before Preempt returns; the
// pods themselves are not touched. Evicting the victims and nominating the pod is the caller's.
func Preempt(s *Snapshot, pod *corev1.Pod, pdbs []*policyv1.PodDisruptionBudget, o Options) (PreemptionResult, bool) {
	if pod == nil || s == nil || s.numNodes == 0 {
		return PreemptionResult{}, false
	}
	if p := pod.Spec.PreemptionPolicy; p != nil && *p == corev1.PreemptNever {
		return PreemptionResult{Message: "preemption: " + msgNotEligibleNever}, false
	}
	nodes := s.Nodes()
	q := s.newPodQuery(pod)
	sc := &s.scratch
	sc.reset()
	var rejectAll bool
	if o.Volumes != nil {
		rejectAll = o.Volumes.Unschedulable != ""
		q.volumes = newVolumeQuery(o.Volumes)
	}

	// Upstream's PodEligibleToPreemptOthers: a pod that already preempted waits for its
	// victims to leave instead of preempting again, unless its nominated node cannot take it
	// any more whatever is removed.
	if nom := s.Node(pod.Status.NominatedNodeName); nom != nil && !rejectAll && q.fitsNode(nom, sc) && q.volumesFit(nom, sc) {
		for _, e := range nom.pods {
			if e.priority < q.priority && terminatingByPreemption(e.pod) {
				return PreemptionResult{Message: "preemption: " + msgNotEligibleTerminating}, false
			}
		}
	}

	// Nodes where removing pods may help: they pass the node-only filters and VolumeBinding,
	// and fail on ports or resources (with nominated pods counted).
	potential := sc.feasible[:0]
	if !rejectAll {
		start := o.Start % len(nodes)
		if start < 0 {
			start += len(nodes)
		}
		for i := range nodes {
			n := nodes[(start+i)%len(nodes)]
			if q.fitsNode(n, sc) && q.volumesFit(n, sc) {
				potential = append(potential, n)
			}
		}
	}
	sc.feasible = potential
	// The classification above counted reasons into sc; the per-node outcomes below are what
	// the message reports.
	sc.reset()
	sc.feasible = potential

	numCandidates := min(max(len(potential)*minCandidateNodesPercentage/100, minCandidateNodesAbsolute), len(potential))
	pp := parsePDBs(pdbs)
	var nonViolating, violating []candidate
	noVictims := 0
	for _, n := range potential {
		c, status := q.selectVictims(n, pp, sc)
		switch status {
		case victimsFound:
			if c.numPDBViolations == 0 {
				nonViolating = append(nonViolating, c)
			} else {
				violating = append(violating, c)
			}
		case noVictimsFound:
			noVictims++
		}
		if len(nonViolating) > 0 && len(nonViolating)+len(violating) >= numCandidates {
			break
		}
	}
	candidates := append(nonViolating, violating...)
	if len(candidates) == 0 {
		e := sc.fitError(len(nodes), 0)
		if noVictims > 0 {
			e.Reasons[ReasonNoVictims] += noVictims
		}
		if rest := len(nodes) - len(potential); rest > 0 {
			e.Reasons[ReasonPreemptionNotHelpful] += rest
		}
		var b strings.Builder
		fmt.Fprintf(&b, "preemption: 0/%d nodes are available:", len(nodes))
		writeHistogram(&b, e.Reasons)
		return PreemptionResult{ClearNominatedNode: true, Message: b.String()}, false
	}
	best := pickOneNodeForPreemption(candidates)
	res := PreemptionResult{Node: best.node.name, NumPDBViolations: best.numPDBViolations}
	for _, v := range best.victims {
		res.Victims = append(res.Victims, v.pod)
	}
	for _, e := range best.node.nominated {
		if e.priority < q.priority && e.pod != pod && e.key != podKey(pod) {
			res.LowerNominated = append(res.LowerNominated, e.pod)
		}
	}
	res.Message = fmt.Sprintf("preemption: found a potential placement for pod on node %v, preempting %d victims", res.Node, len(res.Victims))
	return res, true
}

// volumesFit is VolumeBinding's verdict alone; it does not depend on the node's pods, so a
// node failing it cannot be fixed by preemption either.
func (q *podQuery) volumesFit(n *NodeInfo, sc *scratch) bool {
	return q.volumes == nil || q.volumes.fits(n, sc)
}

// terminatingByPreemption is upstream's PodTerminatingByPreemption.
func terminatingByPreemption(p *corev1.Pod) bool {
	if p.DeletionTimestamp == nil {
		return false
	}
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if c.Type == corev1.DisruptionTarget {
			return c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonPreemptionByScheduler
		}
	}
	return false
}

type candidate struct {
	node             *NodeInfo
	victims          []*podEntry // most important first
	numPDBViolations int
}

type victimsStatus int

const (
	victimsFound victimsStatus = iota
	noVictimsFound
	stillUnfit // even with every lower-priority pod gone; sc has the reasons
)

// selectVictims is upstream's SelectVictimsOnNode: take every pod of lower priority off n;
// if the pod then fits, put them back one by one, most important first and PDB-protected
// ones before the others, keeping each that still leaves room. n is restored on return.
func (q *podQuery) selectVictims(n *NodeInfo, pdbs []parsedPDB, sc *scratch) (candidate, victimsStatus) {
	var potential []*podEntry
	for _, e := range n.pods {
		if e.priority < q.priority {
			potential = append(potential, e)
		}
	}
	if len(potential) == 0 {
		return candidate{}, noVictimsFound
	}
	for _, e := range potential {
		n.detach(e)
	}
	defer func() {
		for _, e := range potential {
			if _, ok := n.index[e.key]; !ok {
				n.attach(e)
			}
		}
	}()
	if !q.fitsWithNominated(n, sc) {
		return candidate{}, stillUnfit
	}

	slices.SortStableFunc(potential, func(a, b *podEntry) int {
		if moreImportant(a, b) {
			return -1
		}
		if moreImportant(b, a) {
			return 1
		}
		return 0
	})
	violatingVictims, nonViolatingVictims := filterPDBViolations(potential, pdbs)

	// Reprieve checks only need the pod-dependent filters (the node's pass already); their
	// reasons must not pollute the message, hence a scratch of their own.
	var quiet scratch
	quiet.reset()
	var victims []*podEntry
	reprieve := func(e *podEntry) bool {
		n.attach(e)
		if q.fitsWithNominated(n, &quiet) {
			return true
		}
		n.detach(e)
		victims = append(victims, e)
		return false
	}
	violations := 0
	for _, e := range violatingVictims {
		if !reprieve(e) {
			violations++
		}
	}
	for _, e := range nonViolatingVictims {
		reprieve(e)
	}
	if len(violatingVictims) > 0 && len(nonViolatingVictims) > 0 {
		slices.SortStableFunc(victims, func(a, b *podEntry) int {
			if moreImportant(a, b) {
				return -1
			}
			if moreImportant(b, a) {
				return 1
			}
			return 0
		})
	}
	return candidate{node: n, victims: victims, numPDBViolations: violations}, victimsFound
}

// detach and attach take an assigned pod's entry off the node and put it back without
// recomputing it, for trying evictions.
func (n *NodeInfo) detach(e *podEntry) {
	if i, ok := n.index[e.key]; ok && n.pods[i] == e {
		n.removeAt(i)
	}
}

func (n *NodeInfo) attach(e *podEntry) {
	n.index[e.key] = len(n.pods)
	n.pods = append(n.pods, e)
	n.account(e, 1)
}

// never is the start time of a pod that has not started: later than any real one, as
// upstream's "now" is.
var never = time.Unix(0, math.MaxInt64)

func startTime(p *corev1.Pod) time.Time {
	if p.Status.StartTime != nil {
		return p.Status.StartTime.Time
	}
	return never
}

// moreImportant is upstream's MoreImportantPod: higher priority, then started earlier.
func moreImportant(a, b *podEntry) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	return startTime(a.pod).Before(startTime(b.pod))
}

type parsedPDB struct {
	namespace string
	selector  labels.Selector
	disrupted map[string]metav1.Time
	allowed   int32
}

// parsePDBs parses the selectors once per preemption; PDBs with an invalid selector protect
// nothing, as upstream skips them.
func parsePDBs(pdbs []*policyv1.PodDisruptionBudget) []parsedPDB {
	out := make([]parsedPDB, 0, len(pdbs))
	for _, pdb := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			continue
		}
		out = append(out, parsedPDB{namespace: pdb.Namespace, selector: sel, disrupted: pdb.Status.DisruptedPods, allowed: pdb.Status.DisruptionsAllowed})
	}
	return out
}

// filterPDBViolations is upstream's FilterVictimsWithPDBViolation: walking the victims in
// order, each one a PDB covers uses up one of its allowed disruptions (unless the PDB already
// counts it as disrupted); a victim that takes a PDB below zero violates it.
func filterPDBViolations(victims []*podEntry, pdbs []parsedPDB) (violating, nonViolating []*podEntry) {
	allowed := make([]int32, len(pdbs))
	for i := range pdbs {
		allowed[i] = pdbs[i].allowed
	}
	for _, e := range victims {
		p := e.pod
		violates := false
		if len(p.Labels) > 0 {
			for i := range pdbs {
				pdb := &pdbs[i]
				if pdb.namespace != p.Namespace || pdb.selector.Empty() || !pdb.selector.Matches(labels.Set(p.Labels)) {
					continue
				}
				if _, ok := pdb.disrupted[p.Name]; ok {
					continue
				}
				allowed[i]--
				if allowed[i] < 0 {
					violates = true
					break
				}
			}
		}
		if violates {
			violating = append(violating, e)
		} else {
			nonViolating = append(nonViolating, e)
		}
	}
	return violating, nonViolating
}

// pickOneNodeForPreemption is upstream's choice among candidates, each criterion breaking the
// previous one's ties: fewest PDB violations, lowest highest-victim priority, smallest sum of
// victim priorities, fewest victims, latest start among the highest-priority victims; then
// the first candidate.
func pickOneNodeForPreemption(cands []candidate) *candidate {
	scores := []func(c *candidate) int64{
		func(c *candidate) int64 { return -int64(c.numPDBViolations) },
		func(c *candidate) int64 { return -int64(c.victims[0].priority) },
		func(c *candidate) int64 {
			var sum int64
			for _, v := range c.victims {
				// Shifted so that negative priorities still add up to a larger sum per pod.
				sum += int64(v.priority) + int64(math.MaxInt32+1)
			}
			return -sum
		},
		func(c *candidate) int64 { return -int64(len(c.victims)) },
		func(c *candidate) int64 { return earliestStartOfHighest(c.victims).UnixNano() },
	}
	remaining := make([]*candidate, len(cands))
	for i := range cands {
		remaining[i] = &cands[i]
	}
	for _, score := range scores {
		best := int64(math.MinInt64)
		kept := remaining[:0:0]
		for _, c := range remaining {
			switch v := score(c); {
			case v > best:
				best = v
				kept = append(kept[:0], c)
			case v == best:
				kept = append(kept, c)
			}
		}
		if len(kept) == 1 {
			return kept[0]
		}
		remaining = kept
	}
	return remaining[0]
}

// earliestStartOfHighest is upstream's GetEarliestPodStartTime: the earliest start among the
// victims of the highest priority.
func earliestStartOfHighest(victims []*podEntry) time.Time {
	earliest, highest := startTime(victims[0].pod), victims[0].priority
	for _, v := range victims[1:] {
		switch {
		case v.priority == highest:
			if t := startTime(v.pod); t.Before(earliest) {
				earliest = t
			}
		case v.priority > highest:
			highest, earliest = v.priority, startTime(v.pod)
		}
	}
	return earliest
}
