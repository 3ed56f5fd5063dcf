package loader

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/agent/cgroups"
	"github.com/skiff-sh/skiff/dataplane/programs"
	"github.com/skiff-sh/skiff/dataplane/services"
)

// client runs a Python snippet inside the test cgroup (so the programs apply to it) and
// returns what it prints.
func client(t *testing.T, cgroup, script string) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", "echo $$ > "+filepath.Join(cgroup, "cgroup.procs")+" && exec python3 -c \"$0\"", script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("client: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// tcpServer answers every connection on 127.0.0.1 with its name.
func tcpServer(t *testing.T, name string) netip.AddrPort { return tcpServerOn(t, "127.0.0.1", name) }

// udpEcho answers every datagram on 127.0.0.1 with its name.
func udpEcho(t *testing.T, name string) netip.AddrPort { return udpEchoOn(t, "127.0.0.1", name) }

// tcpServerOn answers every connection to a free port of addr with its name.
func tcpServerOn(t *testing.T, addr, name string) netip.AddrPort {
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(name))
			c.Close()
		}
	}()
	return netip.MustParseAddrPort(l.Addr().String())
}

// udpEchoOn answers every datagram to a free port of addr with its name.
func udpEchoOn(t *testing.T, addr, name string) netip.AddrPort {
	c, err := net.ListenPacket("udp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = c.WriteTo([]byte(name), from)
		}
	}()
	return netip.MustParseAddrPort(c.LocalAddr().String())
}

func backend(ap netip.AddrPort) services.Backend {
	return services.Backend{Addr: ap.Addr(), Port: ap.Port()}
}

// The clients the socket tests run in the balanced cgroup (client), as Python scripts.

// connectMany connects to host:80 40 times and prints the backends' names it met, sorted,
// and the peer address and port the last socket showed.
func connectMany(host string) string {
	return fmt.Sprintf(`
import socket
seen = []
for i in range(40):
    s = socket.create_connection((%q, 80), timeout=3)
    peer = s.getpeername()
    seen.append(s.recv(8).decode())
    s.close()
print(''.join(sorted(set(seen))), peer[0], peer[1])
`, host)
}

// connectRefused connects to host:80 and prints the error's type and the seconds it took.
func connectRefused(host string) string {
	return fmt.Sprintf(`
import socket, time
t = time.time()
try:
    socket.create_connection((%q, 80), timeout=5)
    print('connected')
except OSError as e:
    print(type(e).__name__, round(time.time() - t))
`, host)
}

// udpQuery sends one datagram to host:53 of family ("AF_INET", "AF_INET6") and prints the
// answer and where it came from.
func udpQuery(family, host string) string {
	return fmt.Sprintf(`
import socket
s = socket.socket(socket.%s, socket.SOCK_DGRAM)
s.settimeout(3)
s.sendto(b'q', (%q, 53))
data, src = s.recvfrom(16)
print(data.decode(), src[0], src[1])
`, family, host)
}

// holdConnection starts a client in the cgroup that holds one connection to host:80 open
// and returns once it is up; release closes it and waits for the client to end.
func holdConnection(t *testing.T, cgroup, host string) (release func()) {
	t.Helper()
	holder := exec.Command("sh", "-c", "echo $$ > "+filepath.Join(cgroup, "cgroup.procs")+" && exec python3 -c \"$0\"",
		fmt.Sprintf("import socket, sys\ns = socket.create_connection((%q, 80), timeout=3)\nprint('up', flush=True)\nsys.stdin.read()", host))
	stdin, _ := holder.StdinPipe()
	stdout, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	t.Cleanup(func() {
		if !done {
			_ = holder.Process.Kill()
			_ = holder.Wait()
		}
	})
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "up\n" {
		t.Fatalf("holder: %q %v", line, err)
	}
	return func() { stdin.Close(); _ = holder.Wait(); done = true }
}

// TestPrivilegedSocketLB loads the programs for real, attaches them to a test cgroup and
// checks what a process in it sees: TCP and UDP to a ClusterIP reach the backends, both of
// them over many connections; getpeername and recvfrom show the ClusterIP; a service with no
// endpoints refuses at once; ClientIP affinity sticks; and a second Load (an agent restart)
// keeps the entries and the translation.
func TestPrivilegedSocketLB(t *testing.T) {
	d, pinDir, cgroup := testDataplane(t, "test")

	a, b := tcpServer(t, "A"), tcpServer(t, "B")
	u := udpEcho(t, "U")
	frontends := []services.Service{
		{Name: "default/web:80/TCP", ID: 1, Frontend: services.Frontend{Addr: netip.MustParseAddr("10.96.0.42"), Port: 80, Proto: corev1.ProtocolTCP},
			Backends: []services.Backend{backend(a), backend(b)}},
		{Name: "default/empty:80/TCP", ID: 2, Frontend: services.Frontend{Addr: netip.MustParseAddr("10.96.0.43"), Port: 80, Proto: corev1.ProtocolTCP}},
		{Name: "default/sticky:80/TCP", ID: 3, Affinity: time.Hour, Frontend: services.Frontend{Addr: netip.MustParseAddr("10.96.0.44"), Port: 80, Proto: corev1.ProtocolTCP},
			Backends: []services.Backend{backend(a), backend(b)}},
		{Name: "default/dns:53/UDP", ID: 4, Frontend: services.Frontend{Addr: netip.MustParseAddr("10.96.0.53"), Port: 53, Proto: corev1.ProtocolUDP},
			Backends: []services.Backend{backend(u)}},
	}
	if err := d.Maps.Apply(frontends); err != nil {
		t.Fatal(err)
	}

	if got := client(t, cgroup, connectMany("10.96.0.42")); got != "AB 10.96.0.42 80" {
		t.Errorf("ClusterIP over 40 connections: %q, want both backends and the ClusterIP as peer", got)
	}
	if got := client(t, cgroup, connectMany("10.96.0.44")); got != "A 10.96.0.44 80" && got != "B 10.96.0.44 80" {
		t.Errorf("ClientIP affinity over 40 connections: %q, want one backend", got)
	}
	if got := client(t, cgroup, connectRefused("10.96.0.43")); got != "PermissionError 0" {
		t.Errorf("service without endpoints: %q, want an immediate refusal", got)
	}
	if got := client(t, cgroup, udpQuery("AF_INET", "10.96.0.53")); got != "U 10.96.0.53 53" {
		t.Errorf("UDP to the ClusterIP: %q, want the answer from the ClusterIP", got)
	}
	// The socket table holds exactly the live balanced sockets: none once the clients exited,
	// one while a client keeps its connection.
	if n, capacity, err := d.Maps.SocketCount(); err != nil || n != 0 || capacity != 2*262144 { // both families' tables
		t.Errorf("socket table after the clients exited: %d of %d, %v", n, capacity, err)
	}
	release := holdConnection(t, cgroup, "10.96.0.42")
	socks, err := d.Maps.ListSockets()
	if err != nil || len(socks) != 1 || socks[0].Service != "10.96.0.42:80" {
		t.Errorf("socket table with one live connection: %+v %v", socks, err)
	}
	release()
	if n, _, _ := d.Maps.SocketCount(); n != 0 {
		t.Errorf("socket table after the holder closed: %d entries", n)
	}

	if v, err := PinnedVersion(pinDir); err != nil || v != programs.MapVersion {
		t.Errorf("pinned map version %d, %v", v, err)
	}

	// An agent restart: load again over the pinned maps and links.
	d2, err := Load(pinDir, cgroup, "", nil, services.MapSizes{})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	entries, err := d2.Maps.Dump()
	if err != nil || len(entries) != 4 {
		t.Fatalf("entries after reload: %v %v", entries, err)
	}
	if ids, err := d2.Maps.IDs(); err != nil || len(ids) != 4 || ids["default/web:80/TCP"] != 1 || ids["default/dns:53/UDP"] != 4 {
		t.Errorf("ids after reload: %v %v", ids, err)
	}
	if got := client(t, cgroup, connectMany("10.96.0.42")); got != "AB 10.96.0.42 80" {
		t.Errorf("after reload: %q", got)
	}
	// Shrinking to one service removes the others and their backends.
	if err := d2.Maps.Apply(frontends[:1]); err != nil {
		t.Fatal(err)
	}
	entries, _ = d2.Maps.Dump()
	if len(entries) != 1 || entries[0].Name != "default/web:80/TCP" || len(entries[0].Backends) != 2 {
		t.Errorf("after pruning: %+v", entries)
	}
	if e, ok, err := d2.Maps.Lookup(netip.MustParseAddrPort(strings.TrimSuffix(entries[0].Frontend, "/TCP")), corev1.ProtocolTCP); err != nil || !ok || e.Name != entries[0].Name || len(e.Backends) != 2 {
		t.Errorf("Lookup(%s) = %+v %v %v", entries[0].Frontend, e, ok, err)
	}
	if _, ok, err := d2.Maps.Lookup(netip.MustParseAddrPort("10.96.0.44:80"), corev1.ProtocolTCP); err != nil || ok {
		t.Errorf("Lookup of a pruned frontend: %v %v", ok, err)
	}
	// The proxy's Programmer writes only deltas; after any sequence of states the maps are
	// what a full Apply of the last state makes them.
	// Every map is compared raw, so a leftover backend slot, name or Maglev entry shows.
	prog := &services.Programmer{Maps: d2.Maps}
	moved := frontends[0]
	moved.Backends = []services.Backend{backend(b)}
	renamed := frontends[0] // the same frontend under another id, balanced by Maglev
	renamed.Name, renamed.ID, renamed.Maglev = "default/web:http/TCP", 9, true
	for i, state := range [][]services.Service{frontends, {frontends[1], moved}, {moved}, {renamed, frontends[3]}, frontends[2:], frontends} {
		if err := prog.Apply(state, i == 0); err != nil {
			t.Fatal(err)
		}
		got := rawMaps(t, d2.Maps)
		if err := d2.Maps.Apply(state); err != nil {
			t.Fatal(err)
		}
		if want := rawMaps(t, d2.Maps); got != want {
			t.Errorf("state %d: delta writes left\n%s\na full apply makes\n%s", i, got, want)
		}
	}
	if err := d2.Maps.Apply(frontends[:1]); err != nil {
		t.Fatal(err)
	}
	var n int
	var k programs.SockBackendKey
	var v programs.SockBackendValue
	for it := d2.Maps.Backends.Iterate(); it.Next(&k, &v); {
		n++
	}
	if n != 2 {
		t.Errorf("%d backends left, want 2", n)
	}

	// Maps of another layout version are rebuilt, not reused.
	meta, err := ebpf.LoadPinnedMap(filepath.Join(pinDir, "skiff_meta"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := meta.Put(uint32(0), uint32(programs.MapVersion+1)); err != nil {
		t.Fatal(err)
	}
	meta.Close()
	d3, err := Load(pinDir, cgroup, "", nil, services.MapSizes{})
	if err != nil {
		t.Fatal(err)
	}
	defer d3.Close()
	if entries, _ := d3.Maps.Dump(); len(entries) != 0 {
		t.Errorf("maps of another version were reused: %+v", entries)
	}
	if v, _ := PinnedVersion(pinDir); v != programs.MapVersion {
		t.Errorf("version after migration: %d", v)
	}
}

// rawMaps is what the frontend, backend, name and Maglev maps hold (Maps.Contents).
func rawMaps(t *testing.T, m services.Maps) string {
	t.Helper()
	s, err := m.Contents()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testDataplane loads the programs with default map sizes under a pin directory and cgroup
// named for the test and this process, removed (and the dataplane closed) when the test ends;
// it skips under -short and needs root.
func testDataplane(t *testing.T, name string) (d *Dataplane, pinDir, cgroup string) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs root, BPF and network namespaces: make unit (-short) skips it, make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (every machine here has it)")
	}
	cgroup = filepath.Join(cgroups.Unified(), fmt.Sprintf("skiff-dp-%s-%d", name, os.Getpid()))
	pinDir = filepath.Join(BPFFS, "skiff", fmt.Sprintf("%s-%d", name, os.Getpid()))
	t.Cleanup(func() {
		_ = Remove(pinDir)
		_ = os.Remove(cgroup)
	})
	d, err := Load(pinDir, cgroup, "", nil, services.MapSizes{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d, pinDir, cgroup
}

// TestPrivilegedCheckAndRepair damages a loaded dataplane the ways an operator or a stray
// cleanup can — a program detached with bpftool, the pins removed — and sees Check name the
// damage and a second Load (the proxy's restart) repair it, translation included.
func TestPrivilegedCheckAndRepair(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root, BPF and network namespaces: make unit (-short) skips it, make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (every machine here has it)")
	}
	cgroup := filepath.Join(cgroups.Unified(), fmt.Sprintf("skiff-dp-repair-%d", os.Getpid()))
	pinDir := filepath.Join(BPFFS, "skiff", fmt.Sprintf("repair-%d", os.Getpid()))
	t.Cleanup(func() {
		_ = Remove(pinDir)
		_ = os.Remove(cgroup)
	})
	a := tcpServer(t, "A")
	web := []services.Service{{Name: "default/web:80/TCP", ID: 1, Frontend: services.Frontend{Addr: netip.MustParseAddr("10.96.0.42"), Port: 80, Proto: corev1.ProtocolTCP},
		Backends: []services.Backend{backend(a)}}}
	dial := "import socket\ns = socket.create_connection(('10.96.0.42', 80), timeout=2)\nprint(s.recv(8).decode())"
	works := func(d *Dataplane, when string) {
		t.Helper()
		if err := d.Maps.Apply(web); err != nil {
			t.Fatal(err)
		}
		if got := client(t, cgroup, dial); got != "A" {
			t.Fatalf("%s: the ClusterIP answered %q", when, got)
		}
	}
	d, err := Load(pinDir, cgroup, "", nil, services.MapSizes{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { d.Close() }()
	if err := d.Check(); err != nil {
		t.Fatalf("a fresh dataplane: %v", err)
	}
	works(d, "fresh")

	// bpftool link detach: the hook is empty while the link and its pin remain.
	if err := d.links[0].Detach(); err != nil {
		t.Fatal(err)
	}
	if err := d.Check(); err == nil || !strings.Contains(err.Error(), "program connect4 detached from its cgroup") {
		t.Fatalf("Check after detaching connect4: %v", err)
	}
	d.Close()
	if d, err = Load(pinDir, cgroup, "", nil, services.MapSizes{}); err != nil {
		t.Fatal(err)
	}
	if err := d.Check(); err != nil {
		t.Fatalf("after reloading over a detached link: %v", err)
	}
	works(d, "after repairing a detached link")

	// rm -r of the pins: the programs still run on this process's handles, but nothing
	// outside it can see them and a restart would find nothing.
	if err := os.RemoveAll(pinDir); err != nil {
		t.Fatal(err)
	}
	err = d.Check()
	for _, want := range []string{"map skiff_services is no longer pinned", "link connect4 is no longer pinned"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check after removing the pins = %v, want it to say %q", err, want)
		}
	}
	d.Close()
	if d, err = Load(pinDir, cgroup, "", nil, services.MapSizes{}); err != nil {
		t.Fatal(err)
	}
	if err := d.Check(); err != nil {
		t.Fatalf("after reloading over removed pins: %v", err)
	}
	works(d, "after repairing removed pins")
}
