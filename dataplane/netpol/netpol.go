package netpol

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/skiff-sh/skiff/dataplane/loader"
	"github.com/skiff-sh/skiff/dataplane/policy"
	"github.com/skiff-sh/skiff/dataplane/programs"
)

// Policy is the loaded NetworkPolicy programs and maps of a node (bpf/tc_policy.c): the
// maps pinned beside the service maps, each pod veth's programs attached through pinned tcx
// links, so an agent restart never leaves a pod unpoliced.
type Policy struct {
	objs   programs.PolicyObjects
	pinDir string
	// names numbers the policies entries name (rule values hold the index).
	names map[string]uint32
	list  []string
	// maps are the maps Sync writes: the loaded objects' (or fakes, in unit tests).
	maps policyMaps
	// written is what the last Sync left in each map, so the next one writes the difference
	// without reading the maps back; Reread drops it, and the next Sync reads the kernel's
	// maps again (repairing any drift: the enforcer does so on every periodic resync).
	written map[table]any
}

// table is a BPF map as Sync writes it: an *ebpf.Map in the kernel; in unit tests an
// in-memory fake (package fakemap) that renders its entries as text, so the sync logic runs
// without root.
type table interface {
	Put(key, value any) error
	Delete(key any) error
	Lookup(key, valueOut any) error
	// NextKey writes the key after key (the first one when key is nil) to nextKeyOut, or
	// returns ebpf.ErrKeyNotExist after the last.
	NextKey(key, nextKeyOut any) error
	String() string
}

// policyMaps are the maps Sync and SetPeerIdentities write, in the order Sync writes them.
type policyMaps struct {
	identities, cidrs, rules, endpoints table
	// IPv6's: the same keyed by 16-byte addresses.
	identities6, cidrs6, rules6, endpoints6 table
	names                                   table
}

// newPolicy is a Policy writing into maps, for LoadPolicy and for tests with fakes.
func newPolicy(pinDir string, maps policyMaps) *Policy {
	return &Policy{pinDir: pinDir, names: map[string]uint32{}, maps: maps}
}

// Reread makes the next Sync compare against the maps as the kernel holds them.
func (p *Policy) Reread() { p.written = nil }

// Endpoint flags, as bpf/tc_policy.c's POL_ISOLATED_* and POL_AUDIT_*.
const (
	isolatedIngress = 1
	isolatedEgress  = 2
	auditIngress    = 4
	auditEgress     = 8
	adminIngress    = 16
	adminEgress     = 32
	baselineIngress = 64
	baselineEgress  = 128
)

// HostIdentity is what the node's own addresses are (policy.Host).
const HostIdentity = uint32(policy.Host)

// LoadPolicy loads the policy programs and pins their maps in pinDir (keeping entries an
// earlier run pinned).
func LoadPolicy(pinDir string) (*Policy, error) {
	if err := loader.MountBPFFS(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(pinDir, 0o700); err != nil {
		return nil, err
	}
	spec, err := programs.LoadPolicy()
	if err != nil {
		return nil, err
	}
	p := newPolicy(pinDir, policyMaps{})
	if err := spec.LoadAndAssign(&p.objs, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: pinDir}}); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("loading skiff's policy programs: %+v", ve)
		}
		return nil, fmt.Errorf("loading skiff's policy programs (maps pinned in %s): %w", pinDir, err)
	}
	p.maps = policyMaps{identities: p.objs.SkiffPolIdentities, cidrs: p.objs.SkiffPolCidrs, rules: p.objs.SkiffPolRules, endpoints: p.objs.SkiffPolEndpoints,
		identities6: p.objs.SkiffPolIdentities6, cidrs6: p.objs.SkiffPolCidrs6, rules6: p.objs.SkiffPolRules6, endpoints6: p.objs.SkiffPolEndpoints6,
		names: p.objs.SkiffPolNames}
	return p, nil
}

// Close releases the programs and maps; pins and links stay.
func (p *Policy) Close() { _ = p.objs.Close() }

func (p *Policy) linkPath(ifname, dir string) string {
	return filepath.Join(p.pinDir, "policy_"+dir+"_"+ifname)
}

// Attach puts the programs on a pod's host-side veth (tcx ingress: what the pod sends; tcx
// egress: what it receives). Write the pod's endpoint first (Sync): a pod without one gets
// nothing through, so attaching first would only drop its first packets, never leak them.
func (p *Policy) Attach(ifname string) error {
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return err
	}
	for _, a := range []struct {
		dir  string
		prog *ebpf.Program
		typ  ebpf.AttachType
	}{{"from", p.objs.SkiffPolicyFromPod, ebpf.AttachTCXIngress}, {"to", p.objs.SkiffPolicyToPod, ebpf.AttachTCXEgress}} {
		path := p.linkPath(ifname, a.dir)
		if l, err := link.LoadPinnedLink(path, nil); err == nil {
			if loader.Attached(l) == nil {
				err := l.Update(a.prog)
				l.Close()
				if err != nil {
					return fmt.Errorf("swap the policy program on %s: %w", ifname, err)
				}
				continue
			}
			_ = l.Unpin() // a veth of the same name that is gone
			l.Close()
		}
		l, err := link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: a.prog, Attach: a.typ})
		if err != nil {
			return fmt.Errorf("policy program on %s: %w", ifname, err)
		}
		err = l.Pin(path)
		l.Close()
		if err != nil {
			return fmt.Errorf("pin the policy link of %s: %w", ifname, err)
		}
	}
	return nil
}

// Refresh puts the programs loaded now on every veth an earlier run attached (an upgraded
// agent's programs replace the old ones in place, without a moment unpoliced) and forgets
// the links of veths that are gone.
func (p *Policy) Refresh() (kept, gone int) {
	paths, _ := filepath.Glob(filepath.Join(p.pinDir, "policy_*"))
	for _, path := range paths {
		l, err := link.LoadPinnedLink(path, nil)
		if err != nil {
			continue
		}
		prog := p.objs.SkiffPolicyToPod
		if strings.HasPrefix(filepath.Base(path), "policy_from_") {
			prog = p.objs.SkiffPolicyFromPod
		}
		if loader.Attached(l) == nil && l.Update(prog) == nil {
			kept++
		} else {
			_ = l.Unpin()
			gone++
		}
		l.Close()
	}
	return kept, gone
}

// Detach removes the programs' links of a veth (after the veth is gone, only the pins).
func (p *Policy) Detach(ifname string) {
	for _, dir := range []string{"from", "to"} {
		if l, err := link.LoadPinnedLink(p.linkPath(ifname, dir), nil); err == nil {
			_ = l.Unpin()
			_ = l.Close()
		}
	}
}

// Sync makes the maps hold res for the endpoints local says are this node's, with the
// node's own addresses as HostIdentity; entries no longer wanted are deleted after the new
// ones are in, so a change never passes through "nothing admitted". It returns the number of
// map writes and deletes.
func (p *Policy) Sync(res *policy.Result, local func(netip.Addr) bool, host []netip.Addr) (int, error) {
	changes := 0
	var errs []error
	put := func(m table, k, v any) {
		if err := m.Put(k, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.String(), err))
		}
		changes++
	}
	// Identities: every pod, and this node.
	ids := map[uint32]uint32{}
	for a, id := range res.PodIdentities {
		if a.Is4() {
			ids[programs.Addr4(a)] = uint32(id)
		}
	}
	for _, a := range host {
		if a.Is4() {
			ids[programs.Addr4(a)] = HostIdentity
		}
	}
	syncMap(p, p.maps.identities, ids, put, &errs, &changes)
	ids6 := map[programs.PolicyPolAddr6]uint32{}
	for a, id := range res.PodIdentities {
		if a.Is6() {
			ids6[Addr6(a)] = uint32(id)
		}
	}
	for _, a := range host {
		if a.Is6() {
			ids6[Addr6(a)] = HostIdentity
		}
	}
	syncMap(p, p.maps.identities6, ids6, put, &errs, &changes)
	cidrs := map[programs.PolicyPolCidrKey]uint32{}
	cidrs6 := map[programs.PolicyPolCidr6Key]uint32{}
	for pfx, id := range res.CIDRIdentities {
		if pfx.Addr().Is4() {
			cidrs[programs.PolicyPolCidrKey{Prefixlen: uint32(pfx.Bits()), Addr: programs.Addr4(pfx.Addr())}] = uint32(id)
		} else {
			cidrs6[programs.PolicyPolCidr6Key{Prefixlen: uint32(pfx.Bits()), Addr: Addr6(pfx.Addr()).Addr}] = uint32(id)
		}
	}
	syncMap(p, p.maps.cidrs, cidrs, put, &errs, &changes)
	syncMap(p, p.maps.cidrs6, cidrs6, put, &errs, &changes)
	rules := map[programs.PolicyPolRuleKey]programs.PolicyPolRuleValue{}
	rules6 := map[programs.PolicyPolRule6Key]programs.PolicyPolRuleValue{}
	for k, name := range res.Entries {
		if !local(k.Endpoint) {
			continue
		}
		v := programs.PolicyPolRuleValue{Policy: p.index(name)}
		if k.Endpoint.Is4() {
			rules[RuleKey(k)] = v
		} else {
			rules6[RuleKey6(k)] = v
		}
	}
	// ClusterNetworkPolicy rules: the same maps, their tier in the key, their rank and
	// action as the value.
	for k, v := range res.TierEntries {
		if !local(k.Endpoint) {
			continue
		}
		if k.Endpoint.Is4() {
			rules[RuleKey(k)] = programs.PolicyPolRuleValue{Policy: uint32(v)}
		} else {
			rules6[RuleKey6(k)] = programs.PolicyPolRuleValue{Policy: uint32(v)}
		}
	}
	// Rules before endpoints: a newly isolated endpoint has its rules when isolation starts.
	syncMap(p, p.maps.rules, rules, put, &errs, &changes)
	syncMap(p, p.maps.rules6, rules6, put, &errs, &changes)
	eps := map[uint32]programs.PolicyPolEndpoint{}
	for a, ep := range res.Endpoints {
		if a.Is4() && local(a) {
			eps[programs.Addr4(a)] = endpointOf(ep)
		}
	}
	// Local pods no policy selects are endpoints too, unisolated: an entry is what lets
	// traffic through at all.
	for a := range res.PodIdentities {
		if a.Is4() && local(a) {
			if _, ok := eps[programs.Addr4(a)]; !ok {
				eps[programs.Addr4(a)] = programs.PolicyPolEndpoint{}
			}
		}
	}
	syncMap(p, p.maps.endpoints, eps, put, &errs, &changes)
	eps6 := map[programs.PolicyPolAddr6]programs.PolicyPolEndpoint{}
	for a := range res.PodIdentities {
		if a.Is6() && local(a) {
			eps6[Addr6(a)] = programs.PolicyPolEndpoint{}
		}
	}
	for a, ep := range res.Endpoints {
		if a.Is6() && local(a) {
			eps6[Addr6(a)] = endpointOf(ep)
		}
	}
	syncMap(p, p.maps.endpoints6, eps6, put, &errs, &changes)
	// Names, for skiff bpf policy and skiff policy trace.
	names := map[programs.PolicyPolNameKey]programs.PolicyPolName{}
	for i, n := range p.list {
		names[programs.PolicyPolNameKey{Kind: nameKindPolicy, Id: uint32(i)}] = polName(n)
	}
	for id, l := range res.Labels {
		names[programs.PolicyPolNameKey{Kind: nameKindIdentity, Id: uint32(id)}] = polName(l)
	}
	for rank, r := range res.TierRules {
		if rank > 0 {
			names[programs.PolicyPolNameKey{Kind: nameKindTierRule, Id: uint32(rank)}] = polName(r.Policy + "/" + r.Rule)
		}
	}
	for pfx, id := range res.CIDRIdentities {
		names[programs.PolicyPolNameKey{Kind: nameKindIdentity, Id: uint32(id)}] = polName("cidr:" + pfx.String())
	}
	for a, pod := range res.Pods {
		if a.Is4() && local(a) {
			names[programs.PolicyPolNameKey{Kind: nameKindEndpoint, Id: programs.Addr4(a)}] = polName(pod)
		}
	}
	for a, ep := range res.Endpoints { // local pods the informer has not shown yet
		if a.Is4() && local(a) {
			names[programs.PolicyPolNameKey{Kind: nameKindEndpoint, Id: programs.Addr4(a)}] = polName(ep.Pod)
		}
	}
	for a, pod := range res.Pods {
		if a.Is6() && local(a) {
			names[programs.PolicyPolNameKey{Kind: nameKindEndpoint6, Id: endpoint6ID(a)}] = polName(pod)
		}
	}
	syncMap(p, p.maps.names, names, put, &errs, &changes)
	return changes, errors.Join(errs...)
}

// endpointOf is an endpoint's map value: the directions it is isolated in, and those
// audit-mode policies select it in.
func endpointOf(ep policy.Endpoint) programs.PolicyPolEndpoint {
	var flags uint32
	for _, f := range []struct {
		set  bool
		flag uint32
	}{{ep.Ingress, isolatedIngress}, {ep.Egress, isolatedEgress}, {ep.AuditIngress, auditIngress}, {ep.AuditEgress, auditEgress},
		{ep.AdminIngress, adminIngress}, {ep.AdminEgress, adminEgress}, {ep.BaselineIngress, baselineIngress}, {ep.BaselineEgress, baselineEgress}} {
		if f.set {
			flags |= f.flag
		}
	}
	return programs.PolicyPolEndpoint{Flags: flags}
}

// isolationOf reads endpointOf's flags back.
func isolationOf(flags uint32) policy.Isolation {
	return policy.Isolation{Ingress: flags&isolatedIngress != 0, Egress: flags&isolatedEgress != 0,
		AuditIngress: flags&auditIngress != 0, AuditEgress: flags&auditEgress != 0,
		AdminIngress: flags&adminIngress != 0, AdminEgress: flags&adminEgress != 0,
		BaselineIngress: flags&baselineIngress != 0, BaselineEgress: flags&baselineEgress != 0}
}

// Addr6 is an IPv6 address as the IPv6 policy maps key it (programs.Addr6).
func Addr6(a netip.Addr) programs.PolicyPolAddr6 {
	return programs.PolicyPolAddr6{Addr: programs.Addr6(a)}
}

// Kinds of skiff_pol_names entries, as bpf/tc_policy.c's POL_NAME_*.
const (
	nameKindPolicy   = 1
	nameKindIdentity = 2
	nameKindEndpoint = 3
	// nameKindEndpoint6 names an IPv6 endpoint by endpoint6ID (the names map's ids are 32
	// bits); a collision would only misname a pod in what `skiff bpf policy` prints.
	nameKindEndpoint6 = 4
	// nameKindTierRule names a ClusterNetworkPolicy rule by its rank: policy/rule.
	nameKindTierRule = 5
)

// endpoint6ID is the id an IPv6 endpoint's name has in skiff_pol_names.
func endpoint6ID(a netip.Addr) uint32 {
	h := fnv.New32a()
	b := a.As16()
	_, _ = h.Write(b[:])
	return h.Sum32()
}

func polName(s string) programs.PolicyPolName {
	var n programs.PolicyPolName
	for i := 0; i < len(s) && i < len(n.Name)-1; i++ {
		n.Name[i] = int8(s[i])
	}
	return n
}

// index numbers a policy name for rule values; PolicyName reads it back.
func (p *Policy) index(name string) uint32 {
	if i, ok := p.names[name]; ok {
		return i
	}
	i := uint32(len(p.list))
	p.names[name] = i
	p.list = append(p.list, name)
	return i
}

// PolicyName is the policy a rule value names ("" if unknown to this agent run).
func (p *Policy) PolicyName(i uint32) string {
	if int(i) < len(p.list) {
		return p.list[i]
	}
	return ""
}

// RuleKey is a compiled entry as the rules map keys it.
func RuleKey(k policy.Key) programs.PolicyPolRuleKey {
	return programs.PolicyPolRuleKey{Prefixlen: 80 + uint32(k.PortBits), Endpoint: programs.Addr4(k.Endpoint), Peer: uint32(k.Peer),
		Dir: uint8(k.Direction), Proto: k.Protocol, Port: programs.Port(k.Port)}
}

// RuleKey6 is a compiled entry of an IPv6 endpoint as skiff_pol_rules6 keys it.
func RuleKey6(k policy.Key) programs.PolicyPolRule6Key {
	return programs.PolicyPolRule6Key{Prefixlen: 176 + uint32(k.PortBits), Endpoint: Addr6(k.Endpoint).Addr, Peer: uint32(k.Peer),
		Dir: uint8(k.Direction), Proto: k.Protocol, Port: programs.Port(k.Port)}
}

// SetPeerIdentities writes the identities of single addresses — remote pods that started,
// moved or went, whose identities exist already — without a compilation; Unidentified
// deletes an address's entry. What Sync last wrote follows, so the next Sync diffs from it.
func (p *Policy) SetPeerIdentities(set map[netip.Addr]policy.Identity) error {
	four, six := map[uint32]policy.Identity{}, map[programs.PolicyPolAddr6]policy.Identity{}
	for a, id := range set {
		if a.Is4() {
			four[programs.Addr4(a)] = id
		} else {
			six[Addr6(a)] = id
		}
	}
	return errors.Join(setIdentities(p, p.maps.identities, four), setIdentities(p, p.maps.identities6, six))
}

// setIdentities is SetPeerIdentities for one family's map, keyed by K.
func setIdentities[K comparable](p *Policy, m table, set map[K]policy.Identity) error {
	if len(set) == 0 {
		return nil
	}
	have, _ := p.written[m].(map[K]uint32)
	var errs []error
	for k, id := range set {
		if id == Unidentified {
			if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				errs = append(errs, err)
			}
			if have != nil {
				delete(have, k)
			}
			continue
		}
		if err := m.Put(k, uint32(id)); err != nil {
			errs = append(errs, err)
		}
		if have != nil {
			have[k] = uint32(id)
		}
	}
	if len(errs) > 0 {
		delete(p.written, m) // read it back at the next Sync
		return fmt.Errorf("%s: %w", m.String(), errors.Join(errs...))
	}
	return nil
}

// Unidentified, given to SetPeerIdentities, removes an address's identity.
const Unidentified = policy.AnyPeer

// syncMap writes want into m and deletes what m has beyond it: what m has is what the last
// sync wrote, or when that is not known (the first sync, after Reread or a failed write),
// what the kernel's map holds.
func syncMap[K comparable, V comparable](p *Policy, m table, want map[K]V, put func(m table, k, v any), errs *[]error, changes *int) {
	failed := len(*errs)
	have, known := p.written[m].(map[K]V)
	if !known {
		var err error
		if have, err = readAll[K, V](m); err != nil {
			*errs = append(*errs, fmt.Errorf("%s: %w", m.String(), err))
		}
	}
	defer func() {
		if p.written == nil {
			p.written = map[table]any{}
		}
		if len(*errs) > failed {
			delete(p.written, m) // not all was written: read it back next time
			return
		}
		p.written[m] = want
	}()
	for k, v := range want {
		if old, ok := have[k]; !ok || old != v {
			put(m, k, v)
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				*errs = append(*errs, fmt.Errorf("%s: %w", m.String(), err))
			}
			*changes++
		}
	}
}

// readAll is every entry of m. The maps it reads are written by this agent alone, so the walk
// by NextKey sees each key once; it stops at a bound all the same rather than loop should a
// key vanish under it (the kernel restarts from the first key then).
func readAll[K comparable, V any](m table) (map[K]V, error) {
	have := map[K]V{}
	var prev any // nil: the first key
	for range 1 << 24 {
		var k K
		if err := m.NextKey(prev, &k); errors.Is(err, ebpf.ErrKeyNotExist) {
			return have, nil
		} else if err != nil {
			return have, err
		}
		var v V
		if err := m.Lookup(k, &v); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return have, err
		}
		have[k] = v
		prev = k
	}
	return have, errors.New("the map changed while it was read")
}

// Drop is a count of dropped packets at an endpoint in one direction.
type Drop struct {
	Endpoint  netip.Addr
	Direction policy.Direction
	Packets   uint64
}

// Drops reads the drop counters of both families, sorted by endpoint and direction.
func (p *Policy) Drops() ([]Drop, error) {
	var out []Drop
	var k programs.PolicyPolDropKey
	var n uint64
	it := p.objs.SkiffPolDrops.Iterate()
	for it.Next(&k, &n) {
		out = append(out, Drop{Endpoint: programs.FromAddr4(k.Endpoint), Direction: policy.Direction(k.Dir), Packets: n})
	}
	if err := it.Err(); err != nil {
		return out, err
	}
	var k6 programs.PolicyPolDrop6Key
	it = p.objs.SkiffPolDrops6.Iterate()
	for it.Next(&k6, &n) {
		out = append(out, Drop{Endpoint: programs.FromAddr6(k6.Endpoint), Direction: policy.Direction(k6.Dir), Packets: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Endpoint != out[j].Endpoint {
			return out[i].Endpoint.Less(out[j].Endpoint)
		}
		return out[i].Direction < out[j].Direction
	})
	return out, it.Err()
}
