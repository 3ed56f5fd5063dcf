package ha

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestEmbeddedCARotation rotates the CAs of a three-server embedded-etcd cluster from one
// server, as k3s's `certificate rotate-ca` is run on one: srv1 stopped, `skiff certificate
// rotate-ca`, srv1 started. The two others take the new CAs from the cluster's sealed copy
// in etcd — each vouched for by its own CA — and start themselves again one at a time, so a
// write load through every server loses nothing; then `--complete` on srv1 reaches them the
// same way, after which a kubeconfig of the old CA is refused by every server.
func TestEmbeddedCARotation(t *testing.T) {
	servers := embeddedCluster(t)
	first := servers[0]
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var urls []string
	for i, s := range servers {
		urls = append(urls, fmt.Sprintf("https://127.0.0.%d:%d", i+1, s.Port))
	}
	oldAdmin := filepath.Join(t.TempDir(), "old-admin.kubeconfig")
	if err := os.WriteFile(oldAdmin, []byte(readFile(t, first.Kubeconfig)), 0o600); err != nil {
		t.Fatal(err)
	}
	pids := []int{0, servers[1].PID(), servers[2].PID()}
	rotateCA := func(args ...string) {
		t.Helper()
		first.Stop()
		out, err := exec.Command(framework.Binary(t), append([]string{"certificate", "rotate-ca", "--data-dir", first.Dir,
			"--etcd-client-port", strconv.Itoa(first.EtcdPort)}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("skiff certificate rotate-ca %v: %v\n%s", args, err, out)
		}
		first.Start()
	}
	// Every server has srv1's CA files, issued its own certificates from them, and started
	// itself again (the same process: the PID its supervisor — here the test — follows).
	sameCAs := func(what string, bundleLen int) {
		t.Helper()
		want := readFile(t, filepath.Join(first.Dir, "pki", "ca.crt"))
		newCA, err := certutil.ParseCertsPEM([]byte(want))
		if err != nil || len(newCA) != bundleLen {
			t.Fatalf("srv1's ca.crt: %d certificates (%v), want %d", len(newCA), err, bundleLen)
		}
		framework.Eventually(t, 3*time.Minute, what, func() (bool, string) {
			for i, s := range servers[1:] {
				for _, f := range []string{"pki/ca.crt", "pki/etcd/ca.crt", "pki/front-proxy-ca.crt"} {
					a, _ := os.ReadFile(filepath.Join(first.Dir, f))
					b, _ := os.ReadFile(filepath.Join(s.Dir, f))
					if string(a) != string(b) {
						return false, fmt.Sprintf("srv%d's %s differs", i+2, f)
					}
				}
				// Issued again at its start: from the new CA, with the cross-signed one after
				// it while the rotation is under way, alone once it is complete.
				served, err := certutil.ParseCertsPEM([]byte(readFile(t, filepath.Join(s.Dir, "pki", "apiserver.crt"))))
				if err != nil || served[0].CheckSignatureFrom(newCA[0]) != nil || len(served) != bundleLen {
					return false, fmt.Sprintf("srv%d's API server certificate is not from the new CA, with %d certificates, yet", i+2, bundleLen)
				}
				if err := framework.ListNodes(first.Kubeconfig, urls[i+1]); err != nil {
					return false, fmt.Sprintf("srv%d: %v", i+2, err)
				}
				if !s.Running() || s.PID() != pids[i+1] {
					return false, fmt.Sprintf("srv%d is not the process it was (running %v)", i+2, s.Running())
				}
			}
			return true, ""
		})
		framework.Eventually(t, time.Minute, "three voting etcd members", func() (bool, string) {
			got := members(t, first)
			return got == three, got
		})
	}

	load := startWriteLoad(ctx, failoverClient(t, first, urls), "carot")
	framework.Eventually(t, 20*time.Second, "writes flowing", func() (bool, string) { return load.Count() > 20, fmt.Sprint(load.Count()) })
	rotateCA()
	sameCAs("srv2 and srv3 took the rotated CAs", 2)
	for i, s := range servers[1:] {
		if n := strings.Count(s.Log(), "took the CAs another server rotated"); n != 1 {
			t.Errorf("srv%d's log tells of taking the rotated CAs %d times, want once", i+2, n)
		}
	}
	before := load.Count()
	framework.Eventually(t, 30*time.Second, "writes continue after the rotation", func() (bool, string) {
		return load.Count() > before+20, fmt.Sprint(load.Count() - before)
	})
	load.Stop()
	load.CheckNoneLost(ctx, t, first.Client(t))
	for i := range servers {
		if err := framework.ListNodes(first.Kubeconfig, urls[i]); err != nil {
			t.Errorf("the new admin kubeconfig at srv%d: %v", i+1, err)
		}
		if err := framework.ListNodes(oldAdmin, urls[i]); err != nil {
			t.Errorf("a kubeconfig of the old CA at srv%d during the rotation: %v", i+1, err)
		}
	}

	rotateCA("--complete")
	sameCAs("srv2 and srv3 completed the rotation", 1)
	for i := range servers {
		if err := framework.ListNodes(first.Kubeconfig, urls[i]); err != nil {
			t.Errorf("the new admin kubeconfig at srv%d after completing: %v", i+1, err)
		}
		if err := framework.ListNodes(oldAdmin, urls[i]); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("a kubeconfig of the old CA at srv%d after completing: %v, want a certificate error", i+1, err)
		}
	}
}
