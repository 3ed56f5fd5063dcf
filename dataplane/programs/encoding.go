package programs

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// MapVersion is the layout version of the maps (SKIFF_MAP_VERSION in bpf/lib/skiff.h),
// recorded in skiff_meta so a newer agent knows what it finds pinned.
const MapVersion = 2

// Addr4 is an IPv4 address as the kernel hands it to the hooks: the network-order bytes
// read as a native integer.
func Addr4(a netip.Addr) uint32 {
	b := a.As4()
	return binary.NativeEndian.Uint32(b[:])
}

// FromAddr4 undoes Addr4.
func FromAddr4(v uint32) netip.Addr {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// Addr6 is an IPv6 address as the hooks hand it over (bpf_sock_addr.user_ip6): its 16
// network-order bytes as four native words. An IPv4 address becomes its IPv4-mapped form.
func Addr6(a netip.Addr) [4]uint32 {
	b := a.As16()
	var w [4]uint32
	for i := range w {
		w[i] = binary.NativeEndian.Uint32(b[4*i:])
	}
	return w
}

// FromAddr6 undoes Addr6.
func FromAddr6(w [4]uint32) netip.Addr {
	var b [16]byte
	for i, v := range w {
		binary.NativeEndian.PutUint32(b[4*i:], v)
	}
	return netip.AddrFrom16(b)
}

// Port is a port in network order, read as a native integer.
func Port(p uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], p)
	return binary.NativeEndian.Uint16(b[:])
}

// FromPort undoes Port.
func FromPort(v uint16) uint16 {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], v)
	return binary.BigEndian.Uint16(b[:])
}

// CString reads a C char array (bpf2go's []int8) up to its terminating zero.
func CString(chars []int8) string {
	b := make([]byte, 0, len(chars))
	for _, c := range chars {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

// Frontend prints an IPv4 frontend key as address:port/PROTO.
func (k SockSvcKey) Frontend() string {
	return netip.AddrPortFrom(FromAddr4(k.Addr), FromPort(k.Port)).String() + "/" + protoName(k.Proto)
}

// Frontend prints an IPv6 frontend key as [address]:port/PROTO.
func (k SockSvc6Key) Frontend() string {
	return netip.AddrPortFrom(FromAddr6(k.Addr), FromPort(k.Port)).String() + "/" + protoName(k.Proto)
}

// protoName names an IP protocol number as Kubernetes does.
func protoName(n uint8) string {
	switch n {
	case unix.IPPROTO_TCP:
		return "TCP"
	case unix.IPPROTO_UDP:
		return "UDP"
	case unix.IPPROTO_SCTP:
		return "SCTP"
	}
	return strconv.Itoa(int(n))
}

// String is the Service port's name up to its terminating zero.
func (n SockSvcName) String() string { return CString(n.Name[:]) }

// String is the policy's or peer's name up to its terminating zero.
func (n PolicyPolName) String() string { return CString(n.Name[:]) }

// Monotonic is CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns.
func Monotonic() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(ts.Nano())
}
