package loader

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/dataplane/programs"
	"github.com/skiff-sh/skiff/dataplane/services"
)

// packet6 is an Ethernet + IPv6 + TCP SYN (or UDP) frame with a valid checksum.
func packet6(src, dst netip.AddrPort, udp bool) []byte {
	l4len, proto := 20, byte(6)
	if udp {
		l4len, proto = 8+4, 17
	}
	b := make([]byte, 14+40+l4len)
	copy(b[0:6], []byte{2, 0, 0, 0, 0, 2})  // destination MAC: this node
	copy(b[6:12], []byte{2, 0, 0, 0, 0, 1}) // source MAC: the client
	binary.BigEndian.PutUint16(b[12:], 0x86dd)
	ip := b[14:54]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(l4len))
	ip[6], ip[7] = proto, 64
	s16, d16 := src.Addr().As16(), dst.Addr().As16()
	copy(ip[8:24], s16[:])
	copy(ip[24:40], d16[:])
	l4 := b[54:]
	binary.BigEndian.PutUint16(l4[0:], src.Port())
	binary.BigEndian.PutUint16(l4[2:], dst.Port())
	if udp {
		binary.BigEndian.PutUint16(l4[4:], uint16(l4len))
		copy(l4[8:], "ping")
		binary.BigEndian.PutUint16(l4[6:], csum6(ip, l4, 6))
	} else {
		binary.BigEndian.PutUint32(l4[4:], 1000) // the client's sequence number
		l4[12] = 5 << 4
		l4[13] = 0x02 // SYN
		binary.BigEndian.PutUint16(l4[14:], 65535)
		binary.BigEndian.PutUint16(l4[16:], csum6(ip, l4, 16))
	}
	return b
}

// csum6 is the upper-layer checksum of l4 under ip's pseudo-header, with the checksum field
// at off taken as zero.
func csum6(ip, l4 []byte, off int) uint16 {
	var sum uint32
	for i := 8; i < 40; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	sum += uint32(len(l4)) + uint32(ip[6])
	c := append([]byte(nil), l4...)
	c[off], c[off+1] = 0, 0
	return csum(c, sum)
}

// decode6 returns an IPv6 TCP/UDP frame's addresses and whether its checksum holds.
func decode6(t *testing.T, b []byte) (src, dst netip.AddrPort, ok bool) {
	t.Helper()
	ip, l4 := b[14:54], b[54:]
	src = netip.AddrPortFrom(netip.AddrFrom16([16]byte(ip[8:24])), binary.BigEndian.Uint16(l4[0:]))
	dst = netip.AddrPortFrom(netip.AddrFrom16([16]byte(ip[24:40])), binary.BigEndian.Uint16(l4[2:]))
	off := 16
	if ip[6] == 17 {
		off = 6
	}
	return src, dst, binary.BigEndian.Uint16(l4[off:]) == csum6(ip, l4, off)
}

var (
	npClient6 = netip.MustParseAddrPort("[2001:2::fe]:40000")
	nodeFE6   = netip.MustParseAddrPort("[2001:2::2]:30080")
	localBE6  = netip.MustParseAddrPort("[fd00:10:244:1::5]:8080")
	farBE6    = netip.MustParseAddrPort("[fd00:10:244:2::7]:8080")
)

// TestPrivilegedNodePortPrograms6 runs the NodePort programs on IPv6 frames with
// BPF_PROG_RUN, as TestPrivilegedNodePortPrograms does on IPv4's: what is not a frontend
// (neighbour discovery above all) passes untouched; a frontend without endpoints answers TCP
// with a RST and UDP with an ICMPv6 port unreachable from the frontend; a local backend gets
// the packet with the client's address kept and its reply is restored at egress; a remote one
// gets it SNATed to the node's IPv6 address, and the reply is restored at ingress; checksums
// hold throughout; the connection table lists and collects IPv6 flows.
func TestPrivilegedNodePortPrograms6(t *testing.T) {
	objs, maps := nodeportObjects(t, "unit6")
	apply := func(svcs ...services.Service) {
		t.Helper()
		if err := maps.Apply(svcs); err != nil {
			t.Fatal(err)
		}
	}
	fe := services.Frontend{Addr: nodeFE6.Addr(), Port: nodeFE6.Port(), Proto: "TCP"}

	t.Run("not a frontend, and neighbour discovery: untouched", func(t *testing.T) {
		apply()
		in := packet6(npClient6, netip.MustParseAddrPort("[2001:2::2]:22"), false)
		if ret, out := run(t, objs.SkiffNodeportIngress, in); ret != tcActOK || string(out) != string(in) {
			t.Errorf("TCP to port 22: verdict %d, changed=%v", ret, string(out) != string(in))
		}
		ns := packet6(npClient6, nodeFE6, true)
		ns[14+6] = 58 // ICMPv6
		ns[54] = 135  // neighbour solicitation
		if ret, out := run(t, objs.SkiffNodeportIngress, ns); ret != tcActOK || string(out) != string(ns) {
			t.Errorf("neighbour solicitation: verdict %d, changed=%v", ret, string(out) != string(ns))
		}
	})
	t.Run("no endpoints: TCP gets a RST, UDP an ICMPv6 port unreachable", func(t *testing.T) {
		apply(services.Service{Name: "empty", ID: 5, Frontend: fe}, services.Service{Name: "empty-udp", ID: 6, Frontend: services.Frontend{Addr: nodeFE6.Addr(), Port: nodeFE6.Port(), Proto: "UDP"}})
		ret, out := run(t, objs.SkiffNodeportIngress, packet6(npClient6, nodeFE6, false))
		if len(out) < 74 {
			t.Fatalf("RST: verdict %d, %d bytes", ret, len(out))
		}
		out = out[:74]
		src, dst, ok := decode6(t, out)
		flags, ack := out[54+13], binary.BigEndian.Uint32(out[54+8:])
		if ret != tcActRedirect || src != nodeFE6 || dst != npClient6 || !ok || flags != 0x14 || ack != 1001 ||
			binary.BigEndian.Uint16(out[14+4:]) != 20 || out[0] != 2 || out[5] != 1 || out[11] != 2 {
			t.Errorf("verdict %d, %s -> %s, checksum ok=%v, flags %#x, ack %d, frame % x", ret, src, dst, ok, flags, ack, out)
		}
		dgram := packet6(npClient6, nodeFE6, true)
		ret, out = run(t, objs.SkiffNodeportIngress, dgram)
		if ret != tcActRedirect || len(out) < 14+40+8+48 {
			t.Fatalf("UDP verdict %d, %d bytes, want a redirected ICMPv6 reply", ret, len(out))
		}
		ip, icmp := out[14:54], out[54:54+56]
		if ip[0]>>4 != 6 || ip[6] != 58 || binary.BigEndian.Uint16(ip[4:]) != 56 ||
			netip.AddrFrom16([16]byte(ip[8:24])) != nodeFE6.Addr() || netip.AddrFrom16([16]byte(ip[24:40])) != npClient6.Addr() {
			t.Errorf("ICMPv6 reply's IPv6 header: % x", ip)
		}
		if icmp[0] != 1 || icmp[1] != 4 || binary.BigEndian.Uint16(icmp[2:]) != csum6(ip, icmp, 2) || string(icmp[8:56]) != string(dgram[14:62]) {
			t.Errorf("ICMPv6 header or quote: % x (datagram % x)", icmp, dgram[14:62])
		}
		apply(services.Service{Name: "etp-local", ID: 7, Frontend: fe, ExternalLocal: true})
		if ret, _ := run(t, objs.SkiffNodeportIngress, packet6(npClient6, nodeFE6, false)); ret != tcActShot {
			t.Errorf("TCP to an externalTrafficPolicy Local NodePort without local endpoints: verdict %d, want drop", ret)
		}
	})
	t.Run("local backend: DNAT only, client kept, reply restored at egress", func(t *testing.T) {
		apply(services.Service{Name: "web", ID: 9, Frontend: fe, Backends: []services.Backend{{Addr: localBE6.Addr(), Port: localBE6.Port(), Local: true}}})
		for _, udp := range []bool{false, true} {
			fe := fe
			if udp {
				fe.Proto = "UDP"
				apply(services.Service{Name: "web-udp", ID: 10, Frontend: fe, Backends: []services.Backend{{Addr: localBE6.Addr(), Port: localBE6.Port(), Local: true}}})
			}
			ret, out := run(t, objs.SkiffNodeportIngress, packet6(npClient6, nodeFE6, udp))
			src, dst, ok := decode6(t, out)
			if ret != tcActOK || src != npClient6 || dst != localBE6 || !ok {
				t.Fatalf("udp=%v ingress: verdict %d, %s -> %s, checksum ok=%v", udp, ret, src, dst, ok)
			}
			ret, out = run(t, objs.SkiffNodeportEgress, packet6(localBE6, npClient6, udp))
			src, dst, ok = decode6(t, out)
			if ret != tcActOK || src != nodeFE6 || dst != npClient6 || !ok {
				t.Errorf("udp=%v egress reply: verdict %d, %s -> %s, checksum ok=%v", udp, ret, src, dst, ok)
			}
		}
	})
	t.Run("remote backend: DNAT and SNAT to the node's IPv6 address, reply restored at ingress", func(t *testing.T) {
		node := netip.MustParseAddr("2001:2::7")
		if err := objs.SkiffNpSnat6.Put(uint32(0), programs.NodeportSnat6{Addr: programs.Addr6(node)}); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = objs.SkiffNpSnat6.Put(uint32(0), programs.NodeportSnat6{}) }()
		c2 := netip.MustParseAddrPort("[2001:2::fe]:40001")
		apply(services.Service{Name: "web", ID: 9, Frontend: fe, Backends: []services.Backend{{Addr: farBE6.Addr(), Port: farBE6.Port()}}})
		ret, out := run(t, objs.SkiffNodeportIngress, packet6(c2, nodeFE6, false))
		src, dst, ok := decode6(t, out)
		if (ret != tcActRedirect && ret != tcActShot) || src.Addr() != node || src.Port() < 61000 || src.Port() >= 65000 || dst != farBE6 || !ok {
			t.Fatalf("ingress: verdict %d, %s -> %s, checksum ok=%v", ret, src, dst, ok)
		}
		_, out = run(t, objs.SkiffNodeportIngress, packet6(farBE6, src, false))
		rs, rd, ok := decode6(t, out)
		if rs != nodeFE6 || rd != c2 || !ok {
			t.Errorf("reply: %s -> %s, checksum ok=%v", rs, rd, ok)
		}
		flows, err := services.ListFlows(objs.SkiffCt, objs.SkiffCt6, programs.Monotonic())
		var six []string
		for _, f := range flows {
			if strings.Contains(f.Tuple, "[") {
				six = append(six, f.Tuple+" "+f.Rewrite)
			}
		}
		want := "TCP [" + c2.Addr().String() + "]:40001 -> [2001:2::2]:30080 dst [fd00:10:244:2::7]:8080 src <node>:"
		if err != nil || !strings.Contains(strings.Join(six, "\n"), want) {
			t.Errorf("IPv6 flows %v (%v), want one like %q", six, err, want)
		}
		n, _, err := services.ConntrackCount(objs.SkiffCt, objs.SkiffCt6)
		if removed, gcErr := services.GCConntrack(objs.SkiffCt, objs.SkiffCt6, programs.Monotonic()+2*time.Hour, time.Hour); err != nil || gcErr != nil || removed != n || n < 2 {
			t.Errorf("GC of %d entries removed %d: %v %v", n, removed, err, gcErr)
		}
	})
}
