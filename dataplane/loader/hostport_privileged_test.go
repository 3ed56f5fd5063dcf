package loader

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/agent/cgroups"
	"github.com/skiff-sh/skiff/dataplane/services"
)

// TestPrivilegedHostPortLoopback checks that a hostPort on 127.0.0.1 exists only in the node's
// own network namespace: a process there (the node's, or a host-network pod's) reaches the pod
// behind it, while a process of the same cgroup in another namespace (a pod) reaches its own
// loopback, and the frontend on the node's address is translated in both.
func TestPrivilegedHostPortLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root, BPF and network namespaces: make unit (-short) skips it, make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (every machine here has it)")
	}
	cgroup := filepath.Join(cgroups.Unified(), fmt.Sprintf("skiff-hp-test-%d", os.Getpid()))
	pinDir := filepath.Join(BPFFS, "skiff", fmt.Sprintf("test-hp-%d", os.Getpid()))
	podNetns := fmt.Sprintf("skiff-hp-%d", os.Getpid())
	t.Cleanup(func() {
		_ = Remove(pinDir)
		_ = os.Remove(cgroup)
		_ = exec.Command("ip", "netns", "del", podNetns).Run()
	})
	if out, err := exec.Command("ip", "netns", "add", podNetns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	if out, err := exec.Command("ip", "-n", podNetns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v\n%s", err, out)
	}
	d, err := Load(pinDir, cgroup, "", nil, services.MapSizes{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cookie, err := NetnsCookie("")
	if err != nil {
		t.Fatal(err)
	}
	if other, err := NetnsCookie("/run/netns/" + podNetns); err != nil || other == cookie || other == 0 || cookie == 0 {
		t.Fatalf("cookies: this namespace %d, the pod's %d (%v): want two different, non-zero", cookie, other, err)
	}
	if err := d.SetHostNetns(cookie); err != nil {
		t.Fatal(err)
	}

	pod := tcpServer(t, "POD")
	port := freePort(t)
	frontends := []services.Service{
		{Name: "ns/a:" + fmt.Sprint(port) + "/TCP@hostport@127.0.0.1", ID: 1, ExternalLocal: true, HostNetnsOnly: true,
			Frontend: services.Frontend{Addr: netip.MustParseAddr("127.0.0.1"), Port: port, Proto: corev1.ProtocolTCP}, Backends: []services.Backend{backend(pod)}},
		{Name: "ns/a:" + fmt.Sprint(port) + "/TCP@hostport@198.18.0.2", ID: 2, ExternalLocal: true,
			Frontend: services.Frontend{Addr: netip.MustParseAddr("198.18.0.2"), Port: port, Proto: corev1.ProtocolTCP}, Backends: []services.Backend{backend(pod)}},
	}
	if err := d.Maps.Apply(frontends); err != nil {
		t.Fatal(err)
	}
	// dial listens on the frontend's port of its own loopback ("OWN") and connects to HOST:port.
	dial := strings.NewReplacer("PORT", fmt.Sprint(port)).Replace(`
import socket, threading
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(('127.0.0.1', PORT))
l.listen()
def serve():
    c, _ = l.accept()
    c.send(b'OWN')
    c.close()
threading.Thread(target=serve, daemon=True).start()
try:
    s = socket.create_connection((HOST, PORT), timeout=3)
    print(s.recv(8).decode(), s.getpeername()[0])
except OSError as e:
    print(type(e).__name__)
`)
	// In the node's namespace the connect goes to the pod, although a listener of the node's
	// own holds the port on 127.0.0.1 (as with the portmap plugin's DNAT).
	if got := client(t, cgroup, strings.Replace(dial, "HOST", "'127.0.0.1'", 1)); got != "POD 127.0.0.1" {
		t.Errorf("127.0.0.1 hostPort from the node's namespace: %q, want the pod (peer shown as 127.0.0.1)", got)
	}
	inPod := func(script string) string {
		t.Helper()
		// nsenter, not ip netns exec: that remounts /sys, hiding the test's cgroup.
		cmd := exec.Command("nsenter", "--net=/run/netns/"+podNetns, "--", "sh", "-c",
			"echo $$ > "+filepath.Join(cgroup, "cgroup.procs")+" && exec python3 -c \"$0\"", script)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("client in %s: %v\n%s", podNetns, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := inPod(strings.Replace(dial, "HOST", "'127.0.0.1'", 1)); got != "OWN 127.0.0.1" {
		t.Errorf("127.0.0.1 from a pod's namespace: %q, want the pod's own loopback", got)
	}
	// The node's address is translated for pods too: the connect goes to the backend's
	// address, which here is this namespace's own 127.0.0.1, where nothing holds the backend's
	// port (refused). Untranslated, 198.18.0.2 has no route here (OSError: unreachable).
	if got := inPod(strings.Replace(dial, "HOST", "'198.18.0.2'", 1)); got != "ConnectionRefusedError" {
		t.Errorf("the node's address from a pod's namespace: %q, want the translated connect refused", got)
	}
}

// freePort is a TCP port nothing listens on right now on 127.0.0.1.
func freePort(t *testing.T) uint16 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}
