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
	// Services6 and Backends6 are IPv6's frontends and backends (ids shared with IPv4's: one
	// id space, one names map).
	Services6, Backends6 *ebpf.Map
	// Sockets is the per-socket translation table (skiff's "conntrack" at the socket level),
	// Sockets6 IPv6's.
	Sockets, Sockets6 *ebpf.Map
	// CT is the per-packet connection table of NodePort traffic (set by OpenPinned), CT6
	// IPv6's.
	CT, CT6 *ebpf.Map
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
	services  map[programs.SockSvcKey]programs.SockSvcValue
	backends  map[programs.SockBackendKey]programs.SockBackendValue
	services6 map[programs.SockSvc6Key]programs.SockSvcValue
	backends6 map[programs.SockBackendKey]programs.SockBackend6Value
	names     map[uint32]programs.SockSvcName
	maglev    map[programs.SockMaglevKey]uint32
}

// frontends counts the frontends of both families.
func (e entries) frontends() int { return len(e.services) + len(e.services6) }

func encode(services []Service) entries {
	e := entries{services: map[programs.SockSvcKey]programs.SockSvcValue{}, backends: map[programs.SockBackendKey]programs.SockBackendValue{},
		services6: map[programs.SockSvc6Key]programs.SockSvcValue{}, backends6: map[programs.SockBackendKey]programs.SockBackend6Value{},
		names: map[uint32]programs.SockSvcName{}, maglev: map[programs.SockMaglevKey]uint32{}}
	for _, s := range services {
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
		// A frontend's backends are of its family (Compile makes them so); one of the other
		// family would be a slot the programs cannot use, and is left out.
		v6 := s.Frontend.Addr.Is6()
		if v6 {
			e.services6[programs.SockSvc6Key{Addr: programs.Addr6(s.Frontend.Addr), Port: programs.Port(s.Frontend.Port), Proto: protoNumber(s.Frontend.Proto)}] = val
		} else {
			e.services[programs.SockSvcKey{Addr: programs.Addr4(s.Frontend.Addr), Port: programs.Port(s.Frontend.Port), Proto: protoNumber(s.Frontend.Proto)}] = val
		}
		for i, b := range s.Backends[:n] {
			var flags uint16
			if b.Local {
				flags |= beFlagLocal
			}
			k := programs.SockBackendKey{Id: s.ID, Slot: uint32(i + 1)}
			switch {
			case v6 && b.Addr.Is6():
				e.backends6[k] = programs.SockBackend6Value{Addr: programs.Addr6(b.Addr), Port: programs.Port(b.Port), Flags: flags}
			case !v6 && b.Addr.Is4():
				e.backends[k] = programs.SockBackendValue{Addr: programs.Addr4(b.Addr), Port: programs.Port(b.Port), Flags: flags}
			}
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
	p.overlapped = want.frontends() < len(kept)
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
	if !within(have.services, last.services) || !within(have.services6, last.services6) || !within(have.names, last.names) ||
		!within(have.backends, last.backends) || !within(have.backends6, last.backends6) || !within(have.maglev, last.maglev) ||
		want.frontends() < len(news) ||
		taken(want.services, have.services, last.services) || taken(want.services6, have.services6, last.services6) ||
		taken(want.names, have.names, last.names) {
		return false, nil
	}
	t := p.tables()
	caps := t.capacity()
	after := counts{
		services: len(last.services) - len(have.services) + len(want.services), names: len(last.names) - len(have.names) + len(want.names),
		backends: len(last.backends) - len(have.backends) + len(want.backends), maglev: len(last.maglev) - len(have.maglev) + len(want.maglev),
		services6: len(last.services6) - len(have.services6) + len(want.services6), backends6: len(last.backends6) - len(have.backends6) + len(want.backends6),
	}
	for _, f := range fill(after, caps) {
		if f.Entries > f.Capacity {
			return false, nil
		}
	}
	if err := t.write(have, want, false); err != nil {
		p.last = nil // the maps are in between: the next Apply rewrites everything
		return true, err
	}
	patch(last.services, have.services, want.services)
	patch(last.services6, have.services6, want.services6)
	patch(last.names, have.names, want.names)
	patch(last.backends, have.backends, want.backends)
	patch(last.backends6, have.backends6, want.backends6)
	patch(last.maglev, have.maglev, want.maglev)
	p.Status.Fill = fill(last.counts(), caps)
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
// maps hold is pruned. A map the programs lack (nil: no Maglev map, no IPv6 maps) is skipped
// when nothing is to be written to it, and named in an error when something is.
func (m tables) write(have, want entries, full bool) error {
	goneID := func(id uint32) bool { _, ok := want.names[id]; return !ok }
	goneBackend := func(k programs.SockBackendKey) bool { return goneID(k.Id) }
	goneMaglev := func(k programs.SockMaglevKey) bool { return goneID(k.Id) }
	svc4 := func(k programs.SockSvcKey) string {
		return fmt.Sprintf("service %s:%d", programs.FromAddr4(k.Addr), programs.FromPort(k.Port))
	}
	svc6 := func(k programs.SockSvc6Key) string {
		return fmt.Sprintf("service [%s]:%d", programs.FromAddr6(k.Addr), programs.FromPort(k.Port))
	}
	be := func(k programs.SockBackendKey) string { return fmt.Sprintf("backend %d/%d", k.Id, k.Slot) }
	mg := func(k programs.SockMaglevKey) string { return fmt.Sprintf("maglev %d/%d", k.Id, k.Index) }
	name := func(k uint32) string { return fmt.Sprintf("name %d", k) }

	var errs []error
	// Make room: frontends that are gone, then whatever belonged to ids no frontend names.
	if full {
		errs = append(errs, prune(m.services, want.services), prune(m.services6, want.services6),
			pruneIf(m.backends, goneBackend), pruneIf(m.backends6, goneBackend), pruneIf(m.names, goneID), pruneIf(m.maglev, goneMaglev))
	} else {
		errs = append(errs, remove(m.services, have.services, want.services), remove(m.services6, have.services6, want.services6),
			removeIf(m.backends, have.backends, goneBackend), removeIf(m.backends6, have.backends6, goneBackend),
			removeIf(m.names, have.names, goneID), removeIf(m.maglev, have.maglev, goneMaglev))
	}
	// Backends, names and lookup tables before the frontends that point at them.
	errs = append(errs, upsert(m.backends, "skiff_backends", have.backends, want.backends, full, be),
		upsert(m.backends6, "skiff_backends6", have.backends6, want.backends6, full, be),
		upsert(m.names, "skiff_svc_names", have.names, want.names, full, name))
	if m.maglev != nil { // without one, Maglev frontends fall back to random picks
		errs = append(errs, upsert(m.maglev, "skiff_maglev", have.maglev, want.maglev, full, mg))
	}
	errs = append(errs,
		upsert(m.services, "skiff_services", have.services, want.services, full, svc4),
		upsert(m.services6, "skiff_services6", have.services6, want.services6, full, svc6))
	// Slots no frontend counts any more.
	if full {
		errs = append(errs, prune(m.backends, want.backends), prune(m.backends6, want.backends6), prune(m.names, want.names), prune(m.maglev, want.maglev))
	} else {
		errs = append(errs, remove(m.backends, have.backends, want.backends), remove(m.backends6, have.backends6, want.backends6),
			remove(m.maglev, have.maglev, want.maglev))
	}
	return errors.Join(errs...)
}

// upsert writes the entries of want that have lacks or holds with another value (all of them
// with full) to m, which is called mapName; what names a key in an error.
func upsert[K, V comparable](m table, mapName string, have, want map[K]V, full bool, what func(K) string) error {
	if m == nil {
		if len(want) > 0 {
			return fmt.Errorf("%d entries for %s, which the loaded programs lack", len(want), mapName)
		}
		return nil
	}
	var errs []error
	for k, v := range want {
		if old, ok := have[k]; full || !ok || old != v {
			if err := m.Update(k, v, ebpf.UpdateAny); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", what(k), err))
			}
		}
	}
	return errors.Join(errs...)
}

// removeIf deletes the keys of have for which gone holds (none from a missing map).
func removeIf[K comparable, V any](m table, have map[K]V, gone func(K) bool) error {
	if m == nil {
		return nil
	}
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
// read) and deletes after the walk, so the walk never loses its place. A missing map has
// nothing to prune.
func pruneIf[K comparable](m table, gone func(K) bool) error {
	if m == nil {
		return nil
	}
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

// Dump reads the maps back in Service terms, IPv4's frontends and then IPv6's.
func (m Maps) Dump() ([]Entry, error) {
	var out []Entry
	var k programs.SockSvcKey
	var v programs.SockSvcValue
	it := m.Services.Iterate()
	for it.Next(&k, &v) {
		out = append(out, m.entry(k.Frontend(), false, v))
	}
	if err := it.Err(); err != nil || m.Services6 == nil {
		return out, err
	}
	var k6 programs.SockSvc6Key
	it = m.Services6.Iterate()
	for it.Next(&k6, &v) {
		out = append(out, m.entry(k6.Frontend(), true, v))
	}
	return out, it.Err()
}

// Lookup reads one frontend back in Service terms; ok is false when it is not programmed.
func (m Maps) Lookup(frontend netip.AddrPort, proto corev1.Protocol) (e Entry, ok bool, err error) {
	var v programs.SockSvcValue
	var fe string
	addr := frontend.Addr().Unmap()
	if addr.Is4() {
		k := programs.SockSvcKey{Addr: programs.Addr4(addr), Port: programs.Port(frontend.Port()), Proto: protoNumber(proto)}
		err, fe = m.Services.Lookup(k, &v), k.Frontend()
	} else {
		if m.Services6 == nil {
			return Entry{}, false, nil
		}
		k := programs.SockSvc6Key{Addr: programs.Addr6(addr), Port: programs.Port(frontend.Port()), Proto: protoNumber(proto)}
		err, fe = m.Services6.Lookup(k, &v), k.Frontend()
	}
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return Entry{}, false, nil
	} else if err != nil {
		return Entry{}, false, err
	}
	return m.entry(fe, addr.Is6(), v), true, nil
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

// entry decodes one frontend (as Frontend prints it; v6: an IPv6 one, whose backends are in
// Backends6) with its name and backends.
func (m Maps) entry(frontend string, v6 bool, v programs.SockSvcValue) Entry {
	e := Entry{ID: v.Id, Frontend: frontend}
	if v.Flags&svcFlagAffinity != 0 {
		e.Affinity = time.Duration(v.AffinityTimeout) * time.Second
	}
	var name programs.SockSvcName
	if err := m.Names.Lookup(v.Id, &name); err == nil {
		e.Name = name.String()
	}
	for slot := uint32(1); slot <= uint32(v.Count); slot++ {
		k := programs.SockBackendKey{Id: v.Id, Slot: slot}
		var err error
		var backend string
		if v6 {
			var be programs.SockBackend6Value
			if m.Backends6 == nil {
				err = ebpf.ErrKeyNotExist
			} else if err = m.Backends6.Lookup(k, &be); err == nil {
				backend = netip.AddrPortFrom(programs.FromAddr6(be.Addr), programs.FromPort(be.Port)).String()
			}
		} else {
			var be programs.SockBackendValue
			if err = m.Backends.Lookup(k, &be); err == nil {
				backend = netip.AddrPortFrom(programs.FromAddr4(be.Addr), programs.FromPort(be.Port)).String()
			}
		}
		if err != nil {
			backend = fmt.Sprintf("slot %d missing", slot)
		}
		e.Backends = append(e.Backends, backend)
	}
	return e
}

// Socket is one balanced socket: what it asked for and where it went.
type Socket struct {
	Cookie           uint64
	Service, Backend string
}

// ListSockets lists the live balanced sockets of both families; its length is the tables'
// exact occupancy.
func (m Maps) ListSockets() ([]Socket, error) {
	var out []Socket
	var k uint64
	var v programs.SockSockNat
	it := m.Sockets.Iterate()
	for it.Next(&k, &v) {
		out = append(out, Socket{Cookie: k,
			Service: netip.AddrPortFrom(programs.FromAddr4(v.SvcAddr), programs.FromPort(v.SvcPort)).String(),
			Backend: netip.AddrPortFrom(programs.FromAddr4(v.BeAddr), programs.FromPort(v.BePort)).String()})
	}
	if err := it.Err(); err != nil || m.Sockets6 == nil {
		return out, err
	}
	var v6 programs.SockSockNat6
	it = m.Sockets6.Iterate()
	for it.Next(&k, &v6) {
		out = append(out, Socket{Cookie: k,
			Service: netip.AddrPortFrom(programs.FromAddr6(v6.SvcAddr), programs.FromPort(v6.SvcPort)).String(),
			Backend: netip.AddrPortFrom(programs.FromAddr6(v6.BeAddr), programs.FromPort(v6.BePort)).String()})
	}
	return out, it.Err()
}

// SocketCount is the exact number of entries in the socket tables (both families) and
// their capacity.
func (m Maps) SocketCount() (n int, capacity int, err error) {
	n, err = countKeys[uint64](m.Sockets)
	capacity = int(m.Sockets.MaxEntries())
	if err != nil || m.Sockets6 == nil {
		return n, capacity, err
	}
	n6, err := countKeys[uint64](m.Sockets6)
	return n + n6, capacity + int(m.Sockets6.MaxEntries()), err
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
	// Packets and Bytes are those of the entry's direction since it was made.
	Packets, Bytes uint64
}

// ConntrackCount is the exact number of NodePort connection-tracking entries of both families
// (ct6 nil: IPv4's alone) and the tables' capacity.
func ConntrackCount(ct, ct6 *ebpf.Map) (int, int, error) {
	n, err := countKeys[programs.NodeportCtKey](ct)
	capacity := int(ct.MaxEntries())
	if err != nil || ct6 == nil {
		return n, capacity, err
	}
	n6, err := countKeys[programs.NodeportCt6Key](ct6)
	return n + n6, capacity + int(ct6.MaxEntries()), err
}

// ListFlows lists the NodePort connection-tracking tables (ct6 nil: IPv4's alone).
func ListFlows(ct, ct6 *ebpf.Map, now time.Duration) ([]Flow, error) {
	var out []Flow
	var k programs.NodeportCtKey
	var v programs.NodeportCtValue
	it := ct.Iterate()
	for it.Next(&k, &v) {
		f := flow(k.Proto, programs.FromAddr4(k.Saddr), programs.FromAddr4(k.Daddr), k.Sport, k.Dport, v.Kind == ctReverse, now-time.Duration(v.LastNs),
			programs.FromAddr4(v.Addr1), programs.FromAddr4(v.Addr2), v.Addr2 != 0, v.Port1, v.Port2)
		f.Packets, f.Bytes = v.Packets, v.Bytes
		out = append(out, f)
	}
	if err := it.Err(); err != nil || ct6 == nil {
		return out, err
	}
	var k6 programs.NodeportCt6Key
	var v6 programs.NodeportCt6Value
	it = ct6.Iterate()
	for it.Next(&k6, &v6) {
		f := flow(k6.Proto, programs.FromAddr6(k6.Saddr), programs.FromAddr6(k6.Daddr), k6.Sport, k6.Dport, v6.Kind == ctReverse, now-time.Duration(v6.LastNs),
			programs.FromAddr6(v6.Addr1), programs.FromAddr6(v6.Addr2), v6.Addr2 != [4]uint32{}, v6.Port1, v6.Port2)
		f.Packets, f.Bytes = v6.Packets, v6.Bytes
		out = append(out, f)
	}
	return out, it.Err()
}

// flow prints one connection-tracking entry (ports in network order, as the tables hold them).
func flow(proto uint8, saddr, daddr netip.Addr, sport, dport uint16, reverse bool, idle time.Duration, addr1, addr2 netip.Addr, hasAddr2 bool, port1, port2 uint16) Flow {
	ap := func(a netip.Addr, p uint16) string { return netip.AddrPortFrom(a, programs.FromPort(p)).String() }
	f := Flow{Tuple: fmt.Sprintf("%s %s -> %s", protoName(proto), ap(saddr, sport), ap(daddr, dport)), Reverse: reverse, Idle: idle}
	if reverse {
		f.Rewrite = "src " + ap(addr1, port1)
		if hasAddr2 {
			f.Rewrite += " dst " + ap(addr2, port2)
		}
	} else {
		f.Rewrite = "dst " + ap(addr1, port1)
		if port2 != 0 {
			f.Rewrite += fmt.Sprintf(" src <node>:%d", programs.FromPort(port2))
		}
	}
	return f
}

// GCConntrack deletes entries idle for longer than ttl from both families' tables (ct6 nil:
// IPv4's alone). The tables are LRUs as well, so they never overflow; this keeps the exported
// occupancy meaningful. now is CLOCK_MONOTONIC.
func GCConntrack(ct, ct6 *ebpf.Map, now, ttl time.Duration) (int, error) {
	n, err := gcTable[programs.NodeportCtKey](ct, now, ttl, func(v programs.NodeportCtValue) uint64 { return v.LastNs })
	if err != nil || ct6 == nil {
		return n, err
	}
	n6, err := gcTable[programs.NodeportCt6Key](ct6, now, ttl, func(v programs.NodeportCt6Value) uint64 { return v.LastNs })
	return n + n6, err
}

// gcTable is GCConntrack for one table with keys K and values V (last reads a value's time).
func gcTable[K comparable, V any](ct *ebpf.Map, now, ttl time.Duration, last func(V) uint64) (int, error) {
	var stale []K
	var k K
	var v V
	it := ct.Iterate()
	for it.Next(&k, &v) {
		if now-time.Duration(last(v)) > ttl {
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
