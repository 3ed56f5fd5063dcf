package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	corev1 "k8s.io/api/core/v1"
)

// MapVersion is the layout version of the maps (SKIFF_MAP_VERSION in bpf/lib/skiff.h).
const MapVersion = 1

const (
	protoTCP = 6
	protoUDP = 17
	// svcFlagAffinity is SVC_FLAG_AFFINITY.
	svcFlagAffinity = 1
)

// Maps are the pinned maps the programs read.
type Maps struct {
	Services, Backends, Names *ebpf.Map
	// Sockets is the per-socket translation table (skiff's "conntrack" at the socket level).
	Sockets *ebpf.Map
}

// be32 is an IPv4 address as the kernel hands it to the hooks: the network-order bytes read
// as a native integer.
func be32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.NativeEndian.Uint32(b[:])
}

func fromBe32(v uint32) netip.Addr {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// be16 is a port in network order, read as a native integer.
func be16(p uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], p)
	return binary.NativeEndian.Uint16(b[:])
}

func fromBe16(v uint16) uint16 {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], v)
	return binary.BigEndian.Uint16(b[:])
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
	services map[sockSvcKey]sockSvcValue
	backends map[sockBackendKey]sockBackendValue
	names    map[uint32]sockSvcName
}

func encode(services []Service) entries {
	e := entries{services: map[sockSvcKey]sockSvcValue{}, backends: map[sockBackendKey]sockBackendValue{}, names: map[uint32]sockSvcName{}}
	for _, s := range services {
		key := sockSvcKey{Addr: be32(s.Frontend.Addr), Port: be16(s.Frontend.Port), Proto: protoNumber(s.Frontend.Proto)}
		n := len(s.Backends)
		if n > 65535 {
			n = 65535
		}
		val := sockSvcValue{Id: s.ID, Count: uint16(n)}
		if s.Affinity > 0 {
			val.Flags |= svcFlagAffinity
			val.AffinityTimeout = uint32(s.Affinity / time.Second)
		}
		e.services[key] = val
		for i, b := range s.Backends[:n] {
			e.backends[sockBackendKey{Id: s.ID, Slot: uint32(i + 1)}] = sockBackendValue{Addr: be32(b.Addr), Port: be16(b.Port)}
		}
		var name sockSvcName
		for i := 0; i < len(s.Name) && i < len(name.Name)-1; i++ {
			name.Name[i] = int8(s.Name[i])
		}
		e.names[s.ID] = name
	}
	return e
}

// Apply makes the maps hold exactly services. Backends are written before the frontends that
// point at them and removed after, so a lookup never finds a slot without its backend; a
// frontend's count only changes once its new slots exist.
func (m Maps) Apply(services []Service) error {
	want := encode(services)
	var errs []error
	for k, v := range want.backends {
		if err := m.Backends.Update(k, v, ebpf.UpdateAny); err != nil {
			errs = append(errs, fmt.Errorf("backend %d/%d: %w", k.Id, k.Slot, err))
		}
	}
	for k, v := range want.names {
		if err := m.Names.Update(k, v, ebpf.UpdateAny); err != nil {
			errs = append(errs, fmt.Errorf("name %d: %w", k, err))
		}
	}
	for k, v := range want.services {
		if err := m.Services.Update(k, v, ebpf.UpdateAny); err != nil {
			errs = append(errs, fmt.Errorf("service %s:%d: %w", fromBe32(k.Addr), fromBe16(k.Port), err))
		}
	}
	errs = append(errs, prune(m.Services, want.services), prune(m.Backends, want.backends), prune(m.Names, want.names))
	return errors.Join(errs...)
}

// prune deletes the keys of m that want lacks.
func prune[K comparable, V any](m *ebpf.Map, want map[K]V) error {
	var stale []K
	var k K
	var v V
	it := m.Iterate()
	for it.Next(&k, &v) {
		if _, ok := want[k]; !ok {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	var errs []error
	for _, k := range stale {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
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
	var k sockSvcKey
	var v sockSvcValue
	it := m.Services.Iterate()
	for it.Next(&k, &v) {
		e := Entry{ID: v.Id, Frontend: fmt.Sprintf("%s:%d/%s", fromBe32(k.Addr), fromBe16(k.Port), protoName(k.Proto))}
		if v.Flags&svcFlagAffinity != 0 {
			e.Affinity = time.Duration(v.AffinityTimeout) * time.Second
		}
		var name sockSvcName
		if err := m.Names.Lookup(v.Id, &name); err == nil {
			b := make([]byte, 0, len(name.Name))
			for _, c := range name.Name {
				if c == 0 {
					break
				}
				b = append(b, byte(c))
			}
			e.Name = string(b)
		}
		for slot := uint32(1); slot <= uint32(v.Count); slot++ {
			var be sockBackendValue
			if err := m.Backends.Lookup(sockBackendKey{Id: v.Id, Slot: slot}, &be); err == nil {
				e.Backends = append(e.Backends, fmt.Sprintf("%s:%d", fromBe32(be.Addr), fromBe16(be.Port)))
			} else {
				e.Backends = append(e.Backends, fmt.Sprintf("slot %d missing", slot))
			}
		}
		out = append(out, e)
	}
	return out, it.Err()
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
	var v sockSockNat
	it := m.Sockets.Iterate()
	for it.Next(&k, &v) {
		out = append(out, Socket{Cookie: k,
			Service: fmt.Sprintf("%s:%d", fromBe32(v.SvcAddr), fromBe16(v.SvcPort)),
			Backend: fmt.Sprintf("%s:%d", fromBe32(v.BeAddr), fromBe16(v.BePort))})
	}
	return out, it.Err()
}

// SocketCount is the exact number of entries in the socket table (keys only, no values read)
// and its capacity.
func (m Maps) SocketCount() (n int, capacity int, err error) {
	var k uint64
	var next uint64
	first := true
	for {
		var err error
		if first {
			err = m.Sockets.NextKey(nil, &next)
			first = false
		} else {
			err = m.Sockets.NextKey(k, &next)
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			break
		}
		if err != nil {
			return n, int(m.Sockets.MaxEntries()), err
		}
		n++
		k = next
	}
	return n, int(m.Sockets.MaxEntries()), nil
}
