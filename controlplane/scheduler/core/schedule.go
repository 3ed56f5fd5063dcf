package core

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// Reason strings are upstream's, verbatim: users grep events for them and tooling (cluster
// autoscalers, dashboards) parses them.
const (
	ReasonUnschedulable       = "node(s) were unschedulable"
	ReasonNodeName            = "node(s) didn't match the requested node name"
	ReasonNodeAffinity        = "node(s) didn't match Pod's node affinity/selector"
	ReasonNodePorts           = "node(s) didn't have free ports for the requested pod ports"
	ReasonTooManyPods         = "Too many pods"
	ReasonInsufficientCPU     = "Insufficient cpu"
	ReasonInsufficientMemory  = "Insufficient memory"
	ReasonInsufficientStorage = "Insufficient ephemeral-storage"
	// ReasonAffinityConflict rejects a pod whose required terms pin metadata.name to disjoint
	// node sets before any node is looked at.
	ReasonAffinityConflict = "pod affinity terms conflict"
	// ReasonNotInNodeNames is what nodes outside a metadata.name restriction count as.
	ReasonNotInNodeNames = "node(s) didn't satisfy plugin(s) [NodeAffinity]"

	// VolumeBinding's reasons.
	ReasonVolumeNodeConflict = "node(s) didn't match PersistentVolume's node affinity"
	ReasonVolumeBindConflict = "node(s) didn't find available persistent volumes to bind"
	ReasonPVNotExist         = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
)

// UntoleratedTaintReason renders the TaintToleration filter's reason for taint.
func UntoleratedTaintReason(key, value string) string {
	return fmt.Sprintf("node(s) had untolerated taint {%s: %s}", key, value)
}

// ErrNoNodesAvailable is returned when the snapshot has no nodes at all; upstream reports this
// instead of a "0/0 nodes are available" FitError.
var ErrNoNodesAvailable = errors.New("no nodes available to schedule pods")

// Options tunes one decision.
type Options struct {
	// PercentageOfNodesToScore: 0 means upstream's adaptive default: 50 - numNodes/125 percent,
	// at least 5%, and never fewer than 100 nodes (or all nodes if fewer). 100 or more means all.
	PercentageOfNodesToScore int
	// Start is the index in Nodes() where the search for feasible nodes begins (the caller
	// rotates it, as upstream's nextStartNodeIndex, so load spreads and every node gets looked
	// at even when only a fraction is searched per pod).
	Start int
	// Volumes is what the pod's PersistentVolumeClaims demand of a node; nil when the pod has
	// none. The caller derives it from its claim, volume and class listers, which keeps this
	// package free of I/O.
	Volumes *Volumes
}

// Volumes is the part of upstream's VolumeBinding filter that depends on the pod's claims
// only, resolved by the caller.
type Volumes struct {
	// Unschedulable, when set, rejects the pod before any node is looked at, as VolumeBinding's
	// PreFilter does: a missing claim (`persistentvolumeclaim "data" not found`), one being
	// deleted, or an unbound claim of an Immediate class
	// ("pod has unbound immediate PersistentVolumeClaims").
	Unschedulable string
	// NodeAffinity holds spec.nodeAffinity.required of every PersistentVolume a claim is bound
	// to; a node must match all of them (ReasonVolumeNodeConflict).
	NodeAffinity []*corev1.NodeSelector
	// MissingPV is set when a claim is bound to a PersistentVolume that does not exist; no node
	// fits then (ReasonPVNotExist).
	MissingPV bool
	// SelectedNodes are the volume.kubernetes.io/selected-node annotations of unbound
	// WaitForFirstConsumer claims: provisioning already started there, so only that node can
	// take the pod (ReasonVolumeBindConflict).
	SelectedNodes []string
}

// Result is a decision and what it cost.
type Result struct {
	Node      string // chosen node; empty on error
	Evaluated int    // nodes filtered
	Feasible  int    // nodes that passed filters
	NextStart int    // where the next search should start; set on FitError too
}

// FitError says why no node fits. Error() renders upstream's message exactly, e.g.
// "0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 2 Insufficient cpu."
type FitError struct {
	NumAllNodes int
	// Reasons maps each reason to the number of nodes that failed with it. A node failing the
	// resource filter counts once for every resource it lacks; for the other filters only the
	// first failing one counts, in upstream's filter order.
	Reasons map[string]int
	// PreFilterMsg is set when the pod was rejected before any node was filtered; upstream
	// then prints only that message.
	PreFilterMsg string
	// PostFilterMsg is what preemption reported (PreemptionResult.Message), appended last.
	PostFilterMsg string
}

func (e *FitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "0/%d nodes are available:", e.NumAllNodes)
	if e.PreFilterMsg != "" {
		b.WriteString(" " + e.PreFilterMsg + ".")
	} else {
		writeHistogram(&b, e.Reasons)
	}
	if e.PostFilterMsg != "" {
		b.WriteString(" " + e.PostFilterMsg)
	}
	return b.String()
}

func writeHistogram(b *strings.Builder, reasons map[string]int) {
	histogram := make([]string, 0, len(reasons))
	for reason, count := range reasons {
		histogram = append(histogram, fmt.Sprintf("%d %s", count, reason))
	}
	// Upstream sorts the rendered "N reason" strings, count included, so "10 ..." sorts before
	// "2 ...": keep it, since people diff these messages.
	sort.Strings(histogram)
	if len(histogram) > 0 {
		b.WriteString(" " + strings.Join(histogram, ", ") + ".")
	}
}

const (
	minFeasibleNodesToFind           = 100
	minFeasibleNodesPercentageToFind = 5
)

// NumFeasibleNodesToFind is how many feasible nodes the search stops at: scoring every node of
// a large cluster buys little placement quality for a lot of latency, so upstream scores a
// shrinking fraction as clusters grow.
func NumFeasibleNodesToFind(percentage, numAllNodes int) int {
	if numAllNodes < minFeasibleNodesToFind || percentage >= 100 {
		return numAllNodes
	}
	if percentage <= 0 {
		percentage = 50 - numAllNodes/125
		if percentage < minFeasibleNodesPercentageToFind {
			percentage = minFeasibleNodesPercentageToFind
		}
	}
	n := numAllNodes * percentage / 100
	if n < minFeasibleNodesToFind {
		return minFeasibleNodesToFind
	}
	return n
}

// Image locality thresholds, upstream's: below 23MB an image is cheap to pull anyway; above
// 1000MB per container the benefit saturates.
const (
	mb                      int64 = 1024 * 1024
	imageMinThreshold             = 23 * mb
	imageMaxContainerThresh       = 1000 * mb
)

type reasonCode int

const (
	rUnschedulable reasonCode = iota
	rNodeName
	rAffinity
	rPorts
	rTooManyPods
	rCPU
	rMemory
	rEphemeral
	rVolumeNode
	rVolumeBind
	rPVNotExist
	numReasonCodes
)

var reasonText = [numReasonCodes]string{
	rUnschedulable: ReasonUnschedulable,
	rNodeName:      ReasonNodeName,
	rAffinity:      ReasonNodeAffinity,
	rPorts:         ReasonNodePorts,
	rTooManyPods:   ReasonTooManyPods,
	rCPU:           ReasonInsufficientCPU,
	rMemory:        ReasonInsufficientMemory,
	rEphemeral:     ReasonInsufficientStorage,
	rVolumeNode:    ReasonVolumeNodeConflict,
	rVolumeBind:    ReasonVolumeBindConflict,
	rPVNotExist:    ReasonPVNotExist,
}

type taintKV struct{ key, value string }

// scratch is per-decision working memory kept in the Snapshot so that steady-state decisions
// do not allocate.
type scratch struct {
	feasible    []*NodeInfo
	cands       []*NodeInfo
	scores      []nodeScore
	counts      [numReasonCodes]int
	taintFails  map[taintKV]int
	scalarFails map[corev1.ResourceName]int
	zoneCounts  map[string]int64
}

func (sc *scratch) reset() {
	sc.feasible = sc.feasible[:0]
	sc.cands = sc.cands[:0]
	sc.counts = [numReasonCodes]int{}
	if sc.taintFails == nil {
		sc.taintFails = make(map[taintKV]int)
		sc.scalarFails = make(map[corev1.ResourceName]int)
		sc.zoneCounts = make(map[string]int64)
	}
	if len(sc.taintFails) > 0 {
		clear(sc.taintFails)
	}
	if len(sc.scalarFails) > 0 {
		clear(sc.scalarFails)
	}
}

// nodeScore holds one feasible node's scores: base is already weighted, the others are raw
// values that need normalizing across all feasible nodes.
type nodeScore struct {
	base, spread, affinity, taints int64
}

type imageRef struct {
	name   string
	scaled int64 // size scaled by the share of nodes that have it
}

// podQuery is the incoming pod digested once per decision, so the per-node loops only compare.
type podQuery struct {
	req      Resources
	scalar   []scalarQty
	zeroReq  bool
	scoreCPU int64 // requests with scoring defaults, for least-allocated
	scoreMem int64
	// bestEffort pods skip balanced allocation: with nothing requested every node would look
	// equally balanced and upstream found the scorer then piles pods up (kubernetes#129138).
	bestEffort bool

	nodeName         string
	tolerations      []corev1.Toleration
	tolUnschedulable bool
	preferTols       []corev1.Toleration // tolerations that can cover PreferNoSchedule taints
	required         *requiredAffinity
	preferred        []weightedTerm
	ports            []hostPortKey
	owner            types.UID
	images           []imageRef
	numContainers    int

	// pod and priority decide which nominated pods the pod must leave room for.
	pod      *corev1.Pod
	priority int32
	// volumes is the parsed Options.Volumes; nil when the pod's claims constrain no node.
	volumes *volumeQuery
}

type volumeQuery struct {
	missingPV     bool
	affinity      [][]nodeTerm // per bound PV: its terms, ORed
	selectedNodes []string
}

func newVolumeQuery(v *Volumes) *volumeQuery {
	if v == nil || (!v.MissingPV && len(v.NodeAffinity) == 0 && len(v.SelectedNodes) == 0) {
		return nil
	}
	vq := &volumeQuery{missingPV: v.MissingPV, selectedNodes: v.SelectedNodes}
	for _, ns := range v.NodeAffinity {
		if ns == nil {
			continue
		}
		var terms []nodeTerm
		for i := range ns.NodeSelectorTerms {
			if t, ok := parseNodeTerm(&ns.NodeSelectorTerms[i]); ok {
				terms = append(terms, t)
			}
		}
		// A selector whose terms all select nothing keeps an empty entry: it matches no node.
		vq.affinity = append(vq.affinity, terms)
	}
	return vq
}

// fits records every volume reason n fails with; upstream's VolumeBinding reports them all.
func (vq *volumeQuery) fits(n *NodeInfo, sc *scratch) bool {
	ok := true
	if vq.missingPV {
		sc.counts[rPVNotExist]++
		ok = false
	} else {
		for _, terms := range vq.affinity {
			if !anyTermMatches(terms, n.Node) {
				sc.counts[rVolumeNode]++
				ok = false
				break
			}
		}
	}
	for _, name := range vq.selectedNodes {
		if name != n.name {
			sc.counts[rVolumeBind]++
			ok = false
			break
		}
	}
	return ok
}

func anyTermMatches(terms []nodeTerm, node *corev1.Node) bool {
	for i := range terms {
		if terms[i].matches(node) {
			return true
		}
	}
	return false
}

var unschedulableTaint = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}

func (s *Snapshot) newPodQuery(pod *corev1.Pod) podQuery {
	actual := podVec(pod, false, false)
	q := podQuery{
		req:         Resources{MilliCPU: actual.cpu, Memory: actual.mem, EphemeralStorage: actual.eph, Pods: 1},
		scalar:      actual.scalar,
		nodeName:    pod.Spec.NodeName,
		tolerations: pod.Spec.Tolerations,
		required:    parseRequiredAffinity(pod),
		preferred:   parsePreferred(pod),
		ports:       hostPorts(pod),
		owner:       controllerOwner(pod),
		pod:         pod,
		priority:    corev1helpers.PodPriority(pod),
	}
	q.zeroReq = actual.cpu == 0 && actual.mem == 0 && actual.eph == 0 && len(actual.scalar) == 0
	q.bestEffort = actual.cpu == 0 && actual.mem == 0
	if actual.has&hasCPU != 0 && actual.has&hasMem != 0 && allContainersNameCPUAndMemory(pod) {
		q.scoreCPU, q.scoreMem = actual.cpu, actual.mem
	} else {
		sv := podVec(pod, true, true)
		q.scoreCPU, q.scoreMem = sv.cpu, sv.mem
	}
	q.tolUnschedulable = toleratedBy(q.tolerations, &unschedulableTaint)
	for i := range q.tolerations {
		if e := q.tolerations[i].Effect; e == "" || e == corev1.TaintEffectPreferNoSchedule {
			q.preferTols = append(q.preferTols, q.tolerations[i])
		}
	}
	q.numContainers = len(pod.Spec.InitContainers) + len(pod.Spec.Containers)
	if len(s.images) > 0 && s.numNodes > 0 {
		addImage := func(image string) {
			name := normalizedImageName(image)
			if st := s.images[name]; st != nil {
				spread := float64(st.nodes) / float64(s.numNodes)
				q.images = append(q.images, imageRef{name: name, scaled: int64(float64(st.size) * spread)})
			}
		}
		for i := range pod.Spec.InitContainers {
			addImage(pod.Spec.InitContainers[i].Image)
		}
		for i := range pod.Spec.Containers {
			addImage(pod.Spec.Containers[i].Image)
		}
	}
	return q
}

// allContainersNameCPUAndMemory is the common case where the scoring defaults change nothing,
// which saves aggregating the pod a second time.
func allContainersNameCPUAndMemory(pod *corev1.Pod) bool {
	if len(pod.Status.ContainerStatuses)+len(pod.Status.InitContainerStatuses) > 0 {
		return false
	}
	named := func(cs []corev1.Container) bool {
		for i := range cs {
			r := cs[i].Resources.Requests
			if _, ok := r[corev1.ResourceCPU]; !ok {
				return false
			}
			if _, ok := r[corev1.ResourceMemory]; !ok {
				return false
			}
		}
		return true
	}
	return named(pod.Spec.Containers) && named(pod.Spec.InitContainers)
}

// normalizedImageName adds the implicit ":latest" tag, as upstream does before looking an image
// up in the node's image list.
func normalizedImageName(name string) string {
	if strings.LastIndex(name, ":") <= strings.LastIndex(name, "/") {
		return name + ":latest"
	}
	return name
}

// Schedule picks a node for pod or returns *FitError (ErrNoNodesAvailable for an empty
// snapshot). The Result carries Evaluated and NextStart on failure too, because upstream
// advances its start index either way so that the next pod looks at other nodes first.
func Schedule(s *Snapshot, pod *corev1.Pod, o Options) (Result, error) {
	if pod == nil {
		return Result{}, errors.New("core: nil pod")
	}
	if s == nil || s.numNodes == 0 {
		return Result{}, ErrNoNodesAvailable
	}
	nodes := s.Nodes()
	numAll := len(nodes)
	start := o.Start % numAll
	if start < 0 {
		start += numAll
	}
	q := s.newPodQuery(pod)
	sc := &s.scratch
	sc.reset()

	candidates := nodes
	candStart := start
	restricted := false
	if names, ok := nodeNameRestriction(pod); ok {
		if len(names) == 0 {
			return Result{NextStart: start}, &FitError{
				NumAllNodes:  numAll,
				Reasons:      map[string]int{ReasonAffinityConflict: numAll},
				PreFilterMsg: ReasonAffinityConflict,
			}
		}
		restricted = true
		for _, name := range names {
			if n := s.Node(name); n != nil {
				sc.cands = append(sc.cands, n)
			}
		}
		slices.SortFunc(sc.cands, func(a, b *NodeInfo) int { return a.pos - b.pos })
		candidates = sc.cands
		if len(candidates) > 0 {
			candStart = start % len(candidates)
		}
	}
	if o.Volumes != nil {
		if msg := o.Volumes.Unschedulable; msg != "" {
			return Result{NextStart: start}, &FitError{NumAllNodes: numAll, Reasons: map[string]int{msg: numAll}, PreFilterMsg: msg}
		}
		q.volumes = newVolumeQuery(o.Volumes)
	}

	toFind := NumFeasibleNodesToFind(o.PercentageOfNodesToScore, len(candidates))
	evaluated := 0
	for evaluated < len(candidates) && len(sc.feasible) < toFind {
		n := candidates[(candStart+evaluated)%len(candidates)]
		evaluated++
		if q.fits(n, sc) {
			sc.feasible = append(sc.feasible, n)
		}
	}
	res := Result{Evaluated: evaluated, Feasible: len(sc.feasible), NextStart: (start + evaluated) % numAll}
	if len(sc.feasible) == 0 {
		absent := 0
		if restricted {
			absent = numAll - evaluated
		}
		return res, sc.fitError(numAll, absent)
	}
	if len(sc.feasible) == 1 {
		// Nothing to compare: upstream skips scoring too.
		res.Node = sc.feasible[0].name
		return res, nil
	}
	res.Node = sc.feasible[s.pickBest(&q, sc)].name
	return res, nil
}

func (sc *scratch) fitError(numAll, absent int) *FitError {
	e := &FitError{NumAllNodes: numAll, Reasons: make(map[string]int)}
	for code, c := range sc.counts {
		if c > 0 {
			e.Reasons[reasonText[code]] += c
		}
	}
	for kv, c := range sc.taintFails {
		e.Reasons[UntoleratedTaintReason(kv.key, kv.value)] += c
	}
	for name, c := range sc.scalarFails {
		e.Reasons["Insufficient "+string(name)] += c
	}
	if absent > 0 {
		e.Reasons[ReasonNotInNodeNames] += absent
	}
	return e
}

// fits runs the filters in upstream's order, recording why n failed into sc.
func (q *podQuery) fits(n *NodeInfo, sc *scratch) bool {
	if !q.fitsNode(n, sc) {
		return false
	}
	if len(n.nominated) > 0 {
		return q.fitsWithNominated(n, sc)
	}
	return q.fitsPods(n, sc)
}

// fitsWithNominated runs the pod-dependent filters with the nominated pods counted.
func (q *podQuery) fitsWithNominated(n *NodeInfo, sc *scratch) bool {
	if len(n.nominated) > 0 && q.addNominated(n) {
		ok := q.fitsPods(n, sc)
		q.dropNominated(n)
		return ok
	}
	return q.fitsPods(n, sc)
}

// fitsNode runs the filters that look at the node only. A node failing them cannot be made to
// fit by removing pods (upstream's UnschedulableAndUnresolvable), so preemption skips it.
func (q *podQuery) fitsNode(n *NodeInfo, sc *scratch) bool {
	if n.unschedulable && !q.tolUnschedulable {
		sc.counts[rUnschedulable]++
		return false
	}
	if q.nodeName != "" && q.nodeName != n.name {
		sc.counts[rNodeName]++
		return false
	}
	for i := range n.hardTaints {
		t := &n.hardTaints[i]
		if !toleratedBy(q.tolerations, t) {
			sc.taintFails[taintKV{t.Key, t.Value}]++
			return false
		}
	}
	if q.required != nil && !q.required.matches(n.Node) {
		sc.counts[rAffinity]++
		return false
	}
	return true
}

// fitsPods runs the filters that depend on what is assigned to n (host ports, resources),
// then VolumeBinding's, which come after them in upstream's order.
func (q *podQuery) fitsPods(n *NodeInfo, sc *scratch) bool {
	if len(q.ports) > 0 && n.portConflict(q.ports) {
		sc.counts[rPorts]++
		return false
	}
	if !q.fitsResources(n, sc) {
		return false
	}
	return q.volumes == nil || q.volumes.fits(n, sc)
}

// addNominated adds to n's aggregates the pods nominated to n that are at least as important
// as the pod, other than the pod itself, as upstream's RunFilterPluginsWithNominatedPods does:
// a preemptor waiting for its victims to leave keeps the room it freed. It reports whether it
// added any; dropNominated undoes it. Nominated entries carry no owner, so only resources and
// ports change.
func (q *podQuery) addNominated(n *NodeInfo) bool {
	added := false
	for _, e := range n.nominated {
		if q.countsNominated(e) {
			n.account(e, 1)
			added = true
		}
	}
	return added
}

func (q *podQuery) dropNominated(n *NodeInfo) {
	for _, e := range n.nominated {
		if q.countsNominated(e) {
			n.account(e, -1)
		}
	}
}

func (q *podQuery) countsNominated(e *podEntry) bool {
	return e.priority >= q.priority && e.pod != q.pod && e.key != podKey(q.pod)
}

// fitsResources reports every resource n lacks, not just the first, as upstream does, so the
// message tells the whole story ("Insufficient cpu, Insufficient memory").
func (q *podQuery) fitsResources(n *NodeInfo, sc *scratch) bool {
	ok := true
	if n.Requested.Pods+1 > n.Allocatable.Pods {
		sc.counts[rTooManyPods]++
		ok = false
	}
	if q.zeroReq {
		return ok
	}
	if q.req.MilliCPU > 0 && q.req.MilliCPU > n.Allocatable.MilliCPU-n.Requested.MilliCPU {
		sc.counts[rCPU]++
		ok = false
	}
	if q.req.Memory > 0 && q.req.Memory > n.Allocatable.Memory-n.Requested.Memory {
		sc.counts[rMemory]++
		ok = false
	}
	if q.req.EphemeralStorage > 0 && q.req.EphemeralStorage > n.Allocatable.EphemeralStorage-n.Requested.EphemeralStorage {
		sc.counts[rEphemeral]++
		ok = false
	}
	for _, s := range q.scalar {
		if s.value == 0 {
			continue
		}
		if s.value > n.allocScalar[s.name]-n.reqScalar[s.name] {
			sc.scalarFails[s.name]++
			ok = false
		}
	}
	return ok
}
