package programs

import (
	"encoding/binary"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// MapVersion is the layout version of the maps (SKIFF_MAP_VERSION in bpf/lib/skiff.h),
// recorded in skiff_meta so a newer agent knows what it finds pinned.
const MapVersion = 1

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
