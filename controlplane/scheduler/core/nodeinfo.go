package core

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// NodeInfo is one node with what is already assigned to it. Every aggregate the filters and
// scorers read is maintained incrementally by AddPod/RemovePod, so a scheduling decision never
// walks a node's pods.
type NodeInfo struct {
	Node *corev1.Node
	// Allocatable comes from node.Status.Allocatable; Pods defaults to 110 when the node does
	// not publish it.
	Allocatable Resources
	// Requested is the sum of the assigned pods' requests; Pods is the number of assigned pods.
	Requested Resources

	// Copies of hot node fields, so that the filter loop does not chase into the Node object.
	name          string
	unschedulable bool
	// hardTaints are the NoSchedule/NoExecute taints (the filter's concern), softTaints the
	// PreferNoSchedule ones (the scorer's), each in the node's order.
	hardTaints []corev1.Taint
	softTaints []corev1.Taint
	// zone is the topology.kubernetes.io/zone label value that spreading balances over;
	// zoneKey is region+zone, which orders the snapshot's node list like upstream's node tree.
	zone    string
	zoneKey string
	images  map[string]int64 // image name -> size, from node.Status.Images

	allocScalar map[corev1.ResourceName]int64
	reqScalar   map[corev1.ResourceName]int64
	// non0CPU/non0Mem are the requests with upstream's scoring defaults filled in, for the
	// least-allocated scorer.
	non0CPU int64
	non0Mem int64

	pods  []*podEntry
	index map[string]int // pod key -> position in pods
	// nominated are pods that preempted others to get onto this node and wait, unbound, for
	// their victims to go. They hold nothing in the aggregates above; the filters add the ones
	// at least as important as the pod being decided (see podQuery.addNominated), so that the
	// room freed for them is not taken by a less important pod.
	nominated []*podEntry

	// owners counts non-terminating pods per controller owner UID, the spreading scorer's
	// per-node input.
	owners map[types.UID]int32
	// Host ports in use, reference-counted: by exact (hostIP, protocol, port) and by
	// (protocol, port) over every hostIP, because a wildcard hostIP conflicts with any address.
	portsByIP  map[hostPortKey]int32
	portsByAny map[protoPort]int32

	snap *Snapshot // owning snapshot, for its per-zone aggregates; nil when standalone
	pos  int       // position in snap's node order
}

type protoPort struct {
	protocol corev1.Protocol
	port     int32
}

type hostPortKey struct {
	ip string
	protoPort
}

const bindAllHostIP = "0.0.0.0"

// podEntry is an assigned pod with everything it contributes, computed once on add so that
// removal subtracts exactly what was added even if the caller's object changed since.
type podEntry struct {
	pod      *corev1.Pod
	key      string
	priority int32
	demand   podDemand
	owner    types.UID // counted owner for spreading; empty when none or the pod is terminating
	ports    []hostPortKey
}

// NewNodeInfo returns node with nothing assigned to it yet.
func NewNodeInfo(node *corev1.Node) *NodeInfo {
	n := &NodeInfo{}
	n.setNode(node)
	return n
}

// setNode refreshes everything derived from the Node object, leaving the pods alone.
func (n *NodeInfo) setNode(node *corev1.Node) {
	n.Node = node
	n.hardTaints, n.softTaints = nil, nil
	n.images = nil
	n.zone, n.zoneKey = "", ""
	if node == nil {
		n.Allocatable, n.allocScalar = Resources{}, nil
		n.unschedulable = false
		return
	}
	n.name = node.Name
	n.unschedulable = node.Spec.Unschedulable
	n.Allocatable, n.allocScalar = parseAllocatable(node.Status.Allocatable)
	for _, t := range node.Spec.Taints {
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute:
			n.hardTaints = append(n.hardTaints, t)
		case corev1.TaintEffectPreferNoSchedule:
			n.softTaints = append(n.softTaints, t)
		}
	}
	if len(node.Status.Images) > 0 {
		n.images = make(map[string]int64)
		for _, img := range node.Status.Images {
			for _, name := range img.Names {
				if _, dup := n.images[name]; !dup {
					n.images[name] = img.SizeBytes
				}
			}
		}
	}
	n.zone = node.Labels[corev1.LabelTopologyZone]
	n.zoneKey = zoneKeyOf(node)
}

// zoneKeyOf mirrors upstream's GetZoneKey: region and zone, preferring the deprecated beta
// labels when present because old nodes may carry only those.
func zoneKeyOf(node *corev1.Node) string {
	l := node.Labels
	if l == nil {
		return ""
	}
	zone, ok := l[corev1.LabelFailureDomainBetaZone]
	if !ok {
		zone = l[corev1.LabelTopologyZone]
	}
	region, ok := l[corev1.LabelFailureDomainBetaRegion]
	if !ok {
		region = l[corev1.LabelTopologyRegion]
	}
	if region == "" && zone == "" {
		return ""
	}
	return region + ":\x00:" + zone
}

// podKey identifies a pod across updates: its UID, or namespace/name for objects that never
// went through the API server (tests, static manifests).
func podKey(p *corev1.Pod) string {
	if p.UID != "" {
		return string(p.UID)
	}
	return p.Namespace + "/" + p.Name
}

// controllerOwner is the UID of the pod's managing controller, the grouping spreading uses.
func controllerOwner(p *corev1.Pod) types.UID {
	for i := range p.OwnerReferences {
		ref := &p.OwnerReferences[i]
		if ref.Controller != nil && *ref.Controller {
			return ref.UID
		}
	}
	return ""
}

// hostPorts lists the pod's host ports with upstream's defaults applied (empty hostIP binds
// all addresses, empty protocol is TCP). Regular containers and sidecar init containers hold
// their ports for the pod's lifetime; classic init containers do not count.
func hostPorts(p *corev1.Pod) []hostPortKey {
	var out []hostPortKey
	add := func(c *corev1.Container) {
		for i := range c.Ports {
			cp := &c.Ports[i]
			if cp.HostPort <= 0 {
				continue
			}
			k := hostPortKey{ip: cp.HostIP, protoPort: protoPort{protocol: cp.Protocol, port: cp.HostPort}}
			if k.ip == "" {
				k.ip = bindAllHostIP
			}
			if k.protocol == "" {
				k.protocol = corev1.ProtocolTCP
			}
			out = append(out, k)
		}
	}
	for i := range p.Spec.InitContainers {
		if isRestartable(&p.Spec.InitContainers[i]) {
			add(&p.Spec.InitContainers[i])
		}
	}
	for i := range p.Spec.Containers {
		add(&p.Spec.Containers[i])
	}
	return out
}

func newPodEntry(p *corev1.Pod, key string) *podEntry {
	e := &podEntry{pod: p, key: key, priority: corev1helpers.PodPriority(p), demand: demandOf(p), ports: hostPorts(p)}
	// Terminating pods are on their way out; upstream leaves them out of spreading counts
	// (kubernetes#87621) while they still hold resources.
	if p.DeletionTimestamp == nil {
		e.owner = controllerOwner(p)
	}
	return e
}

// AddPod assigns p to the node. It is idempotent by pod UID (or namespace/name): adding a pod
// that is already there replaces the old version, so updates can be fed through AddPod.
func (n *NodeInfo) AddPod(p *corev1.Pod) {
	if p == nil {
		return
	}
	key := podKey(p)
	if i, ok := n.index[key]; ok {
		n.removeAt(i)
	}
	e := newPodEntry(p, key)
	if n.index == nil {
		n.index = make(map[string]int)
	}
	n.index[key] = len(n.pods)
	n.pods = append(n.pods, e)
	n.account(e, 1)
}

// RemovePod takes p off the node; removing a pod that is not there is a no-op.
func (n *NodeInfo) RemovePod(p *corev1.Pod) {
	if p == nil {
		return
	}
	if i, ok := n.index[podKey(p)]; ok {
		n.removeAt(i)
	}
}

// addNominated records p as nominated to the node, replacing an older version of it.
func (n *NodeInfo) addNominated(p *corev1.Pod, key string) {
	n.removeNominated(key)
	e := newPodEntry(p, key)
	e.owner = "" // a nominated pod is not on the node yet: it must not count for spreading
	n.nominated = append(n.nominated, e)
}

func (n *NodeInfo) removeNominated(key string) {
	for i, e := range n.nominated {
		if e.key == key {
			last := len(n.nominated) - 1
			n.nominated[i] = n.nominated[last]
			n.nominated[last] = nil
			n.nominated = n.nominated[:last]
			return
		}
	}
}

// NominatedPods returns the pods nominated to the node (a fresh slice; order is not meaningful).
func (n *NodeInfo) NominatedPods() []*corev1.Pod {
	out := make([]*corev1.Pod, len(n.nominated))
	for i, e := range n.nominated {
		out[i] = e.pod
	}
	return out
}

// empty says whether a placeholder can be forgotten.
func (n *NodeInfo) empty() bool { return n.Node == nil && len(n.pods) == 0 && len(n.nominated) == 0 }

func (n *NodeInfo) removeAt(i int) {
	e := n.pods[i]
	last := len(n.pods) - 1
	if i != last {
		n.pods[i] = n.pods[last]
		n.index[n.pods[i].key] = i
	}
	n.pods[last] = nil
	n.pods = n.pods[:last]
	delete(n.index, e.key)
	n.account(e, -1)
}

// Pods returns the assigned pods (a fresh slice; order is not meaningful).
func (n *NodeInfo) Pods() []*corev1.Pod {
	out := make([]*corev1.Pod, len(n.pods))
	for i, e := range n.pods {
		out[i] = e.pod
	}
	return out
}

// account adds (sign 1) or subtracts (sign -1) what e contributes to the node's aggregates.
func (n *NodeInfo) account(e *podEntry, sign int64) {
	d := &e.demand
	n.Requested.MilliCPU += sign * d.req.MilliCPU
	n.Requested.Memory += sign * d.req.Memory
	n.Requested.EphemeralStorage += sign * d.req.EphemeralStorage
	n.Requested.Pods += sign
	n.non0CPU += sign * d.non0CPU
	n.non0Mem += sign * d.non0Mem
	for _, s := range d.scalar {
		if n.reqScalar == nil {
			n.reqScalar = make(map[corev1.ResourceName]int64)
		}
		n.reqScalar[s.name] += sign * s.value
		if n.reqScalar[s.name] == 0 {
			delete(n.reqScalar, s.name)
		}
	}
	if e.owner != "" {
		if n.owners == nil {
			n.owners = make(map[types.UID]int32)
		}
		c := n.owners[e.owner] + int32(sign)
		if c <= 0 {
			delete(n.owners, e.owner)
		} else {
			n.owners[e.owner] = c
		}
		if n.snap != nil && n.zone != "" {
			n.snap.addZoneOwner(n.zone, e.owner, int32(sign))
		}
	}
	for _, k := range e.ports {
		if n.portsByIP == nil {
			n.portsByIP = make(map[hostPortKey]int32)
			n.portsByAny = make(map[protoPort]int32)
		}
		if c := n.portsByIP[k] + int32(sign); c <= 0 {
			delete(n.portsByIP, k)
		} else {
			n.portsByIP[k] = c
		}
		if c := n.portsByAny[k.protoPort] + int32(sign); c <= 0 {
			delete(n.portsByAny, k.protoPort)
		} else {
			n.portsByAny[k.protoPort] = c
		}
	}
}

// portConflict reports whether any wanted host port collides with one in use: a wildcard
// hostIP collides with the same protocol/port on any address, a specific address with itself
// and with the wildcard.
func (n *NodeInfo) portConflict(want []hostPortKey) bool {
	if len(n.portsByAny) == 0 {
		return false
	}
	for _, k := range want {
		if k.ip == bindAllHostIP {
			if n.portsByAny[k.protoPort] > 0 {
				return true
			}
			continue
		}
		if n.portsByIP[k] > 0 || n.portsByIP[hostPortKey{ip: bindAllHostIP, protoPort: k.protoPort}] > 0 {
			return true
		}
	}
	return false
}
