package services

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/dataplane/programs"
)

const (
	protoTCP = 6
	protoUDP = 17
	// svcFlagAffinity is SVC_FLAG_AFFINITY, svcFlagLocal SVC_FLAG_LOCAL, beFlagLocal BE_FLAG_LOCAL.
	svcFlagAffinity = 1
	svcFlagLocal    = 2
	svcFlagMaglev   = 4
	// svcFlagHostNetns is SVC_FLAG_HOST_NETNS.
	svcFlagHostNetns = 8
	beFlagLocal      = 1
	// ctReverse is CT_REVERSE.
	ctReverse = 2
)

// Maps are the pinned maps the programs read.
type Maps struct {
	Services, Backends, Names *ebpf.Map
	// Sockets is the per-socket translation table (skiff's "conntrack" at the socket level).
	Sockets *ebpf.Map
	// CT is the per-packet connection table of NodePort traffic (set by OpenPinned).
	CT *ebpf.Map
	// Maglev holds the lookup tables of Maglev frontends.
	Maglev *ebpf.Map
}

func protoNumber(p corev1.Protocol) uint8 {
	if p == corev1.ProtocolUDP {
		return protoUDP
	}
	return protoTCP
}

func protoName(n uint8) string {
	switch n {
	case protoTCP:
		return "TCP"
	case protoUDP:
		return "UDP"
	}
	return fmt.Sprint(n)
}

// entries is the full content the maps should have.
type entries struct {
	services map[programs.SockSvcKey]programs.SockSvcValue
	backends map[programs.SockBackendKey]programs.SockBackendValue
	names    map[uint32]programs.SockSvcName
	maglev   map[programs.SockMaglevKey]uint32
}

func encode(services []Service) entries {
	e := entries{services: map[programs.SockSvcKey]programs.SockSvcValue{}, backends: map[programs.SockBackendKey]programs.SockBackendValue{}, names: map[uint32]programs.SockSvcName{},
		maglev: map[programs.SockMaglevKey]uint32{}}
	for _, s := range services {
		key := programs.SockSvcKey{Addr: programs.Addr4(s.Frontend.Addr), Port: programs.Port(s.Frontend.Port), Proto: protoNumber(s.Frontend.Proto)}
		n := len(s.Backends)
		if n > 65535 {
			n = 65535
		}
		val := programs.SockSvcValue{Id: s.ID, Count: uint16(n)}
		if s.ExternalLocal {
			val.Flags |= svcFlagLocal
		}
		if s.HostNetnsOnly {
			val.Flags |= svcFlagHostNetns
		}
		if s.Maglev && n > 0 {
			val.Flags |= svcFlagMaglev
			names := make([]string, n)
			for i, b := range s.Backends[:n] {
				names[i] = netip.AddrPortFrom(b.Addr, b.Port).String()
			}
			for i, slot := range Maglev(names, MaglevSize) {
				e.maglev[programs.SockMaglevKey{Id: s.ID, Index: uint32(i)}] = slot
			}
		}
		if s.Affinity > 0 {
			val.Flags |= svcFlagAffinity
			val.AffinityTimeout = uint32(s.Affinity / time.Second)
		}
		e.services[key] = val
		for i, b := range s.Backends[:n] {
			v := programs.SockBackendValue{Addr: programs.Addr4(b.Addr), Port: programs.Port(b.Port)}
			if b.Local {
				v.Flags |= beFlagLocal
			}
			e.backends[programs.SockBackendKey{Id: s.ID, Slot: uint32(i + 1)}] = v
		}
		var name programs.SockSvcName
		for i := 0; i < len(s.Name) && i < len(name.Name)-1; i++ {
			name.Name[i] = int8(s.Name[i])
		}
		e.names[s.ID] = name
	}
	return e
}

// Apply makes the maps hold exactly services, whatever they held before.
func (m Maps) Apply(services []Service) error {
	return m.tables().write(entries{}, encode(services), true)
}

// Programmer applies successive states to the maps, writing only the entries that changed
// since the state it last applied, so one new Service among 10,000 costs a few map writes
// rather than 100,000. After an error, or when asked (start, periodic resync), it writes
// everything and prunes what the maps hold beyond the state, repairing any drift.
type Programmer struct {
	Maps Maps
	// kernel, if set, is what is written instead of Maps (unit tests' fakes).
	kernel *tables
	last   *entries
	// overlapped is set when the last full Apply had two frontends on one address (a later
	// one wins in encode): which one the maps hold is then a whole-state decision, so
	// changes are not applied alone.
	overlapped bool
	// Status is what the last Apply could program (Fit): each map's fill, and the
	// frontends left out because a map is full.
	Status MapStatus
}

// Apply programs services; full rewrites every entry and prunes by iterating the maps.
// Frontends beyond the maps' capacity are left out whole and named in Status, never
// written in part: a full map is reported, not a failure of the Services that fit.
func (p *Programmer) Apply(services []Service, full bool) error {
	t := p.tables()
	kept, status := Fit(services, t.capacity())
	p.Status = status
	want := encode(kept)
	p.overlapped = len(want.services) < len(kept)
	var err error
	if full || p.last == nil {
		err = t.write(entries{}, want, true)
	} else {
		err = t.write(*p.last, want, false)
	}
	p.last = nil
	if err == nil {
		p.last = &want
	}
	return err
}

// ApplyChanges programs the changed Services alone: the entries of their old frontends are
// moved to those of their new ones, and nothing else is read or written, so one change among
// 10,000 Services costs that Service's entries (not a pass over every frontend). It applies
// nothing and says so (false) when the change cannot be made alone — no full Apply has
// succeeded since the last error, a map was full then or would be now (what is left out is a
// whole-state decision, see Fit), or a new frontend or id is one another Service holds — and
// the caller applies the whole state instead.
func (p *Programmer) ApplyChanges(changes []ServiceChange) (bool, error) {
	if p.last == nil || p.overlapped || len(p.Status.Dropped) > 0 {
		return false, nil
	}
	var olds, news []Service
	for _, c := range changes {
		olds = append(olds, c.Old...)
		news = append(news, c.New...)
	}
	have, want := encode(olds), encode(news)
	last := p.last
	// Every old entry must be what the maps hold, and every new one free or the change's own.
	if !within(have.services, last.services) || !within(have.names, last.names) ||
		!within(have.backends, last.backends) || !within(have.maglev, last.maglev) ||
		len(want.services) < len(news) ||
		taken(want.services, have.services, last.services) || taken(want.names, have.names, last.names) {
		return false, nil
	}
	t := p.tables()
	caps := t.capacity()
	for _, f := range fill(len(last.services)-len(have.services)+len(want.services), len(last.names)-len(have.names)+len(want.names),
		len(last.backends)-len(have.backends)+len(want.backends), len(last.maglev)-len(have.maglev)+len(want.maglev), caps) {
		if f.Entries > f.Capacity {
			return false, nil
		}
	}
	if err := t.write(have, want, false); err != nil {
		p.last = nil // the maps are in between: the next Apply rewrites everything
		return true, err
	}
	patch(last.services, have.services, want.services)
	patch(last.names, have.names, want.names)
	patch(last.backends, have.backends, want.backends)
	patch(last.maglev, have.maglev, want.maglev)
	p.Status.Fill = fill(len(last.services), len(last.names), len(last.backends), len(last.maglev), caps)
	return true, nil
}

// within says whether every entry of part is in whole, with the same value.
func within[K, V comparable](part, whole map[K]V) bool {
	for k, v := range part {
		if w, ok := whole[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// taken says whether a key of want is held in last by something other than have.
func taken[K comparable, V any](want, have, last map[K]V) bool {
	for k := range want {
		if _, mine := have[k]; mine {
			continue
		}
		if _, held := last[k]; held {
			return true
		}
	}
	return false
}

// patch moves whole from have's entries to want's.
func patch[K comparable, V any](whole, have, want map[K]V) {
	for k := range have {
		delete(whole, k)
	}
	for k, v := range want {
		whole[k] = v
	}
}

// write moves the maps from have to want. Backends are written before the frontends that
// point at them and removed after, so a lookup never finds a slot without its backend; a
// frontend's count only changes once its new slots exist. Room is made first: frontends
// that are gone, and then everything of the ids no frontend will name (nothing points at
// them any more), so a near-full map takes a new Service in the same sync that deletes an
// old one. With full, have is ignored: every entry of want is written and whatever else the
// maps hold is pruned.
func (m tables) write(have, want entries, full bool) error {
	var errs []error
	goneID := func(id uint32) bool { _, ok := want.names[id]; return !ok }
	if full {
		errs = append(errs, prune(m.services, want.services),
			pruneIf(m.backends, func(k programs.SockBackendKey) bool { return goneID(k.Id) }),
			pruneIf(m.names, goneID))
		if m.maglev != nil {
			errs = append(errs, pruneIf(m.maglev, func(k programs.SockMaglevKey) bool { return goneID(k.Id) }))
		}
	} else {
		errs = append(errs, remove(m.services, have.services, want.services),
			removeIf(m.backends, have.backends, func(k programs.SockBackendKey) bool { return goneID(k.Id) }),
			removeIf(m.names, have.names, goneID))
		if m.maglev != nil {
			errs = append(errs, removeIf(m.maglev, have.maglev, func(k programs.SockMaglevKey) bool { return goneID(k.Id) }))
		}
	}
	for k, v := range want.backends {
		if old, ok := have.backends[k]; full || !ok || old != v {
			if err := m.backends.Update(k, v, ebpf.UpdateAny); err != nil {
				errs = append(errs, fmt.Errorf("backend %d/%d: %w", k.Id, k.Slot, err))
			}
		}
	}
	for k, v := range want.names {
		if old, ok := have.names[k]; full || !ok || old != v {
			if err := m.names.Update(k, v, ebpf.UpdateAny); err != nil {
				errs = append(errs, fmt.Errorf("name %d: %w", k, err))
			}
		}
	}
	if m.maglev != nil {
		for k, v := range want.maglev {
			if old, ok := have.maglev[k]; full || !ok || old != v {
				if err := m.maglev.Update(k, v, ebpf.UpdateAny); err != nil {
					errs = append(errs, fmt.Errorf("maglev %d/%d: %w", k.Id, k.Index, err))
				}
			}
		}
	}
	for k, v := range want.services {
		if old, ok := have.services[k]; full || !ok || old != v {
			if err := m.services.Update(k, v, ebpf.UpdateAny); err != nil {
				errs = append(errs, fmt.Errorf("service %s:%d: %w", programs.FromAddr4(k.Addr), programs.FromPort(k.Port), err))
			}
		}
	}
	if full {
		errs = append(errs, prune(m.backends, want.backends), prune(m.names, want.names))
		if m.maglev != nil {
			errs = append(errs, prune(m.maglev, want.maglev))
		}
		return errors.Join(errs...)
	}
	errs = append(errs, remove(m.backends, have.backends, want.backends))
	if m.maglev != nil {
		errs = append(errs, remove(m.maglev, have.maglev, want.maglev))
	}
	return errors.Join(errs...)
}

// removeIf deletes the keys of have for which gone holds.
func removeIf[K comparable, V any](m table, have map[K]V, gone func(K) bool) error {
	var errs []error
	for k := range have {
		if gone(k) {
			if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// pruneIf deletes the keys of m for which gone holds. It walks the keys alone (no value is
// read) and deletes after the walk, so the walk never loses its place.
func pruneIf[K comparable](m table, gone func(K) bool) error {
	var stale []K
	var key, next K
	var from any // nil: the first key
	for {
		err := m.NextKey(from, &next)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			break
		}
		if err != nil {
			return err
		}
		if gone(next) {
			stale = append(stale, next)
		}
		key = next
		from = &key
	}
	var errs []error
	for _, k := range stale {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// remove deletes the keys of have that want lacks.
func remove[K comparable, V any](m table, have, want map[K]V) error {
	return removeIf(m, have, func(k K) bool { _, ok := want[k]; return !ok })
}

// prune deletes the keys of m that want lacks.
func prune[K comparable, V any](m table, want map[K]V) error {
	return pruneIf(m, func(k K) bool { _, ok := want[k]; return !ok })
}

// Entry is one frontend as the maps hold it, for `skiff bpf services|backends`.
type Entry struct {
	Name     string
	ID       uint32
	Frontend string
	Affinity time.Duration
	Backends []string
}

// Dump reads the maps back in Service terms.
func (m Maps) Dump() ([]Entry, error) {
	var out []Entry
	var k programs.SockSvcKey
	var v programs.SockSvcValue
	it := m.Services.Iterate()
	for it.Next(&k, &v) {
		out = append(out, m.entry(k, v))
	}
	return out, it.Err()
}

// Lookup reads one frontend back in Service terms; ok is false when it is not programmed.
func (m Maps) Lookup(frontend netip.AddrPort, proto corev1.Protocol) (e Entry, ok bool, err error) {
	k := programs.SockSvcKey{Addr: programs.Addr4(frontend.Addr()), Port: programs.Port(frontend.Port()), Proto: protoNumber(proto)}
	var v programs.SockSvcValue
	if err := m.Services.Lookup(k, &v); errors.Is(err, ebpf.ErrKeyNotExist) {
		return Entry{}, false, nil
	} else if err != nil {
		return Entry{}, false, err
	}
	return m.entry(k, v), true, nil
}

// IDs reads which id each frontend name has (the names map alone: an agent restart keeps
// the ids its predecessor gave).
func (m Maps) IDs() (map[string]uint32, error) {
	ids := map[string]uint32{}
	var id uint32
	var name programs.SockSvcName
	it := m.Names.Iterate()
	for it.Next(&id, &name) {
		if n := name.String(); n != "" {
			ids[n] = id
		}
	}
	return ids, it.Err()
}

// entry decodes one frontend with its name and backends.
func (m Maps) entry(k programs.SockSvcKey, v programs.SockSvcValue) Entry {
	e := Entry{ID: v.Id, Frontend: fmt.Sprintf("%s:%d/%s", programs.FromAddr4(k.Addr), programs.FromPort(k.Port), protoName(k.Proto))}
	if v.Flags&svcFlagAffinity != 0 {
		e.Affinity = time.Duration(v.AffinityTimeout) * time.Second
	}
	var name programs.SockSvcName
	if err := m.Names.Lookup(v.Id, &name); err == nil {
		e.Name = name.String()
	}
	for slot := uint32(1); slot <= uint32(v.Count); slot++ {
		var be programs.SockBackendValue
		if err := m.Backends.Lookup(programs.SockBackendKey{Id: v.Id, Slot: slot}, &be); err == nil {
			e.Backends = append(e.Backends, fmt.Sprintf("%s:%d", programs.FromAddr4(be.Addr), programs.FromPort(be.Port)))
		} else {
			e.Backends = append(e.Backends, fmt.Sprintf("slot %d missing", slot))
		}
	}
	return e
}

// Socket is one balanced socket: what it asked for and where it went.
type Socket struct {
	Cookie           uint64
	Service, Backend string
}

// ListSockets lists the live balanced sockets; its length is the table's exact occupancy.
func (m Maps) ListSockets() ([]Socket, error) {
	var out []Socket
	var k uint64
	var v programs.SockSockNat
	it := m.Sockets.Iterate()
	for it.Next(&k, &v) {
		out = append(out, Socket{Cookie: k,
			Service: fmt.Sprintf("%s:%d", programs.FromAddr4(v.SvcAddr), programs.FromPort(v.SvcPort)),
			Backend: fmt.Sprintf("%s:%d", programs.FromAddr4(v.BeAddr), programs.FromPort(v.BePort))})
	}
	return out, it.Err()
}

// SocketCount is the exact number of entries in the socket table and its capacity.
func (m Maps) SocketCount() (n int, capacity int, err error) {
	n, err = countKeys[uint64](m.Sockets)
	return n, int(m.Sockets.MaxEntries()), err
}

// countKeys walks a map's keys (no values read): an exact count at the time of the walk.
func countKeys[K any](m *ebpf.Map) (int, error) {
	var k, next K
	n := 0
	err := m.NextKey(nil, &next)
	for err == nil {
		n++
		k = next
		err = m.NextKey(k, &next)
	}
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return n, nil
	}
	return n, err
}

// Flow is one NodePort connection-tracking entry.
type Flow struct {
	Tuple, Rewrite string
	Reverse        bool
	Idle           time.Duration
}

// ConntrackCount is the exact number of NodePort connection-tracking entries and the table's capacity.
func ConntrackCount(ct *ebpf.Map) (int, int, error) {
	n, err := countKeys[programs.NodeportCtKey](ct)
	return n, int(ct.MaxEntries()), err
}

// ListFlows lists the NodePort connection-tracking table.
func ListFlows(ct *ebpf.Map, now time.Duration) ([]Flow, error) {
	var out []Flow
	var k programs.NodeportCtKey
	var v programs.NodeportCtValue
	it := ct.Iterate()
	for it.Next(&k, &v) {
		f := Flow{Tuple: fmt.Sprintf("%s %s:%d -> %s:%d", protoName(k.Proto), programs.FromAddr4(k.Saddr), programs.FromPort(k.Sport), programs.FromAddr4(k.Daddr), programs.FromPort(k.Dport)),
			Reverse: v.Kind == ctReverse, Idle: now - time.Duration(v.LastNs)}
		if f.Reverse {
			f.Rewrite = fmt.Sprintf("src %s:%d", programs.FromAddr4(v.Addr1), programs.FromPort(v.Port1))
			if v.Addr2 != 0 {
				f.Rewrite += fmt.Sprintf(" dst %s:%d", programs.FromAddr4(v.Addr2), programs.FromPort(v.Port2))
			}
		} else {
			f.Rewrite = fmt.Sprintf("dst %s:%d", programs.FromAddr4(v.Addr1), programs.FromPort(v.Port1))
			if v.Port2 != 0 {
				f.Rewrite += fmt.Sprintf(" src <node>:%d", programs.FromPort(v.Port2))
			}
		}
		out = append(out, f)
	}
	return out, it.Err()
}

// GCConntrack deletes entries idle for longer than ttl (the table is an LRU as well, so it
// never overflows; this keeps the exported occupancy meaningful). now is CLOCK_MONOTONIC.
func GCConntrack(ct *ebpf.Map, now, ttl time.Duration) (int, error) {
	var stale []programs.NodeportCtKey
	var k programs.NodeportCtKey
	var v programs.NodeportCtValue
	it := ct.Iterate()
	for it.Next(&k, &v) {
		if now-time.Duration(v.LastNs) > ttl {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return 0, err
	}
	n := 0
	for _, k := range stale {
		if err := ct.Delete(k); err == nil {
			n++
		}
	}
	return n, nil
}
