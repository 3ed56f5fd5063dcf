package etcd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/skiff-sh/skiff/controlplane/pki"
)

// TestRaftLogStaysSmall writes 6000 entries of 1 KiB to a real embedded member and checks the
// heap kept afterwards: with etcd's default of 5000 catch-up entries it holds ~6 MB of raft
// log; with CatchUpEntries it holds about a tenth of that.
func TestRaftLogStaysSmall(t *testing.T) {
	dir := t.TempDir()
	certs, err := pki.Ensure(pki.Options{Dir: filepath.Join(dir, "pki")})
	if err != nil {
		t.Fatal(err)
	}
	clientURL := "https://127.0.0.1:" + freePort(t)
	ctx := context.Background()
	s, err := Start(ctx, Options{
		DataDir: filepath.Join(dir, "etcd"), LogFile: filepath.Join(dir, "etcd.log"), Name: "test", ClientURL: clientURL,
		PeerURL: "https://127.0.0.1:" + freePort(t), PKI: certs,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tlsInfo := transport.TLSInfo{CertFile: certs.APIServerEtcdClient().Cert, KeyFile: certs.APIServerEtcdClient().Key,
		TrustedCAFile: certs.EtcdCA().Cert}
	tlsConfig, err := tlsInfo.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL}, TLS: tlsConfig, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	// The same key every time: the key index grows by a revision (16 bytes) per write, not
	// by a value; bbolt's pages are mapped from its file, not on the heap.
	value := strings.Repeat("x", 1024)
	put := func(n int) {
		var wg sync.WaitGroup
		errs := make(chan error, 1)
		for w := 0; w < 32; w++ { // concurrent proposals share an fsync
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := w; i < n; i += 32 {
					if _, err := client.Put(ctx, "/test/key", value); err != nil {
						select {
						case errs <- err:
						default:
						}
						return
					}
				}
			}(w)
		}
		wg.Wait()
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
	}
	put(200) // past the client's and the member's first allocations
	before := liveHeap()
	put(6000)
	after := liveHeap()
	grown := int64(after) - int64(before)
	t.Logf("live heap %d -> %d bytes (%+d) over 6000 writes of 1 KiB", before, after, grown)
	if limit := int64(3 << 20); grown > limit {
		t.Fatalf("the live heap grew by %d bytes over 6000 writes of 1 KiB, more than %d: the raft log is kept beyond %d entries",
			grown, limit, CatchUpEntries)
	}
}

func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}
