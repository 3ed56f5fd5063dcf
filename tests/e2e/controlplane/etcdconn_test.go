package controlplane

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestEtcdConnectionsShared: the API server's storage for every built-in resource shares
// one etcd client. Upstream's storage factory dials etcd once per resource: some sixty
// connections in a skiff server, each with its TLS session, buffers and goroutines at both
// ends. skiff's own keys (allocators, API server leases) use the shared client too. What
// remains beside it is a handful: the health and readiness probes, upstream's compactor
// client, the apiextensions and aggregator stores (upstream's factory still dials those).
func TestEtcdConnectionsShared(t *testing.T) {
	s := framework.StartServer(t)
	n, err := establishedTo(s.EtcdPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d connections to etcd (port %d)", n, s.EtcdPort)
	// Every built-in resource is served: were each dialling its own, this would be 60+.
	if n == 0 || n > 15 {
		t.Errorf("%d etcd connections, want a handful (1..15): resources are not sharing one client", n)
	}
}

// establishedTo counts the established TCP connections (IPv4 and IPv6) whose remote port
// is port, in this network namespace.
func establishedTo(port int) (int, error) {
	n := 0
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			return 0, err
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "01" { // ESTABLISHED
				continue
			}
			_, hexPort, ok := strings.Cut(fields[2], ":")
			if !ok {
				continue
			}
			p, err := strconv.ParseUint(hexPort, 16, 16)
			if err != nil {
				f.Close()
				return 0, fmt.Errorf("%s: %q: %w", file, fields[2], err)
			}
			if int(p) == port {
				n++
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return 0, err
		}
	}
	return n, nil
}
