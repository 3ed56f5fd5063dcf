package policy

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Identity is a numeric security identity.
type Identity uint32

// Reserved identities.
const (
	// AnyPeer in an entry admits every peer.
	AnyPeer Identity = 0
	// World is a peer that is neither a pod nor in any ipBlock.
	World Identity = 2
	// firstPod and firstCIDR start the two allocated ranges.
	firstPod  Identity = 256
	firstCIDR Identity = 1 << 24
)

// Direction is ingress (traffic to the endpoint) or egress (from it).
type Direction uint8

// Directions.
const (
	Ingress Direction = 1
	Egress  Direction = 2
	// Audit, added to a direction, marks the rules of audit-mode policies: evaluated to
	// report what they would drop, never to admit (the maps key them apart, as the
	// programs' POL_AUDIT).
	Audit Direction = 4
)

func (d Direction) String() string {
	s := "egress"
	if d&Egress == 0 {
		s = "ingress"
	}
	switch {
	case d&Audit != 0:
		s += " (audit)"
	case d&AdminTier != 0:
		s += " (admin)"
	case d&BaselineTier != 0:
		s += " (baseline)"
	}
	return s
}

// ModeAnnotation puts a NetworkPolicy in audit mode ("audit"): it is evaluated and what it
// would drop is reported in flow events and metrics, but it isolates nothing and drops
// nothing. "enforce", or no annotation, enforces it.
const ModeAnnotation = "policy.skiff.sh/mode"

// auditMode reads a policy's mode; a value other than audit or enforce is an error, and the
// policy is enforced (a typo never turns enforcement off).
func auditMode(annotations map[string]string, what string) (bool, error) {
	switch v := annotations[ModeAnnotation]; v {
	case "", "enforce":
		return false, nil
	case "audit":
		return true, nil
	default:
		return false, fmt.Errorf("%s: annotation %s: %q is neither audit nor enforce; enforced", what, ModeAnnotation, v)
	}
}

// Protocol numbers as in IP headers; AnyProtocol in an entry admits every protocol.
const (
	AnyProtocol uint8 = 0
	TCP         uint8 = 6
	UDP         uint8 = 17
	SCTP        uint8 = 132
)

// Pod is what the compiler needs of a pod.
type Pod struct {
	Namespace, Name string
	Labels          map[string]string
	IPs             []netip.Addr
	// Ports are the containers' named ports.
	Ports []NamedPort
	// HostNetwork pods share the node's address and are not policed (nor identified).
	HostNetwork bool
	// Key, if set, is IdentityKey(pod), worked out once when the pod changed: a compilation
	// then costs no string building per pod of the cluster.
	Key string
}

// NamedPort is a container port with a name.
type NamedPort struct {
	Name     string
	Protocol uint8
	Port     uint16
}

// Namespace is a namespace's name and labels.
type Namespace struct {
	Name   string
	Labels map[string]string
}

// Key is one policy map entry: the endpoint (by address) admits, in Direction, Peer on
// Protocol at ports matching the top PortBits bits of Port (0 bits: every port).
type Key struct {
	Endpoint  netip.Addr
	Direction Direction
	Protocol  uint8
	Peer      Identity
	Port      uint16
	PortBits  uint8
}

// Endpoint is a policed pod's isolation; a direction it is not isolated in admits all.
type Endpoint struct {
	Pod             string // namespace/name
	Ingress, Egress bool
	IngressPolicies []string
	EgressPolicies  []string
	// AuditIngress and AuditEgress: audit-mode policies select the pod in that direction
	// (what they would drop is reported; only enforced policies isolate).
	AuditIngress, AuditEgress bool
	AuditIngressPolicies      []string
	AuditEgressPolicies       []string
	// AdminIngress … BaselineEgress: ClusterNetworkPolicies of that tier select the pod in
	// that direction (ClusterPolicies names them).
	AdminIngress, AdminEgress       bool
	BaselineIngress, BaselineEgress bool
	ClusterPolicies                 []string
}

// Result is the compiled state of every map.
type Result struct {
	// PodIdentities maps each pod address to its identity.
	PodIdentities map[netip.Addr]Identity
	// CIDRIdentities maps each ipBlock prefix to its identity (an LPM map).
	CIDRIdentities map[netip.Prefix]Identity
	// Endpoints are the pods some policy selects, by address.
	Endpoints map[netip.Addr]Endpoint
	// Entries admit traffic; the value names the policy (namespace/name) that admits it.
	Entries map[Key]string
	// TierEntries are ClusterNetworkPolicy rules (a Direction with AdminTier or
	// BaselineTier): each the first rule in evaluation order matching its key (cluster.go).
	TierEntries map[Key]TierValue
	// TierRules names each rank of TierEntries' values (index 0: none).
	TierRules []TierRule
	// Labels describes each pod identity (namespace and labels), for inspection.
	Labels map[Identity]string
	// Pods names each pod address (namespace/name), for inspection.
	Pods map[netip.Addr]string
}

// Allocator keeps identities stable across compilations, so a change to one pod does not
// renumber the others (and rewrite every map).
type Allocator struct {
	ids  map[string]Identity
	next map[bool]Identity
}

// NewAllocator returns an empty allocator.
func NewAllocator() *Allocator {
	return &Allocator{ids: map[string]Identity{}, next: map[bool]Identity{false: firstPod, true: firstCIDR}}
}

func (a *Allocator) id(key string, cidr bool) Identity {
	if id, ok := a.ids[key]; ok {
		return id
	}
	id := a.next[cidr]
	a.next[cidr]++
	a.ids[key] = id
	return id
}

// Lookup is the identity key has now, if any pod has had it since the last compilation
// forgot the unused ones: a pod joining an identity that exists changes no rule, only which
// identity its addresses are (the agent writes that alone, without a compilation).
func (a *Allocator) Lookup(key string) (Identity, bool) {
	id, ok := a.ids[key]
	return id, ok
}

// retain forgets every key not in keep.
func (a *Allocator) retain(keep map[string]bool) {
	for k := range a.ids {
		if !keep[k] {
			delete(a.ids, k)
		}
	}
}

type podInfo struct {
	Pod
	id       Identity
	nsLabels labels.Set
	local    bool // an endpoint this compilation writes rules for
}

// Compile computes the maps for pods, namespaces and policies; alloc keeps identities across
// calls. Invalid selectors make the policy select nothing and admit nothing, with an error
// naming it; the other policies still compile.
//
// local says which addresses are the node's: only pods with one are endpoints, so the rules
// (Entries, Endpoints) are the node's alone — O(its pods × their policies), not the cluster's
// — while every pod still gets an identity, since a peer can be anywhere. A policy that
// selects none of the node's pods costs only its podSelector's match. nil makes every pod an
// endpoint (the cluster's whole view, for tests and tools).
func Compile(alloc *Allocator, policies []*networkingv1.NetworkPolicy, pods []Pod, namespaces []Namespace, local func(netip.Addr) bool) (*Result, []error) {
	return CompileWithCluster(alloc, policies, nil, pods, namespaces, local)
}

// CompileWithCluster is Compile with ClusterNetworkPolicies beside the NetworkPolicies: their
// Admin tier decides before NetworkPolicy, their Baseline tier after it (cluster.go).
func CompileWithCluster(alloc *Allocator, policies []*networkingv1.NetworkPolicy, cnps []*ClusterNetworkPolicy, pods []Pod, namespaces []Namespace, local func(netip.Addr) bool) (*Result, []error) {
	res := &Result{PodIdentities: make(map[netip.Addr]Identity, len(pods)), CIDRIdentities: map[netip.Prefix]Identity{},
		Endpoints: map[netip.Addr]Endpoint{}, Entries: map[Key]string{}, Labels: map[Identity]string{}, Pods: make(map[netip.Addr]string, len(pods))}
	var errs []error
	nsLabels := map[string]labels.Set{}
	for _, ns := range namespaces {
		l := labels.Set{}
		for k, v := range ns.Labels {
			l[k] = v
		}
		l["kubernetes.io/metadata.name"] = ns.Name // as the API server sets it
		nsLabels[ns.Name] = l
	}
	keep := map[string]bool{}
	var infos, locals []*podInfo
	for _, p := range pods {
		if p.HostNetwork || len(p.IPs) == 0 {
			continue
		}
		key := p.Key
		if key == "" {
			key = IdentityKey(p)
		}
		keep[key] = true
		pi := &podInfo{Pod: p, id: alloc.id(key, false), nsLabels: nsLabels[p.Namespace], local: local == nil}
		for _, ip := range p.IPs {
			pi.local = pi.local || local(ip)
		}
		if pi.nsLabels == nil {
			pi.nsLabels = labels.Set{"kubernetes.io/metadata.name": p.Namespace}
		}
		infos = append(infos, pi)
		if pi.local {
			locals = append(locals, pi)
		}
		name := p.Namespace + "/" + p.Name
		for _, ip := range p.IPs {
			res.PodIdentities[ip] = pi.id
			res.Pods[ip] = name
		}
		if _, ok := res.Labels[pi.id]; !ok {
			// The key starts with describe(p); no label has a ';'.
			d, _, _ := strings.Cut(key, ";")
			res.Labels[pi.id] = d
		}
	}
	// Every prefix an ipBlock (or a ClusterNetworkPolicy's networks) names gets a CIDR identity.
	blocks := clusterBlocks(cnps)
	for _, np := range policies {
		blocks = append(blocks, ipBlocks(np)...)
	}
	for _, b := range blocks {
		{
			for _, s := range append([]string{b.CIDR}, b.Except...) {
				if p, err := netip.ParsePrefix(s); err == nil {
					p = p.Masked()
					key := "cidr:" + p.String()
					keep[key] = true
					res.CIDRIdentities[p] = alloc.id(key, true)
				}
			}
		}
	}
	alloc.retain(keep)

	x := newPodIndex(infos)
	sorted := append([]*networkingv1.NetworkPolicy(nil), policies...)
	sort.Slice(sorted, func(i, j int) bool { return policyName(sorted[i]) < policyName(sorted[j]) })
	for _, np := range sorted {
		name := policyName(np)
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			errs = append(errs, fmt.Errorf("networkpolicy %s: podSelector: %w", name, err))
			continue
		}
		ingress, egress := policyTypes(np)
		audit, err := auditMode(np.Annotations, "networkpolicy "+name)
		if err != nil {
			errs = append(errs, err)
		}
		var selected []*podInfo
		for _, pi := range locals {
			if pi.Namespace != np.Namespace || !sel.Matches(labels.Set(pi.Labels)) {
				continue
			}
			selected = append(selected, pi)
			for _, ip := range pi.IPs {
				ep := res.Endpoints[ip]
				ep.Pod = pi.Namespace + "/" + pi.Name
				switch {
				case audit:
					if ingress {
						ep.AuditIngress = true
						ep.AuditIngressPolicies = append(ep.AuditIngressPolicies, name)
					}
					if egress {
						ep.AuditEgress = true
						ep.AuditEgressPolicies = append(ep.AuditEgressPolicies, name)
					}
				default:
					if ingress {
						ep.Ingress = true
						ep.IngressPolicies = append(ep.IngressPolicies, name)
					}
					if egress {
						ep.Egress = true
						ep.EgressPolicies = append(ep.EgressPolicies, name)
					}
				}
				res.Endpoints[ip] = ep
			}
		}
		in, out := Ingress, Egress
		if audit {
			in, out = Ingress|Audit, Egress|Audit
		}
		if len(selected) == 0 {
			continue
		}
		// Each rule's peers are resolved once for all the endpoints it applies to.
		if ingress {
			for _, r := range np.Spec.Ingress {
				pr, perrs := resolvePeers(res, x, name, np.Namespace, r.From)
				errs = append(errs, perrs...)
				for _, pi := range selected {
					errs = append(errs, addRule(res, infos, name, pi, in, pr, r.Ports)...)
				}
			}
		}
		if egress {
			for _, r := range np.Spec.Egress {
				pr, perrs := resolvePeers(res, x, name, np.Namespace, r.To)
				errs = append(errs, perrs...)
				for _, pi := range selected {
					errs = append(errs, addRule(res, infos, name, pi, out, pr, r.Ports)...)
				}
			}
		}
	}
	errs = append(errs, compileCluster(res, x, infos, locals, cnps)...)
	return res, dedupe(errs)
}

// peers are who a rule admits: pod identities (with a pod each, to resolve named ports per
// destination), CIDR identities, or anyone.
type peers struct {
	any  bool
	pods map[Identity]*podInfo
	cidr map[Identity]bool
}

func resolvePeers(res *Result, x *podIndex, policy, namespace string, from []networkingv1.NetworkPolicyPeer) (peers, []error) {
	var errs []error
	pr := peers{any: len(from) == 0, pods: map[Identity]*podInfo{}, cidr: map[Identity]bool{}}
	for _, peer := range from {
		if peer.IPBlock != nil {
			for _, id := range cidrIdentities(res, peer.IPBlock) {
				pr.cidr[id] = true
			}
			continue
		}
		matched, err := selectPods(x, namespace, peer)
		if err != nil {
			errs = append(errs, fmt.Errorf("networkpolicy %s: %w", policy, err))
			continue
		}
		for _, pi := range matched {
			pr.pods[pi.id] = pi
		}
	}
	return pr, errs
}

// addRule adds one NetworkPolicy rule's entries for endpoint ep.
func addRule(res *Result, infos []*podInfo, policy string, ep *podInfo, dir Direction, pr peers, ports []networkingv1.NetworkPolicyPort) []error {
	return ruleKeys(infos, "networkpolicy "+policy, ep, dir, pr, ports, func(k Key) {
		if _, ok := res.Entries[k]; !ok {
			res.Entries[k] = policy
		}
	})
}

// ruleKeys calls put with every map key of one rule at endpoint ep: its peers on its ports.
// what names the rule's policy in errors.
func ruleKeys(infos []*podInfo, what string, ep *podInfo, dir Direction, pr peers, ports []networkingv1.NetworkPolicyPort, put func(Key)) []error {
	var errs []error
	any, podPeers, cidrPeers := pr.any, pr.pods, pr.cidr
	add := func(proto uint8, peer Identity, port uint16, bits uint8) {
		for _, ip := range ep.IPs {
			put(Key{Endpoint: ip, Direction: dir, Protocol: proto, Peer: peer, Port: port, PortBits: bits})
		}
	}
	allPeers := func(f func(peer Identity, pi *podInfo)) {
		if any {
			f(AnyPeer, nil)
			return
		}
		for id, pi := range podPeers {
			f(id, pi)
		}
		for id := range cidrPeers {
			f(id, nil)
		}
	}
	if len(ports) == 0 {
		allPeers(func(peer Identity, _ *podInfo) { add(AnyProtocol, peer, 0, 0) })
		return errs
	}
	for _, p := range ports {
		proto := protocolNumber(p.Protocol)
		switch {
		case p.Port == nil:
			allPeers(func(peer Identity, _ *podInfo) { add(proto, peer, 0, 0) })
		case p.Port.Type == intstr.String:
			if dir&Egress == 0 {
				// The endpoint is the destination: its own port of that name.
				if n, ok := ep.port(p.Port.StrVal, proto); ok {
					allPeers(func(peer Identity, _ *podInfo) { add(proto, peer, n, 16) })
				}
				continue
			}
			// Egress: the destination is the peer, so each peer pod's own number; a named
			// port never matches a non-pod destination.
			destinations := podPeers
			if any {
				destinations = map[Identity]*podInfo{}
				for _, pi := range infos {
					destinations[pi.id] = pi
				}
			}
			for id, pi := range destinations {
				if n, ok := pi.port(p.Port.StrVal, proto); ok {
					add(proto, id, n, 16)
				}
			}
		default:
			from := p.Port.IntValue()
			to := from
			if p.EndPort != nil {
				to = int(*p.EndPort)
			}
			if from < 1 || from > 65535 || to < from || to > 65535 {
				errs = append(errs, fmt.Errorf("%s: port range %d-%d is not within 1-65535", what, from, to))
				continue
			}
			for _, pp := range PortPrefixes(uint16(from), uint16(to)) {
				allPeers(func(peer Identity, _ *podInfo) { add(proto, peer, pp.Port, pp.Bits) })
			}
		}
	}
	return errs
}

// cidrIdentities are the CIDR identities an ipBlock admits: its prefixes inside the cidr and
// outside every except.
func cidrIdentities(res *Result, b *networkingv1.IPBlock) []Identity {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return nil
	}
	cidr = cidr.Masked()
	var excepts []netip.Prefix
	for _, e := range b.Except {
		if p, err := netip.ParsePrefix(e); err == nil {
			excepts = append(excepts, p.Masked())
		}
	}
	var out []Identity
	for p, id := range res.CIDRIdentities {
		if !contains(cidr, p) {
			continue
		}
		excepted := false
		for _, e := range excepts {
			if contains(e, p) {
				excepted = true
				break
			}
		}
		if !excepted {
			out = append(out, id)
		}
	}
	return out
}

// contains reports whether prefix outer holds all of inner.
func contains(outer, inner netip.Prefix) bool {
	return outer.Addr().Is4() == inner.Addr().Is4() && outer.Bits() <= inner.Bits() && outer.Contains(inner.Addr())
}

// podIndex finds a peer selector's pods without looking at every pod of the cluster: by
// namespace, and by each label key=value, so a selector with an equality (or "in")
// requirement looks only at the pods that carry one of its values. Selections are
// remembered for the compilation: policies repeat peers.
type podIndex struct {
	all      []*podInfo
	byNS     map[string][]*podInfo
	byLabel  map[string][]*podInfo // "key=value"
	selected map[string][]*podInfo
}

func newPodIndex(infos []*podInfo) *podIndex {
	x := &podIndex{all: infos, byNS: map[string][]*podInfo{}, byLabel: map[string][]*podInfo{}, selected: map[string][]*podInfo{}}
	for _, pi := range infos {
		x.byNS[pi.Namespace] = append(x.byNS[pi.Namespace], pi)
		for k, v := range pi.Labels {
			x.byLabel[k+"="+v] = append(x.byLabel[k+"="+v], pi)
		}
	}
	return x
}

// candidates is a superset of the pods sel matches (in namespace, if not ""): the
// postings of its narrowest equality requirement, else the namespace's pods, else all.
func (x *podIndex) candidates(sel labels.Selector, namespace string) [][]*podInfo {
	best, bestLen := [][]*podInfo(nil), -1
	if namespace != "" {
		best, bestLen = [][]*podInfo{x.byNS[namespace]}, len(x.byNS[namespace])
	} else {
		best, bestLen = [][]*podInfo{x.all}, len(x.all)
	}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
		default:
			continue
		}
		var lists [][]*podInfo
		n := 0
		for v := range r.Values() {
			l := x.byLabel[r.Key()+"="+v]
			lists = append(lists, l)
			n += len(l)
		}
		if n < bestLen {
			best, bestLen = lists, n
		}
	}
	return best
}

// selectPods returns the pods a pod/namespace selector peer names.
func selectPods(x *podIndex, namespace string, peer networkingv1.NetworkPolicyPeer) ([]*podInfo, error) {
	podSel, nsSel := labels.Everything(), labels.Selector(nil)
	var err error
	if peer.PodSelector != nil {
		if podSel, err = metav1.LabelSelectorAsSelector(peer.PodSelector); err != nil {
			return nil, fmt.Errorf("podSelector: %w", err)
		}
	}
	if peer.NamespaceSelector != nil {
		if nsSel, err = metav1.LabelSelectorAsSelector(peer.NamespaceSelector); err != nil {
			return nil, fmt.Errorf("namespaceSelector: %w", err)
		}
	}
	scope := ""
	if nsSel == nil {
		scope = namespace // a podSelector alone means the policy's namespace
	}
	memo := scope + "|" + podSel.String() + "|"
	if nsSel != nil {
		memo += "ns:" + nsSel.String()
	}
	if out, ok := x.selected[memo]; ok {
		return out, nil
	}
	var out []*podInfo
	for _, list := range x.candidates(podSel, scope) {
		for _, pi := range list {
			if scope != "" && pi.Namespace != scope {
				continue
			}
			if nsSel != nil && !nsSel.Matches(pi.nsLabels) {
				continue
			}
			if podSel.Matches(labels.Set(pi.Labels)) {
				out = append(out, pi)
			}
		}
	}
	x.selected[memo] = out
	return out, nil
}

func (p *podInfo) port(name string, proto uint8) (uint16, bool) {
	for _, np := range p.Ports {
		if np.Name == name && np.Protocol == proto {
			return np.Port, true
		}
	}
	return 0, false
}

// policyTypes are upstream's defaults: Ingress always, Egress when there are egress rules,
// unless policyTypes says.
func policyTypes(np *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(np.Spec.PolicyTypes) == 0 {
		return true, len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

func ipBlocks(np *networkingv1.NetworkPolicy) []*networkingv1.IPBlock {
	var out []*networkingv1.IPBlock
	for _, r := range np.Spec.Ingress {
		for _, p := range r.From {
			if p.IPBlock != nil {
				out = append(out, p.IPBlock)
			}
		}
	}
	for _, r := range np.Spec.Egress {
		for _, p := range r.To {
			if p.IPBlock != nil {
				out = append(out, p.IPBlock)
			}
		}
	}
	return out
}

func protocolNumber(p *corev1.Protocol) uint8 {
	if p == nil {
		return TCP
	}
	switch *p {
	case corev1.ProtocolUDP:
		return UDP
	case corev1.ProtocolSCTP:
		return SCTP
	}
	return TCP
}

// IdentityKey is what makes two pods the same peer: namespace, labels and named ports.
func IdentityKey(p Pod) string { return IdentityKeyFor(p, nil) }

// IdentityKeyFor is IdentityKey with only the labels whose keys are in keys (nil: every
// label). With SelectorKeys of the policies, pods that differ only in labels no policy
// names — a Deployment's pod-template-hash, which every rolling update changes — share an
// identity, so a new ReplicaSet's pods on other nodes cost a node identity entries, not a
// compilation. Exact, unlike a fixed list of ignored labels: a policy that does select on
// such a label makes it part of the identity.
func IdentityKeyFor(p Pod, keys map[string]bool) string {
	var b strings.Builder
	if keys == nil {
		b.WriteString(describe(p))
	} else {
		relevant := labels.Set{}
		for k, v := range p.Labels {
			if keys[k] {
				relevant[k] = v
			}
		}
		b.WriteString(p.Namespace + ":" + relevant.String())
	}
	ports := append([]NamedPort(nil), p.Ports...)
	sort.Slice(ports, func(i, j int) bool {
		if ports[i].Name != ports[j].Name {
			return ports[i].Name < ports[j].Name
		}
		return ports[i].Protocol < ports[j].Protocol
	})
	for _, np := range ports {
		fmt.Fprintf(&b, ";%s/%d=%d", np.Name, np.Protocol, np.Port)
	}
	return b.String()
}

// SelectorKeys are the pod label keys some policy's pod selector names — the pods a policy
// applies to, or the peers a rule admits — by matchLabels or matchExpressions.
func SelectorKeys(policies []*networkingv1.NetworkPolicy) map[string]bool {
	keys := map[string]bool{}
	add := func(sel *metav1.LabelSelector) {
		if sel == nil {
			return
		}
		for k := range sel.MatchLabels {
			keys[k] = true
		}
		for _, r := range sel.MatchExpressions {
			keys[r.Key] = true
		}
	}
	for _, np := range policies {
		add(&np.Spec.PodSelector)
		for _, r := range np.Spec.Ingress {
			for _, peer := range r.From {
				add(peer.PodSelector)
			}
		}
		for _, r := range np.Spec.Egress {
			for _, peer := range r.To {
				add(peer.PodSelector)
			}
		}
	}
	return keys
}

// describe is "namespace:k=v,k=v", labels sorted.
func describe(p Pod) string {
	return p.Namespace + ":" + labels.Set(p.Labels).String()
}

func policyName(np *networkingv1.NetworkPolicy) string { return np.Namespace + "/" + np.Name }

func dedupe(errs []error) []error {
	seen := map[string]bool{}
	var out []error
	for _, e := range errs {
		if e != nil && !seen[e.Error()] {
			seen[e.Error()] = true
			out = append(out, e)
		}
	}
	return out
}
