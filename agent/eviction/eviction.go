// Package eviction is the decision core of node-pressure eviction, as the kubelet's eviction
// manager decides it: which hard thresholds (--eviction-hard, "memory.available<100Mi,…") the
// node's observed signals cross, which pressure conditions the node reports (held for a
// transition period after the last crossing so they do not flap), which pods a node under
// pressure still admits, and which pod goes first and with what message. It does no I/O: the
// agent observes the node and its pods and acts on what this package returns.
package eviction

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/podqos"
)

// Signal is an eviction signal, named as the kubelet names it.
type Signal string

// The signals skiff observes.
const (
	MemoryAvailable   Signal = "memory.available"
	NodeFsAvailable   Signal = "nodefs.available"
	NodeFsInodesFree  Signal = "nodefs.inodesFree"
	ImageFsAvailable  Signal = "imagefs.available"
	ImageFsInodesFree Signal = "imagefs.inodesFree"
	PIDAvailable      Signal = "pid.available"
)

// signals maps each signal to the node condition it raises and the resource it reclaims
// (the name in eviction messages).
var signals = map[Signal]struct {
	condition corev1.NodeConditionType
	resource  corev1.ResourceName
}{
	MemoryAvailable:   {corev1.NodeMemoryPressure, corev1.ResourceMemory},
	NodeFsAvailable:   {corev1.NodeDiskPressure, corev1.ResourceEphemeralStorage},
	NodeFsInodesFree:  {corev1.NodeDiskPressure, ResourceInodes},
	ImageFsAvailable:  {corev1.NodeDiskPressure, corev1.ResourceEphemeralStorage},
	ImageFsInodesFree: {corev1.NodeDiskPressure, ResourceInodes},
	PIDAvailable:      {corev1.NodePIDPressure, ResourcePIDs},
}

// Resources the kubelet's messages name that are not API resources.
const (
	ResourceInodes corev1.ResourceName = "inodes"
	ResourcePIDs   corev1.ResourceName = "pids"
)

// DefaultHard is the kubelet's default --eviction-hard on Linux.
const DefaultHard = "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%,imagefs.inodesFree<5%"

// DefaultTransitionPeriod is how long a pressure condition stays after its last crossing
// (the kubelet's --eviction-pressure-transition-period).
const DefaultTransitionPeriod = 5 * time.Minute

// Threshold is one hard threshold: the signal is below Quantity, or below Percentage of its
// capacity (0 < Percentage ≤ 1) when Quantity is nil.
type Threshold struct {
	Signal     Signal
	Quantity   *resource.Quantity
	Percentage float64
	// GracePeriod is how long a soft threshold must stay crossed before a pod is evicted
	// for it; a hard threshold has none.
	GracePeriod time.Duration
	Soft        bool
	// MinReclaim (or MinReclaimPercentage of the capacity, when nil) is how far past the
	// threshold the signal must recover, once crossed, before the threshold is cleared (the
	// kubelet's --eviction-minimum-reclaim): the node is not pushed back to the edge and
	// under again at once.
	MinReclaim           *resource.Quantity
	MinReclaimPercentage float64
}

func (t Threshold) String() string {
	if t.Quantity != nil {
		return string(t.Signal) + "<" + t.Quantity.String()
	}
	return string(t.Signal) + "<" + strconv.FormatFloat(t.Percentage*100, 'f', -1, 64) + "%"
}

// Min is the least the signal may be for a capacity before the threshold is crossed.
func (t Threshold) Min(capacity int64) int64 {
	if t.Quantity != nil {
		return t.Quantity.Value()
	}
	return int64(math.Ceil(float64(capacity) * t.Percentage))
}

// Target is what the signal must reach, once the threshold is crossed, for it to be cleared:
// Min plus the minimum reclaim.
func (t Threshold) Target(capacity int64) int64 {
	reclaim := int64(math.Ceil(float64(capacity) * t.MinReclaimPercentage))
	if t.MinReclaim != nil {
		reclaim = t.MinReclaim.Value()
	}
	if m := t.Min(capacity); m <= math.MaxInt64-reclaim {
		return m + reclaim
	}
	return math.MaxInt64 // an absurd reclaim: never cleared, rather than wrapped around
}

// minQuantity is Min as a quantity, as eviction messages print it.
func (t Threshold) minQuantity(capacity int64) *resource.Quantity {
	if t.Quantity != nil {
		return t.Quantity
	}
	return resource.NewQuantity(t.Min(capacity), resource.BinarySI)
}

// ParseHard parses --eviction-hard: comma-separated "SIGNAL<QUANTITY" or "SIGNAL<N%"
// statements, as the kubelet's flag. A statement of 0 or 0% turns its signal off; an empty
// string means no thresholds.
func ParseHard(s string) ([]Threshold, error) {
	var out []Threshold
	seen := map[Signal]bool{}
	for _, stmt := range strings.Split(s, ",") {
		stmt = strings.TrimSpace(stmt)
		if stmt == "" {
			continue
		}
		name, value, ok := strings.Cut(stmt, "<")
		if !ok {
			return nil, fmt.Errorf("eviction threshold %q: want SIGNAL<QUANTITY or SIGNAL<PERCENT%% (only < is supported)", stmt)
		}
		sig := Signal(strings.TrimSpace(name))
		if _, known := signals[sig]; !known {
			return nil, fmt.Errorf("eviction threshold %q: unknown signal %q (known: %s)", stmt, sig, knownSignals())
		}
		if seen[sig] {
			return nil, fmt.Errorf("eviction threshold %q: signal %q given twice", stmt, sig)
		}
		seen[sig] = true
		q, pct, err := parseAmount(strings.TrimSpace(value))
		if err != nil {
			return nil, fmt.Errorf("eviction threshold %q: %w", stmt, err)
		}
		switch {
		case q != nil && !q.IsZero():
			out = append(out, Threshold{Signal: sig, Quantity: q})
		case q == nil && pct > 0:
			out = append(out, Threshold{Signal: sig, Percentage: pct})
		}
	}
	return out, nil
}

// parseAmount reads a threshold's or a reclaim's amount: a non-negative quantity ("100Mi"),
// or a percentage of capacity ("10%", returned as 0.1 with a nil quantity).
func parseAmount(value string) (*resource.Quantity, float64, error) {
	if p, isPercent := strings.CutSuffix(value, "%"); isPercent {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f < 0 || f > 100 || math.IsNaN(f) {
			return nil, 0, fmt.Errorf("%q is not a percentage between 0%% and 100%%", value)
		}
		return nil, f / 100, nil
	}
	q, err := resource.ParseQuantity(value)
	if err != nil {
		return nil, 0, fmt.Errorf("%q is not a quantity (e.g. 100Mi) or a percentage", value)
	}
	if q.Sign() < 0 {
		return nil, 0, errors.New("must not be negative")
	}
	return &q, 0, nil
}

// ParseSoft parses --eviction-soft (statements as --eviction-hard's) with
// --eviction-soft-grace-period ("SIGNAL=DURATION", comma-separated): every soft threshold
// needs its grace period, and a grace period needs its threshold.
func ParseSoft(thresholds, gracePeriods string) ([]Threshold, error) {
	ths, err := ParseHard(thresholds)
	if err != nil {
		return nil, err
	}
	grace := map[Signal]time.Duration{}
	for _, stmt := range strings.Split(gracePeriods, ",") {
		stmt = strings.TrimSpace(stmt)
		if stmt == "" {
			continue
		}
		name, value, ok := strings.Cut(stmt, "=")
		sig := Signal(strings.TrimSpace(name))
		if !ok {
			return nil, fmt.Errorf("eviction soft grace period %q: want SIGNAL=DURATION", stmt)
		}
		if _, known := signals[sig]; !known {
			return nil, fmt.Errorf("eviction soft grace period %q: unknown signal %q (known: %s)", stmt, sig, knownSignals())
		}
		d, err := time.ParseDuration(strings.TrimSpace(value))
		if err != nil || d < 0 {
			return nil, fmt.Errorf("eviction soft grace period %q: %q is not a duration such as 1m30s", stmt, value)
		}
		grace[sig] = d
	}
	for i := range ths {
		d, ok := grace[ths[i].Signal]
		if !ok {
			return nil, fmt.Errorf("soft eviction threshold %s has no grace period (--eviction-soft-grace-period %s=DURATION)", ths[i], ths[i].Signal)
		}
		ths[i].Soft, ths[i].GracePeriod = true, d
		delete(grace, ths[i].Signal)
	}
	if len(grace) > 0 {
		var extra []string
		for sig := range grace {
			extra = append(extra, string(sig))
		}
		sort.Strings(extra)
		return nil, fmt.Errorf("eviction soft grace period for %s has no soft threshold", strings.Join(extra, ", "))
	}
	return ths, nil
}

// ParseMinReclaim parses --eviction-minimum-reclaim ("SIGNAL=QUANTITY" or "SIGNAL=N%",
// comma-separated, e.g. "memory.available=0Mi,nodefs.available=500Mi,imagefs.available=2Gi")
// and returns the thresholds with each signal's minimum reclaim set, hard and soft alike.
// A signal with no threshold is an error, as is a signal given twice.
func ParseMinReclaim(s string, thresholds []Threshold) ([]Threshold, error) {
	out := append([]Threshold(nil), thresholds...)
	seen := map[Signal]bool{}
	for _, stmt := range strings.Split(s, ",") {
		stmt = strings.TrimSpace(stmt)
		if stmt == "" {
			continue
		}
		name, value, ok := strings.Cut(stmt, "=")
		sig := Signal(strings.TrimSpace(name))
		value = strings.TrimSpace(value)
		if !ok || value == "" {
			return nil, fmt.Errorf("eviction minimum reclaim %q: want SIGNAL=QUANTITY or SIGNAL=PERCENT%%", stmt)
		}
		if _, known := signals[sig]; !known {
			return nil, fmt.Errorf("eviction minimum reclaim %q: unknown signal %q (known: %s)", stmt, sig, knownSignals())
		}
		if seen[sig] {
			return nil, fmt.Errorf("eviction minimum reclaim %q: signal %q given twice", stmt, sig)
		}
		seen[sig] = true
		q, pct, err := parseAmount(value)
		if err != nil {
			return nil, fmt.Errorf("eviction minimum reclaim %q: %w", stmt, err)
		}
		found := false
		for i := range out {
			if out[i].Signal == sig {
				out[i].MinReclaim, out[i].MinReclaimPercentage = q, pct
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("eviction minimum reclaim %q: %s has no eviction threshold", stmt, sig)
		}
	}
	return out, nil
}

func knownSignals() string {
	var names []string
	for s := range signals {
		names = append(names, string(s))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// Observation is a signal's value now and its capacity.
type Observation struct{ Available, Capacity int64 }

// Observations are the node's signals; a signal that could not be read is absent.
type Observations map[Signal]Observation

// Met returns the thresholds the observations cross, in the order given.
func Met(thresholds []Threshold, obs Observations) []Threshold {
	return below(thresholds, obs, Threshold.Min)
}

// Unresolved returns the thresholds of prev (what was met at the last look) that the
// observations have not yet cleared by their minimum reclaim: they stay met, as the kubelet
// keeps a threshold until the signal is back past it by --eviction-minimum-reclaim.
func Unresolved(prev []Threshold, obs Observations) []Threshold {
	return below(prev, obs, Threshold.Target)
}

// below returns the thresholds whose signal is observed below level(capacity).
func below(thresholds []Threshold, obs Observations, level func(Threshold, int64) int64) []Threshold {
	var out []Threshold
	for _, t := range thresholds {
		o, ok := obs[t.Signal]
		if ok && o.Available < level(t, o.Capacity) {
			out = append(out, t)
		}
	}
	return out
}

// Merge is the union of two lists of thresholds (a threshold in both once), a's first.
func Merge(a, b []Threshold) []Threshold {
	out := append([]Threshold(nil), a...)
	for _, t := range b {
		dup := false
		for _, u := range a {
			dup = dup || (u.Signal == t.Signal && u.Soft == t.Soft)
		}
		if !dup {
			out = append(out, t)
		}
	}
	return out
}

// Conditions are the node's pressure conditions: true when under pressure.
type Conditions map[corev1.NodeConditionType]bool

// Pressures lists the conditions under pressure in a stable order (as the kubelet's
// messages print them).
func (c Conditions) Pressures() []corev1.NodeConditionType {
	var out []corev1.NodeConditionType
	for _, t := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		if c[t] {
			out = append(out, t)
		}
	}
	return out
}

// Tracker holds pressure conditions for a transition period after the thresholds that
// raised them were last crossed, so a node hovering at a threshold does not flap.
type Tracker struct {
	Period   time.Duration
	lastSeen map[corev1.NodeConditionType]time.Time
	// since is when each threshold began to be crossed without a break.
	since map[string]time.Time
}

// Due returns the met thresholds to act on now: hard ones at once, soft ones once crossed
// without a break for their grace period. met must be what Met returned at now.
func (t *Tracker) Due(now time.Time, met []Threshold) []Threshold {
	if t.since == nil {
		t.since = map[string]time.Time{}
	}
	key := func(th Threshold) string { return fmt.Sprintf("%s/%v", th, th.Soft) }
	still := map[string]bool{}
	var out []Threshold
	for _, th := range met {
		k := key(th)
		still[k] = true
		first, ok := t.since[k]
		if !ok {
			first = now
			t.since[k] = now
		}
		if !th.Soft || now.Sub(first) >= th.GracePeriod {
			out = append(out, th)
		}
	}
	for k := range t.since {
		if !still[k] {
			delete(t.since, k)
		}
	}
	return out
}

// Observe records the thresholds met at now and returns the conditions.
func (t *Tracker) Observe(now time.Time, met []Threshold) Conditions {
	if t.lastSeen == nil {
		t.lastSeen = map[corev1.NodeConditionType]time.Time{}
	}
	for _, th := range met {
		t.lastSeen[signals[th.Signal].condition] = now
	}
	out := Conditions{corev1.NodeMemoryPressure: false, corev1.NodeDiskPressure: false, corev1.NodePIDPressure: false}
	for cond, at := range t.lastSeen {
		if now.Sub(at) < t.Period || at.Equal(now) {
			out[cond] = true
		}
	}
	return out
}

// Rejection is why a node under pressure refuses a pod (the kubelet's reason and message).
type Rejection struct{ Reason, Message string }

// Admit says whether a node with these pressure conditions runs a new pod: critical pods
// always; under memory pressure alone every pod but a BestEffort one that does not tolerate
// the memory-pressure taint; under disk or PID pressure none.
func Admit(pod *corev1.Pod, c Conditions) *Rejection {
	under := c.Pressures()
	if len(under) == 0 || IsCritical(pod) {
		return nil
	}
	if len(under) == 1 && under[0] == corev1.NodeMemoryPressure {
		if podqos.Of(pod) != corev1.PodQOSBestEffort {
			return nil
		}
		taint := corev1.Taint{Key: corev1.TaintNodeMemoryPressure, Effect: corev1.TaintEffectNoSchedule}
		for _, tol := range pod.Spec.Tolerations {
			if tol.ToleratesTaint(klog.Background(), &taint, false) {
				return nil
			}
		}
	}
	return &Rejection{Reason: Reason, Message: fmt.Sprintf("The node had condition: %v. ", under)}
}

// GracePeriod is how many seconds an evicted pod gets to stop, as the kubelet gives it: 1
// for a hard threshold or a local storage limit (its immediate eviction); for a soft
// threshold --eviction-max-pod-grace-period (maxPodGrace), or the pod's own
// terminationGracePeriodSeconds when that is shorter.
func GracePeriod(t *Threshold, pod *corev1.Pod, maxPodGrace int64) int64 {
	if t == nil || !t.Soft {
		return 1
	}
	grace := maxPodGrace
	if pod.Spec.TerminationGracePeriodSeconds != nil && *pod.Spec.TerminationGracePeriodSeconds < grace {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	return grace
}

// Reason is the pod status reason of an evicted or pressure-rejected pod.
const Reason = "Evicted"

// systemCritical is the priority of system-cluster-critical (2 × the highest user one).
const systemCritical = 2000000000

// IsCritical says whether the kubelet would never evict or refuse the pod: a static pod, a
// static pod's mirror, or one of system-critical priority.
func IsCritical(p *corev1.Pod) bool {
	if p.Annotations[corev1.MirrorPodAnnotationKey] != "" || p.Annotations["kubernetes.io/config.source"] == "file" {
		return true
	}
	return p.Spec.Priority != nil && *p.Spec.Priority >= systemCritical
}

// PodUsage is what a pod uses of the resources eviction ranks by; Containers is each
// container's share of Memory and Disk, for the message.
type PodUsage struct {
	Pod       *corev1.Pod
	Memory    int64 // working set bytes
	Disk      int64 // writable layers, logs and disk-backed emptyDirs, bytes
	Inodes    int64
	Processes int64
	// ContainerMemory and ContainerDisk are each container's share, by name (disk: its
	// writable layer and logs); EmptyDirs each disk-backed emptyDir volume's use.
	ContainerMemory, ContainerDisk, EmptyDirs map[string]int64
}

// LocalStorageExceeded says whether a pod uses more local ephemeral storage than its spec
// allows — checked whatever the node's thresholds, as the kubelet's local storage isolation —
// and the kubelet's message: an emptyDir beyond its sizeLimit first, then the pod beyond the
// sum of its containers' ephemeral-storage limits (its emptyDirs counted), then a container
// beyond its own (its writable layer and logs).
func LocalStorageExceeded(u PodUsage) (string, bool) {
	p := u.Pod
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Sign() <= 0 || v.EmptyDir.Medium == corev1.StorageMediumMemory {
			continue
		}
		if used, ok := u.EmptyDirs[v.Name]; ok && used > v.EmptyDir.SizeLimit.Value() {
			return fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q. ", v.Name, v.EmptyDir.SizeLimit.String()), true
		}
	}
	limits := resourcehelper.PodLimits(p, resourcehelper.PodResourcesOptions{})
	if limit, ok := limits[corev1.ResourceEphemeralStorage]; ok && limit.Sign() > 0 {
		total := int64(0)
		for _, used := range u.ContainerDisk {
			total += used
		}
		for _, used := range u.EmptyDirs {
			total += used
		}
		if total > limit.Value() {
			return fmt.Sprintf("Pod ephemeral local storage usage exceeds the total limit of containers %s. ", limit.String()), true
		}
	}
	for _, c := range p.Spec.Containers {
		limit, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]
		if !ok || limit.Sign() <= 0 {
			continue
		}
		if used, ok := u.ContainerDisk[c.Name]; ok && used > limit.Value() {
			return fmt.Sprintf("Container %s exceeded its local ephemeral storage limit %q. ", c.Name, limit.String()), true
		}
	}
	return "", false
}

// HasLocalStorageLimits says whether any of the pods limits its local ephemeral storage (an
// emptyDir sizeLimit or a container's ephemeral-storage limit): only then must their use be
// measured at every look.
func HasLocalStorageLimits(pods []*corev1.Pod) bool {
	for _, p := range pods {
		for _, v := range p.Spec.Volumes {
			if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil && v.EmptyDir.Medium != corev1.StorageMediumMemory {
				return true
			}
		}
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			if _, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
				return true
			}
		}
	}
	return false
}

// Victim picks the pod to evict for a crossed threshold, as the kubelet ranks them: for
// memory and disk, pods using more than they request first, then lower priority, then the
// most used beyond the request; for inodes the same with no request to compare; for PIDs
// lower priority, then the most processes. Critical pods are never picked. ok is false when
// nothing can be evicted.
func Victim(t Threshold, pods []PodUsage) (PodUsage, bool) {
	res := signals[t.Signal].resource
	var cand []PodUsage
	for _, p := range pods {
		if !IsCritical(p.Pod) {
			cand = append(cand, p)
		}
	}
	if len(cand) == 0 {
		return PodUsage{}, false
	}
	usage := func(p PodUsage) int64 {
		switch res {
		case corev1.ResourceMemory:
			return p.Memory
		case corev1.ResourceEphemeralStorage:
			return p.Disk
		case ResourceInodes:
			return p.Inodes
		}
		return p.Processes
	}
	request := func(p PodUsage) int64 {
		if res != corev1.ResourceMemory && res != corev1.ResourceEphemeralStorage {
			return 0
		}
		q := resourcehelper.PodRequests(p.Pod, resourcehelper.PodResourcesOptions{})[res]
		return q.Value()
	}
	sort.SliceStable(cand, func(i, j int) bool {
		a, b := cand[i], cand[j]
		if res != ResourcePIDs {
			ea, eb := usage(a) > request(a), usage(b) > request(b)
			if ea != eb {
				return ea
			}
		}
		if pa, pb := priority(a.Pod), priority(b.Pod); pa != pb {
			return pa < pb
		}
		if res == ResourcePIDs {
			return usage(a) > usage(b)
		}
		return usage(a)-request(a) > usage(b)-request(b)
	})
	return cand[0], true
}

func priority(p *corev1.Pod) int32 {
	if p.Spec.Priority == nil {
		return 0
	}
	return *p.Spec.Priority
}

// Message is the evicted pod's status message, as the kubelet words it: the resource, the
// threshold and what was available, and each container using more than it requests.
func Message(t Threshold, obs Observations, p PodUsage) string {
	res := signals[t.Signal].resource
	msg := fmt.Sprintf("The node was low on resource: %v. ", res)
	if o, ok := obs[t.Signal]; ok {
		msg += fmt.Sprintf("Threshold quantity: %v, available: %v. ", t.minQuantity(o.Capacity), available(res, o.Available))
	}
	var per map[string]int64
	switch res {
	case corev1.ResourceMemory:
		per = p.ContainerMemory
	case corev1.ResourceEphemeralStorage:
		per = p.ContainerDisk
	}
	if per == nil {
		return msg
	}
	for _, c := range p.Pod.Spec.Containers {
		used, ok := per[c.Name]
		if !ok {
			continue
		}
		req := c.Resources.Requests[res]
		if used > req.Value() {
			msg += fmt.Sprintf("Container %s was using %s, request is %s, has larger consumption of %v. ",
				c.Name, resource.NewQuantity(used, resource.BinarySI), req.String(), res)
		}
	}
	return msg
}

// available formats an observed value: bytes as binary quantities (the kubelet prints
// "available: 1234Ki"), counts as numbers.
func available(res corev1.ResourceName, v int64) *resource.Quantity {
	if res == ResourceInodes || res == ResourcePIDs {
		return resource.NewQuantity(v, resource.DecimalSI)
	}
	return resource.NewQuantity(v, resource.BinarySI)
}
