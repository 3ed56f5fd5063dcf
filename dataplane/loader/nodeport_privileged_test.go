package loader

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/skiff-sh/skiff/dataplane/programs"
	"github.com/skiff-sh/skiff/dataplane/services"
)

// Packets built here, run through the tc programs with BPF_PROG_RUN, and checked byte by byte.

const (
	tcActOK       = 0
	tcActShot     = 2
	tcActRedirect = 7
)

func csum(b []byte, initial uint32) uint16 {
	sum := initial
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = (sum >> 16) + (sum & 0xffff)
	}
	return ^uint16(sum)
}

// packet is an Ethernet + IPv4 + TCP (or UDP) frame with valid checksums.
func packet(src, dst netip.AddrPort, udp bool, zeroUDPCsum bool) []byte {
	l4len := 20
	proto := byte(6)
	if udp {
		l4len, proto = 8+4, 17
	}
	b := make([]byte, 14+20+l4len)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+l4len))
	ip[8], ip[9] = 64, proto
	s4, d4 := src.Addr().As4(), dst.Addr().As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	binary.BigEndian.PutUint16(ip[10:], csum(ip, 0))
	l4 := b[34:]
	binary.BigEndian.PutUint16(l4[0:], src.Port())
	binary.BigEndian.PutUint16(l4[2:], dst.Port())
	if udp {
		binary.BigEndian.PutUint16(l4[4:], uint16(l4len))
		copy(l4[8:], "ping")
	} else {
		l4[12] = 5 << 4
		l4[13] = 0x02 // SYN
		binary.BigEndian.PutUint16(l4[14:], 65535)
	}
	if !(udp && zeroUDPCsum) {
		off := 16
		if udp {
			off = 6
		}
		binary.BigEndian.PutUint16(l4[off:], pseudoCsum(ip, l4))
	}
	return b
}

func pseudoCsum(ip, l4 []byte) uint16 {
	var sum uint32
	for i := 12; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	sum += uint32(ip[9]) + uint32(len(l4))
	c := make([]byte, len(l4))
	copy(c, l4)
	if ip[9] == 6 {
		c[16], c[17] = 0, 0
	} else {
		c[6], c[7] = 0, 0
	}
	return csum(c, sum)
}

// decode returns a frame's addresses and whether its checksums hold.
func decode(t *testing.T, b []byte) (src, dst netip.AddrPort, ok bool) {
	t.Helper()
	ip, l4 := b[14:34], b[34:]
	src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[12:16])), binary.BigEndian.Uint16(l4[0:]))
	dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[16:20])), binary.BigEndian.Uint16(l4[2:]))
	ok = csum(ip, 0) == 0
	off := 16
	if ip[9] == 17 {
		off = 6
	}
	if got := binary.BigEndian.Uint16(l4[off:]); !(ip[9] == 17 && got == 0) {
		ok = ok && got == pseudoCsum(ip, l4)
	}
	return src, dst, ok
}

func run(t *testing.T, p *ebpf.Program, in []byte) (uint32, []byte) {
	t.Helper()
	opts := &ebpf.RunOptions{Data: in, DataOut: make([]byte, len(in)+256)}
	ret, err := p.Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	return ret, opts.DataOut // resliced to what the program left (a reply may be longer or shorter)
}

var (
	npClient = netip.MustParseAddrPort("198.18.0.254:40000")
	nodeFE   = netip.MustParseAddrPort("198.18.0.2:30080")
	localBE  = netip.MustParseAddrPort("10.244.1.5:8080")
	farBE    = netip.MustParseAddrPort("10.244.2.7:8080")
)

// nodeportObjects loads the NodePort programs alone (no attachment) with their maps pinned
// under a directory named for name and this process, removed when the test ends; it skips
// under -short and needs root.
func nodeportObjects(t *testing.T, name string) (*programs.NodeportObjects, services.Maps) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs root, BPF and network namespaces: make unit (-short) skips it, make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (every machine here has it)")
	}
	pinDir := filepath.Join(BPFFS, "skiff", fmt.Sprintf("%s-%d", name, os.Getpid()))
	if err := MountBPFFS(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(pinDir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Remove(pinDir) })
	spec, err := programs.LoadNodeport()
	if err != nil {
		t.Fatal(err)
	}
	var objs programs.NodeportObjects
	if err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: pinDir}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { objs.Close() })
	return &objs, services.Maps{Services: objs.SkiffServices, Backends: objs.SkiffBackends, Services6: objs.SkiffServices6, Backends6: objs.SkiffBackends6,
		Names: objs.SkiffSvcNames, Maglev: objs.SkiffMaglev, CT: objs.SkiffCt, CT6: objs.SkiffCt6}
}

func TestPrivilegedNodePortPrograms(t *testing.T) {
	objs, maps := nodeportObjects(t, "unit")
	apply := func(svcs ...services.Service) {
		t.Helper()
		if err := maps.Apply(svcs); err != nil {
			t.Fatal(err)
		}
	}
	fe := services.Frontend{Addr: nodeFE.Addr(), Port: nodeFE.Port(), Proto: "TCP"}
	ct := func(src, dst netip.AddrPort) (programs.NodeportCtValue, bool) {
		var v programs.NodeportCtValue
		err := objs.SkiffCt.Lookup(programs.NodeportCtKey{Saddr: programs.Addr4(src.Addr()), Daddr: programs.Addr4(dst.Addr()), Sport: programs.Port(src.Port()), Dport: programs.Port(dst.Port()), Proto: 6}, &v)
		return v, err == nil
	}

	t.Run("not a service: untouched", func(t *testing.T) {
		apply()
		in := packet(npClient, netip.MustParseAddrPort("198.18.0.2:22"), false, false)
		ret, out := run(t, objs.SkiffNodeportIngress, in)
		if ret != tcActOK || string(out) != string(in) {
			t.Errorf("verdict %d, changed=%v", ret, string(out) != string(in))
		}
	})
	t.Run("no endpoints: TCP gets a RST, UDP a rate-limited ICMP port unreachable; externalTrafficPolicy Local drops", func(t *testing.T) {
		apply(services.Service{Name: "empty", ID: 5, Frontend: fe}, services.Service{Name: "empty-udp", ID: 6, Frontend: services.Frontend{Addr: nodeFE.Addr(), Port: nodeFE.Port(), Proto: "UDP"}})
		syn := packet(npClient, nodeFE, false, false)
		binary.BigEndian.PutUint32(syn[34+4:], 1000) // the client's sequence number
		copy(syn[0:6], []byte{2, 0, 0, 0, 0, 2})     // destination MAC: this node
		copy(syn[6:12], []byte{2, 0, 0, 0, 0, 1})    // source MAC: the client
		ret, out := run(t, objs.SkiffNodeportIngress, syn)
		out = out[:54]
		src, dst, ok := decode(t, out)
		flags := out[34+13]
		ack := binary.BigEndian.Uint32(out[34+8:])
		if ret != tcActRedirect || src != nodeFE || dst != npClient || !ok || flags != 0x14 || ack != 1001 ||
			binary.BigEndian.Uint16(out[14+2:]) != 40 || out[0] != 2 || out[5] != 1 || out[11] != 2 {
			t.Errorf("verdict %d, %s -> %s, checksums ok=%v, flags %#x, ack %d, frame % x", ret, src, dst, ok, flags, ack, out)
		}
		// UDP: an ICMP port unreachable from the node's address, quoting the datagram.
		dgram := packet(npClient, nodeFE, true, false)
		copy(dgram[0:6], []byte{2, 0, 0, 0, 0, 2})
		copy(dgram[6:12], []byte{2, 0, 0, 0, 0, 1})
		ret, out = run(t, objs.SkiffNodeportIngress, dgram)
		if ret != tcActRedirect || len(out) < 70 {
			t.Fatalf("UDP verdict %d, %d bytes, want a redirected ICMP reply", ret, len(out))
		}
		ip, icmp := out[14:34], out[34:70]
		if out[0] != 2 || out[5] != 1 || out[11] != 2 || ip[9] != 1 || csum(ip, 0) != 0 || binary.BigEndian.Uint16(ip[2:]) != 56 ||
			netip.AddrFrom4([4]byte(ip[12:16])) != nodeFE.Addr() || netip.AddrFrom4([4]byte(ip[16:20])) != npClient.Addr() {
			t.Errorf("ICMP reply's Ethernet/IP header: % x", out[:34])
		}
		if icmp[0] != 3 || icmp[1] != 3 || csum(icmp, 0) != 0 || string(icmp[8:36]) != string(dgram[14:42]) {
			t.Errorf("ICMP header or quote: % x (datagram % x)", icmp, dgram[14:42])
		}
		// Answers are rate-limited as the kernel's: per client 1/s with bursts of 6, in all
		// 1000/s with bursts of 50.
		udpFrom := func(a, b byte) []byte {
			d := packet(netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, a, b}), 40000), nodeFE, true, false)
			copy(d[0:12], dgram[0:12])
			return d
		}
		answer := func(d []byte) bool { ret, _ := run(t, objs.SkiffNodeportIngress, d); return ret == tcActRedirect }
		start := time.Now()
		flood := 0
		for i := 0; i < 2000; i++ {
			if answer(udpFrom(1, 1)) {
				flood++
			}
		}
		if limit := 6 + int(time.Since(start)/time.Second); flood < 6 || flood > limit {
			t.Errorf("one client's 2000 datagrams got %d answers in %s, want 6 to %d", flood, time.Since(start), limit)
		}
		many := 0
		for i := 0; i < 200; i++ {
			if answer(udpFrom(2, byte(i))) {
				many++
			}
		}
		// The loop drains the global bucket as it refills, so it is empty here; what the next
		// clients get is what refilled since, however long the sleep below really takes.
		emptied := time.Now()
		if limit := 51 + int(time.Since(start)/time.Millisecond); many < 50-6 || many > limit-6 {
			t.Errorf("200 clients got %d answers %s after the burst began, want %d to %d", many, time.Since(start), 50-6, limit-6)
		}
		time.Sleep(30 * time.Millisecond) // the global bucket refills 1/ms
		refilled := 0
		for i := 0; i < 200; i++ {
			if answer(udpFrom(3, byte(i))) {
				refilled++
			}
		}
		if limit := 2 + int(time.Since(emptied)/time.Millisecond); refilled < 30 || refilled > limit {
			t.Errorf("after 30 ms, 200 more clients got %d answers, want 30 to %d", refilled, limit)
		}
		// externalTrafficPolicy Local without a local endpoint drops, as upstream: another node may have one.
		apply(services.Service{Name: "etp-local", ID: 7, Frontend: fe, ExternalLocal: true},
			services.Service{Name: "etp-local-udp", ID: 8, Frontend: services.Frontend{Addr: nodeFE.Addr(), Port: nodeFE.Port(), Proto: "UDP"}, ExternalLocal: true})
		if ret, _ := run(t, objs.SkiffNodeportIngress, syn); ret != tcActShot {
			t.Errorf("TCP to an externalTrafficPolicy Local NodePort without local endpoints: verdict %d, want drop", ret)
		}
		if ret, _ := run(t, objs.SkiffNodeportIngress, udpFrom(4, 1)); ret != tcActShot {
			t.Errorf("UDP to an externalTrafficPolicy Local NodePort without local endpoints: verdict %d, want drop", ret)
		}
	})
	t.Run("local backend: DNAT only, client kept, reply restored at egress", func(t *testing.T) {
		apply(services.Service{Name: "web", ID: 9, Frontend: fe, Backends: []services.Backend{{Addr: localBE.Addr(), Port: localBE.Port(), Local: true}}})
		ret, out := run(t, objs.SkiffNodeportIngress, packet(npClient, nodeFE, false, false))
		src, dst, ok := decode(t, out)
		if ret != tcActOK || src != npClient || dst != localBE || !ok {
			t.Fatalf("ingress: verdict %d, %s -> %s, checksums ok=%v", ret, src, dst, ok)
		}
		// Later packets of the flow go to the same backend.
		if _, out := run(t, objs.SkiffNodeportIngress, packet(npClient, nodeFE, false, false)); func() bool { _, d, _ := decode(t, out); return d != localBE }() {
			t.Error("the flow moved to another backend")
		}
		ret, out = run(t, objs.SkiffNodeportEgress, packet(localBE, npClient, false, false))
		src, dst, ok = decode(t, out)
		if ret != tcActOK || src != nodeFE || dst != npClient || !ok {
			t.Errorf("egress reply: verdict %d, %s -> %s, checksums ok=%v", ret, src, dst, ok)
		}
	})
	t.Run("remote backend: DNAT and SNAT, reply restored at ingress", func(t *testing.T) {
		c2 := netip.MustParseAddrPort("198.18.0.254:40001")
		apply(services.Service{Name: "web", ID: 9, Frontend: fe, Backends: []services.Backend{{Addr: farBE.Addr(), Port: farBE.Port()}}})
		ret, out := run(t, objs.SkiffNodeportIngress, packet(c2, nodeFE, false, false))
		src, dst, ok := decode(t, out)
		if (ret != tcActRedirect && ret != tcActShot) || src.Addr() != nodeFE.Addr() || src.Port() < 61000 || src.Port() >= 65000 || dst != farBE || !ok {
			t.Fatalf("ingress: verdict %d, %s -> %s, checksums ok=%v", ret, src, dst, ok)
		}
		rev, found := ct(farBE, src)
		if !found || rev.Kind != 2 || programs.FromAddr4(rev.Addr2) != c2.Addr() || programs.FromPort(rev.Port2) != c2.Port() {
			t.Fatalf("reverse entry %+v %v", rev, found)
		}
		_, out = run(t, objs.SkiffNodeportIngress, packet(farBE, src, false, false))
		rs, rd, ok := decode(t, out)
		if rs != nodeFE || rd != c2 || !ok {
			t.Errorf("reply: %s -> %s, checksums ok=%v", rs, rd, ok)
		}
		// Each entry counts its direction's packets and bytes (layout 2): the forward entry
		// one packet, made with it; the reverse entry the one reply.
		fwd, _ := ct(c2, nodeFE)
		reply := packet(farBE, src, false, false)
		rev, _ = ct(farBE, src)
		if fwd.Packets != 1 || fwd.Bytes != uint64(len(packet(c2, nodeFE, false, false))) || rev.Packets != 1 || rev.Bytes != uint64(len(reply)) {
			t.Errorf("counters: forward %d packets %d bytes, reverse %d packets %d bytes; want 1 and %d each",
				fwd.Packets, fwd.Bytes, rev.Packets, rev.Bytes, len(reply))
		}
	})
	t.Run("a LoadBalancer address, remote backend: SNAT to the node's own address, reply restored", func(t *testing.T) {
		node := netip.MustParseAddr("198.18.0.7")
		if err := objs.SkiffNpSnat.Put(uint32(0), programs.Addr4(node)); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = objs.SkiffNpSnat.Put(uint32(0), uint32(0)) }()
		lbFE := netip.MustParseAddrPort("198.18.200.1:80")
		c3 := netip.MustParseAddrPort("198.18.0.254:40002")
		apply(services.Service{Name: "lb", ID: 10, Frontend: services.Frontend{Addr: lbFE.Addr(), Port: lbFE.Port(), Proto: "TCP"},
			Backends: []services.Backend{{Addr: farBE.Addr(), Port: farBE.Port()}}})
		_, out := run(t, objs.SkiffNodeportIngress, packet(c3, lbFE, false, false))
		src, dst, ok := decode(t, out)
		if src.Addr() != node || dst != farBE || !ok {
			t.Fatalf("ingress: %s -> %s, checksums ok=%v; want from the node's address %s to %s", src, dst, ok, node, farBE)
		}
		_, out = run(t, objs.SkiffNodeportIngress, packet(farBE, src, false, false))
		rs, rd, ok := decode(t, out)
		if rs != lbFE || rd != c3 || !ok {
			t.Errorf("reply: %s -> %s, checksums ok=%v; want %s -> %s", rs, rd, ok, lbFE, c3)
		}
	})
	t.Run("sessionAffinity ClientIP: a client's new flows keep its backend; another client picks afresh", func(t *testing.T) {
		var bes []services.Backend
		for i := 1; i <= 4; i++ {
			bes = append(bes, services.Backend{Addr: netip.AddrFrom4([4]byte{10, 244, 1, byte(10 + i)}), Port: 8080, Local: true})
		}
		backendsOf := func(client netip.Addr, from uint16) map[netip.AddrPort]int {
			got := map[netip.AddrPort]int{}
			for p := from; p < from+40; p++ { // 40 new flows, each from its own port
				_, out := run(t, objs.SkiffNodeportIngress, packet(netip.AddrPortFrom(client, p), nodeFE, false, false))
				_, dst, _ := decode(t, out)
				got[dst]++
			}
			return got
		}
		apply(services.Service{Name: "plain", ID: 30, Frontend: fe, Backends: bes})
		if got := backendsOf(netip.MustParseAddr("198.18.0.201"), 21000); len(got) < 2 {
			t.Fatalf("without affinity 40 flows all went to %v", got)
		}
		apply(services.Service{Name: "sticky", ID: 31, Affinity: time.Hour, Frontend: fe, Backends: bes})
		a := backendsOf(netip.MustParseAddr("198.18.0.202"), 22000)
		if len(a) != 1 {
			t.Errorf("with affinity one client's 40 flows went to %v", a)
		}
		// Affinity is to the endpoint: another endpoint added before it (its slot shifts)
		// leaves the client where it was; its endpoint gone, the client moves and sticks anew.
		var mine netip.AddrPort
		for be := range a {
			mine = be
		}
		grown := append([]services.Backend{{Addr: netip.MustParseAddr("10.244.1.1"), Port: 8080, Local: true}}, bes...)
		apply(services.Service{Name: "sticky", ID: 31, Affinity: time.Hour, Frontend: fe, Backends: grown})
		if got := backendsOf(netip.MustParseAddr("198.18.0.202"), 22100); len(got) != 1 || got[mine] != 40 {
			t.Errorf("after an endpoint was added before it, the client's flows went to %v, want all to %s", got, mine)
		}
		var without []services.Backend
		for _, be := range grown {
			if netip.AddrPortFrom(be.Addr, be.Port) != mine {
				without = append(without, be)
			}
		}
		apply(services.Service{Name: "sticky", ID: 31, Affinity: time.Hour, Frontend: fe, Backends: without})
		if got := backendsOf(netip.MustParseAddr("198.18.0.202"), 22200); len(got) != 1 || got[mine] != 0 {
			t.Errorf("with its endpoint gone, the client's flows went to %v, want all to one other", got)
		}
		seen := map[netip.AddrPort]bool{}
		for i := byte(0); i < 20; i++ {
			for be := range backendsOf(netip.AddrFrom4([4]byte{198, 18, 0, 100 + i}), 23000) {
				seen[be] = true
			}
		}
		if len(seen) < 2 {
			t.Errorf("20 clients with affinity all landed on %v", seen)
		}
	})
	t.Run("UDP without a checksum keeps none", func(t *testing.T) {
		ufe := services.Frontend{Addr: nodeFE.Addr(), Port: nodeFE.Port(), Proto: "UDP"}
		apply(services.Service{Name: "dns", ID: 11, Frontend: ufe, Backends: []services.Backend{{Addr: localBE.Addr(), Port: 5353, Local: true}}})
		_, out := run(t, objs.SkiffNodeportIngress, packet(netip.MustParseAddrPort("198.18.0.254:40002"), nodeFE, true, true))
		_, dst, ok := decode(t, out)
		if dst != netip.AddrPortFrom(localBE.Addr(), 5353) || !ok || binary.BigEndian.Uint16(out[34+6:]) != 0 {
			t.Errorf("UDP: %s ok=%v csum=%#x", dst, ok, binary.BigEndian.Uint16(out[34+6:]))
		}
	})
	t.Run("exact count, listing and idle GC", func(t *testing.T) {
		n, capacity, err := services.ConntrackCount(objs.SkiffCt, nil)
		if err != nil || n < 4 || capacity != 262144 {
			t.Fatalf("count %d of %d, %v", n, capacity, err)
		}
		flows, err := services.ListFlows(objs.SkiffCt, nil, programs.Monotonic())
		if err != nil || len(flows) != n {
			t.Fatalf("%d flows listed for %d entries: %v", len(flows), n, err)
		}
		if removed, err := services.GCConntrack(objs.SkiffCt, nil, programs.Monotonic(), time.Hour); err != nil || removed != 0 {
			t.Errorf("GC of fresh flows removed %d (%v)", removed, err)
		}
		if removed, err := services.GCConntrack(objs.SkiffCt, nil, programs.Monotonic()+2*time.Hour, time.Hour); err != nil || removed != n {
			t.Errorf("GC of idle flows removed %d of %d (%v)", removed, n, err)
		}
		if n, _, _ := services.ConntrackCount(objs.SkiffCt, nil); n != 0 {
			t.Errorf("%d entries after GC", n)
		}
	})
	t.Run("Maglev: a flow keeps its backend without conntrack, and losing a backend moves only its flows", func(t *testing.T) {
		var bes []services.Backend
		for i := 1; i <= 10; i++ {
			bes = append(bes, services.Backend{Addr: netip.AddrFrom4([4]byte{10, 244, 2, byte(i)}), Port: 8080, Local: true})
		}
		apply(services.Service{Name: "mg", ID: 21, Maglev: true, Frontend: fe, Backends: bes})
		clearCT := func() {
			var k programs.NodeportCtKey
			var keys []programs.NodeportCtKey
			var v programs.NodeportCtValue
			for it := objs.SkiffCt.Iterate(); it.Next(&k, &v); {
				keys = append(keys, k)
			}
			for _, k := range keys {
				_ = objs.SkiffCt.Delete(k)
			}
		}
		pick := func() map[uint16]netip.AddrPort {
			clearCT() // every packet must decide afresh, as on another node
			out := map[uint16]netip.AddrPort{}
			for p := uint16(20000); p < 20300; p++ {
				_, pkt := run(t, objs.SkiffNodeportIngress, packet(netip.AddrPortFrom(npClient.Addr(), p), nodeFE, false, false))
				_, dst, _ := decode(t, pkt)
				out[p] = dst
			}
			return out
		}
		first, again := pick(), pick()
		used := map[netip.AddrPort]bool{}
		for p, b := range first {
			used[b] = true
			if again[p] != b {
				t.Fatalf("flow from port %d went to %s, then %s", p, b, again[p])
			}
		}
		if len(used) < 8 {
			t.Errorf("300 flows used only %d of 10 backends", len(used))
		}
		lost := bes[3]
		apply(services.Service{Name: "mg", ID: 21, Maglev: true, Frontend: fe, Backends: append(append([]services.Backend(nil), bes[:3]...), bes[4:]...)})
		after := pick()
		moved := 0
		for p, b := range first {
			if b.Addr() == lost.Addr {
				continue
			}
			if after[p] != b {
				moved++
			}
		}
		if moved > 30 {
			t.Errorf("%d of the surviving backends' flows moved after one backend went", moved)
		}
	})
}
