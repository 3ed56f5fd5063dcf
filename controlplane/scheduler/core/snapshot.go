package core

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Snapshot is the cluster as the scheduler sees it for one decision. The scheduler loop keeps
// one Snapshot current with SetNode/RemoveNode/AddPod/RemovePod and calls Schedule against it;
// nothing is copied per decision.
//
// A Snapshot is not safe for concurrent use: Schedule reuses scratch space inside it and may
// rebuild the node order lazily. The scheduler makes one decision at a time, so it need not be.
type Snapshot struct {
	// infos holds every NodeInfo by node name, including placeholders (Node == nil) for pods
	// whose node is unknown or already deleted, so their accounting survives the node's
	// (re)appearance as upstream's cache does.
	infos    map[string]*NodeInfo
	numNodes int

	// order lists the real nodes interleaved across zones (zone A's first node, zone B's first,
	// ..., zone A's second, ...) like upstream's node tree, so the partial search of a large
	// cluster samples every zone. zones keeps zone keys in first-seen order.
	order       []*NodeInfo
	orderDirty  bool
	zones       []string
	zoneMembers map[string][]*NodeInfo

	// images counts, per image name, the nodes that have it; image locality discounts images
	// present on few nodes so pods do not pile onto the one node that happens to have them.
	images map[string]*imageState
	// zoneOwners counts non-terminating pods per (zone, controller owner) over all nodes, which
	// the zone half of default spreading needs without walking every node per decision.
	zoneOwners map[zoneOwner]int32
	// nominatedOn maps the key of every nominated pod to the node it is nominated to.
	nominatedOn map[string]string

	scratch scratch
}

type imageState struct {
	size  int64 // as first reported, which is what upstream's cache keeps
	nodes int
}

type zoneOwner struct {
	zone  string
	owner types.UID
}

// NewSnapshot builds a snapshot of nodes with pods assigned: pods with spec.nodeName are added
// to their node, terminal pods (Succeeded/Failed) are ignored because they hold nothing.
func NewSnapshot(nodes []*corev1.Node, pods []*corev1.Pod) *Snapshot {
	s := &Snapshot{}
	s.init(len(nodes))
	for _, n := range nodes {
		s.SetNode(n)
	}
	for _, p := range pods {
		s.AddPod(p)
	}
	s.ensureOrder()
	return s
}

// init makes the zero Snapshot usable too.
func (s *Snapshot) init(sizeHint int) {
	if s.infos != nil {
		return
	}
	s.infos = make(map[string]*NodeInfo, sizeHint)
	s.zoneMembers = make(map[string][]*NodeInfo)
	s.images = make(map[string]*imageState)
	s.zoneOwners = make(map[zoneOwner]int32)
	s.nominatedOn = make(map[string]string)
}

func isTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// Node returns the named node's NodeInfo, or nil if the node is not in the snapshot.
func (s *Snapshot) Node(name string) *NodeInfo {
	if n := s.infos[name]; n != nil && n.Node != nil {
		return n
	}
	return nil
}

// Nodes returns the nodes in the snapshot's stable search order. The slice is shared with the
// snapshot to keep the hot path allocation-free: do not modify it, and do not keep it across
// SetNode/RemoveNode.
func (s *Snapshot) Nodes() []*NodeInfo {
	s.ensureOrder()
	return s.order
}

// NumNodes is len(Nodes()) without rebuilding the order.
func (s *Snapshot) NumNodes() int { return s.numNodes }

// SetNode adds node or updates it in place, keeping the pods already assigned to it.
func (s *Snapshot) SetNode(node *corev1.Node) {
	if node == nil {
		return
	}
	s.init(0)
	n := s.infos[node.Name]
	if n == nil {
		n = &NodeInfo{snap: s}
		s.infos[node.Name] = n
	}
	wasNode := n.Node != nil
	oldZone, oldZoneKey := n.zone, n.zoneKey
	if wasNode {
		s.dropImages(n)
	}
	n.setNode(node)
	s.addImages(n)
	if !wasNode || oldZone != n.zone {
		if wasNode {
			s.moveZoneOwners(n, oldZone, -1)
		}
		s.moveZoneOwners(n, n.zone, 1)
	}
	switch {
	case !wasNode:
		s.numNodes++
		s.joinZone(n)
	case oldZoneKey != n.zoneKey:
		s.leaveZone(n, oldZoneKey)
		s.joinZone(n)
	}
}

// RemoveNode takes the node out of consideration. Pods still assigned to it are kept on a
// placeholder until they are removed, so a node that comes back keeps its accounting.
func (s *Snapshot) RemoveNode(name string) {
	n := s.infos[name]
	if n == nil || n.Node == nil {
		return
	}
	s.dropImages(n)
	s.moveZoneOwners(n, n.zone, -1)
	s.leaveZone(n, n.zoneKey)
	s.numNodes--
	n.setNode(nil)
	if n.empty() {
		delete(s.infos, name)
	}
}

// AddPod assigns p to p.Spec.NodeName. Unbound pods are ignored; a pod that turned terminal is
// removed instead, since it no longer holds anything. A pod bound to a node the snapshot does
// not know yet is kept until the node appears.
func (s *Snapshot) AddPod(p *corev1.Pod) {
	if p == nil || p.Spec.NodeName == "" {
		return
	}
	if isTerminal(p) {
		s.RemovePod(p)
		return
	}
	s.init(0)
	n := s.infos[p.Spec.NodeName]
	if n == nil {
		n = &NodeInfo{snap: s, name: p.Spec.NodeName}
		s.infos[p.Spec.NodeName] = n
	}
	n.AddPod(p)
}

// RemovePod takes p off its node.
func (s *Snapshot) RemovePod(p *corev1.Pod) {
	if p == nil || p.Spec.NodeName == "" {
		return
	}
	n := s.infos[p.Spec.NodeName]
	if n == nil {
		return
	}
	n.RemovePod(p)
	if n.empty() {
		delete(s.infos, p.Spec.NodeName)
	}
}

// AddNominatedPod records that p, not bound yet, waits for room on p.Status.NominatedNodeName
// (upstream's nominator): decisions for pods of lower priority then count p as if it were
// on that node. Calling it again updates p; a bound, terminal or terminating pod, or one with
// no nominated node, is removed instead.
func (s *Snapshot) AddNominatedPod(p *corev1.Pod) {
	if p == nil {
		return
	}
	if p.Status.NominatedNodeName == "" || p.Spec.NodeName != "" || p.DeletionTimestamp != nil || isTerminal(p) {
		s.RemoveNominatedPod(p)
		return
	}
	s.init(0)
	key := podKey(p)
	if old, ok := s.nominatedOn[key]; ok && old != p.Status.NominatedNodeName {
		s.RemoveNominatedPod(p)
	}
	n := s.infos[p.Status.NominatedNodeName]
	if n == nil {
		n = &NodeInfo{snap: s, name: p.Status.NominatedNodeName}
		s.infos[p.Status.NominatedNodeName] = n
	}
	n.addNominated(p, key)
	s.nominatedOn[key] = p.Status.NominatedNodeName
}

// RemoveNominatedPod forgets p's nomination, wherever it was.
func (s *Snapshot) RemoveNominatedPod(p *corev1.Pod) {
	if p == nil {
		return
	}
	key := podKey(p)
	name, ok := s.nominatedOn[key]
	if !ok {
		return
	}
	delete(s.nominatedOn, key)
	if n := s.infos[name]; n != nil {
		n.removeNominated(key)
		if n.empty() {
			delete(s.infos, name)
		}
	}
}

func (s *Snapshot) addImages(n *NodeInfo) {
	for name, size := range n.images {
		st := s.images[name]
		if st == nil {
			st = &imageState{size: size}
			s.images[name] = st
		}
		st.nodes++
	}
}

func (s *Snapshot) dropImages(n *NodeInfo) {
	for name := range n.images {
		if st := s.images[name]; st != nil {
			if st.nodes--; st.nodes <= 0 {
				delete(s.images, name)
			}
		}
	}
}

func (s *Snapshot) addZoneOwner(zone string, owner types.UID, delta int32) {
	k := zoneOwner{zone, owner}
	if c := s.zoneOwners[k] + delta; c <= 0 {
		delete(s.zoneOwners, k)
	} else {
		s.zoneOwners[k] = c
	}
}

// moveZoneOwners adds (sign 1) or removes (sign -1) all of n's owner counts in zone.
func (s *Snapshot) moveZoneOwners(n *NodeInfo, zone string, sign int32) {
	if zone == "" {
		return
	}
	for owner, c := range n.owners {
		s.addZoneOwner(zone, owner, sign*c)
	}
}

func (s *Snapshot) joinZone(n *NodeInfo) {
	members, ok := s.zoneMembers[n.zoneKey]
	if !ok {
		s.zones = append(s.zones, n.zoneKey)
	}
	s.zoneMembers[n.zoneKey] = append(members, n)
	s.orderDirty = true
}

func (s *Snapshot) leaveZone(n *NodeInfo, zoneKey string) {
	members := s.zoneMembers[zoneKey]
	for i, m := range members {
		if m == n {
			members = append(members[:i], members[i+1:]...)
			break
		}
	}
	if len(members) == 0 {
		delete(s.zoneMembers, zoneKey)
		for i, z := range s.zones {
			if z == zoneKey {
				s.zones = append(s.zones[:i], s.zones[i+1:]...)
				break
			}
		}
	} else {
		s.zoneMembers[zoneKey] = members
	}
	s.orderDirty = true
}

func (s *Snapshot) ensureOrder() {
	if !s.orderDirty {
		return
	}
	s.orderDirty = false
	s.order = s.order[:0]
	longest := 0
	for _, z := range s.zones {
		longest = max(longest, len(s.zoneMembers[z]))
	}
	for i := 0; i < longest; i++ {
		for _, z := range s.zones {
			if m := s.zoneMembers[z]; i < len(m) {
				m[i].pos = len(s.order)
				s.order = append(s.order, m[i])
			}
		}
	}
}
