package loader

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/dataplane/services"
)

// TestPrivilegedSocketLB6 is TestPrivilegedSocketLB over IPv6: a process in the cgroup that
// connects to an IPv6 ClusterIP reaches both backends and sees the ClusterIP as its peer;
// ClientIP affinity sticks; a frontend without endpoints refuses at once; UDP answers come
// from the ClusterIP; an IPv6 socket's IPv4-mapped address of an IPv4 ClusterIP (a dual-stack
// socket) is balanced over IPv4's maps; the socket tables hold exactly the live sockets; and
// the maps read back with IPv6 frontends and backends.
func TestPrivilegedSocketLB6(t *testing.T) {
	d, _, cgroup := testDataplane(t, "test6")
	a, b := tcpServerOn(t, "::1", "A"), tcpServerOn(t, "::1", "B")
	u := udpEchoOn(t, "::1", "U")
	a4 := tcpServer(t, "4")
	fe := func(addr string, port uint16, proto corev1.Protocol) services.Frontend {
		return services.Frontend{Addr: netip.MustParseAddr(addr), Port: port, Proto: proto}
	}
	frontends := []services.Service{
		{Name: "default/web:80/TCP@fd00:10:96::42", ID: 11, Frontend: fe("fd00:10:96::42", 80, corev1.ProtocolTCP), Backends: []services.Backend{backend(a), backend(b)}},
		{Name: "default/empty:80/TCP", ID: 12, Frontend: fe("fd00:10:96::43", 80, corev1.ProtocolTCP)},
		{Name: "default/sticky:80/TCP", ID: 13, Affinity: time.Hour, Frontend: fe("fd00:10:96::44", 80, corev1.ProtocolTCP), Backends: []services.Backend{backend(a), backend(b)}},
		{Name: "default/dns:53/UDP", ID: 14, Frontend: fe("fd00:10:96::53", 53, corev1.ProtocolUDP), Backends: []services.Backend{backend(u)}},
		{Name: "default/web:80/TCP@10.96.0.42", ID: 15, Frontend: fe("10.96.0.42", 80, corev1.ProtocolTCP), Backends: []services.Backend{backend(a4)}},
		{Name: "default/maglev:80/TCP", ID: 16, Maglev: true, Frontend: fe("fd00:10:96::45", 80, corev1.ProtocolTCP), Backends: []services.Backend{backend(a), backend(b)}},
	}
	if err := d.Maps.Apply(frontends); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ host, want string }{
		{"fd00:10:96::42", "AB fd00:10:96::42 80"},
		{"::ffff:10.96.0.42", "4 ::ffff:10.96.0.42 80"},
	} {
		if got := client(t, cgroup, connectMany(tc.host)); got != tc.want {
			t.Errorf("%s over 40 connections: %q, want %q", tc.host, got, tc.want)
		}
	}
	for _, host := range []string{"fd00:10:96::44", "fd00:10:96::45"} { // affinity; Maglev of one socket's hash is random per socket, so only check it works
		got := client(t, cgroup, connectMany(host))
		if !strings.HasSuffix(got, " "+host+" 80") || (host == "fd00:10:96::44" && got != "A "+host+" 80" && got != "B "+host+" 80") {
			t.Errorf("%s over 40 connections: %q", host, got)
		}
	}
	if got := client(t, cgroup, connectRefused("fd00:10:96::43")); got != "PermissionError 0" {
		t.Errorf("IPv6 service without endpoints: %q, want an immediate refusal", got)
	}
	if got := client(t, cgroup, udpQuery("AF_INET6", "fd00:10:96::53")); got != "U fd00:10:96::53 53" {
		t.Errorf("UDP to the IPv6 ClusterIP: %q, want the answer from the ClusterIP", got)
	}
	if n, _, err := d.Maps.SocketCount(); err != nil || n != 0 {
		t.Errorf("socket tables after the clients exited: %d, %v", n, err)
	}
	release := holdConnection(t, cgroup, "fd00:10:96::42")
	socks, err := d.Maps.ListSockets()
	if err != nil || len(socks) != 1 || socks[0].Service != "[fd00:10:96::42]:80" || (socks[0].Backend != a.String() && socks[0].Backend != b.String()) {
		t.Errorf("socket tables with one live IPv6 connection: %+v %v", socks, err)
	}
	release()
	if n, _, _ := d.Maps.SocketCount(); n != 0 {
		t.Errorf("socket tables after the holder closed: %d entries", n)
	}

	entries, err := d.Maps.Dump()
	if err != nil || len(entries) != len(frontends) {
		t.Fatalf("dump: %+v %v", entries, err)
	}
	e, ok, err := d.Maps.Lookup(netip.MustParseAddrPort("[fd00:10:96::42]:80"), corev1.ProtocolTCP)
	if err != nil || !ok || e.Name != "default/web:80/TCP@fd00:10:96::42" || e.Frontend != "[fd00:10:96::42]:80/TCP" ||
		strings.Join(e.Backends, " ") != a.String()+" "+b.String() {
		t.Errorf("Lookup of the IPv6 frontend: %+v %v %v", e, ok, err)
	}
	// Deltas leave the IPv6 maps as a full Apply does.
	prog := &services.Programmer{Maps: d.Maps}
	moved := frontends[0]
	moved.Backends = []services.Backend{backend(b)}
	for i, state := range [][]services.Service{frontends, {frontends[1], moved}, {moved, frontends[4]}, frontends[3:], nil} {
		if err := prog.Apply(state, i == 0); err != nil {
			t.Fatal(err)
		}
		got := rawMaps(t, d.Maps)
		if err := d.Maps.Apply(state); err != nil {
			t.Fatal(err)
		}
		if want := rawMaps(t, d.Maps); got != want {
			t.Errorf("state %d: delta writes left\n%s\na full apply makes\n%s", i, got, want)
		}
	}
	if got := rawMaps(t, d.Maps); got != "" {
		t.Errorf("after the last state (none), the maps hold\n%s", got)
	}
}
