package agent

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestCARotation rotates every CA of a server with a joined agent, as an operator would:
// stop the server, `skiff certificate rotate-ca`, start it. During the rotation a kubeconfig
// copied before it (trusting only the old CA, with a certificate of it) still works; the agent
// takes the new bundle, starts itself again (same PID) and renews its certificates from the
// new CA, its node staying Ready and its API reachable. After `rotate-ca --complete` the old
// kubeconfig is refused, the agent trusts the new CA alone, and it restarts with the token it
// joined with (whose CA hash is the old bundle's).
func TestCARotation(t *testing.T) {
	s := framework.StartServer(t)
	bin := framework.Binary(t)
	const node = "carot"
	dir := t.TempDir()
	a := startJoinedAgent(t, s, bin, node, dir, "--cluster-ca-check-interval", "2s")
	waitNodeReady(t, s, node)
	caFile, agentCA := filepath.Join(s.Dir, "pki", "ca.crt"), filepath.Join(dir, "pki", "ca.crt")
	oldCA := certOf(t, caFile)
	oldAdmin := filepath.Join(t.TempDir(), "old-admin.kubeconfig")
	if b, err := os.ReadFile(s.Kubeconfig); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(oldAdmin, b, 0o600); err != nil {
		t.Fatal(err)
	}
	certificate := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"certificate", "--data-dir", s.Dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("skiff certificate %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	etcdPort := strconv.Itoa(s.EtcdPort)
	if out, err := exec.Command(bin, "certificate", "rotate-ca", "--data-dir", s.Dir, "--etcd-client-port", etcdPort).CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "the server is running") {
		t.Fatalf("rotate-ca on a running server: %v\n%s", err, out)
	}

	s.Stop()
	t.Log(certificate("rotate-ca", "--etcd-client-port", etcdPort))
	s.Start()
	if err := s.WaitReady(time.Minute); err != nil {
		t.Fatal(err)
	}
	bundle := bundleOf(t, caFile)
	if len(bundle) != 2 || !bundle[1].Equal(oldCA) {
		t.Fatalf("the server's ca.crt holds %d certificates, want the new CA and the old", len(bundle))
	}
	newCA := bundle[0]
	if out := certificate("check"); !strings.Contains(out, "CA rotation under way for ca, etcd/ca, front-proxy-ca") {
		t.Errorf("skiff certificate check during the rotation does not say so:\n%s", out)
	}
	// The real kubectl, with the kubeconfig copied before the rotation.
	kubectl := func(kubeconfig string) (string, error) {
		out, err := exec.Command(framework.Kubectl(t, 33), "--kubeconfig", kubeconfig, "get", "nodes", "-o", "name").CombinedOutput()
		return string(out), err
	}
	if out, err := kubectl(oldAdmin); err != nil || !strings.Contains(out, "node/"+node) {
		t.Errorf("kubectl with a kubeconfig of the old CA during the rotation: %v\n%s", err, out)
	}

	eventually(t, 2*time.Minute, "the agent trusts the bundle and holds certificates of the new CA", func() (bool, string) {
		got := bundleOf(t, agentCA)
		client, serving := certOf(t, filepath.Join(dir, "pki", "client.crt")), certOf(t, filepath.Join(dir, "pki", "agent.crt"))
		return len(got) == 2 && got[0].Equal(newCA) && client.CheckSignatureFrom(newCA) == nil && serving.CheckSignatureFrom(newCA) == nil,
			fmt.Sprintf("bundle of %d, client from %s, serving from %s", len(got), client.Issuer.CommonName, serving.Issuer.CommonName)
	})
	if !strings.Contains(a.log(), "starting again") {
		t.Error("the agent's log does not say it started again for the new bundle")
	}
	select {
	case <-a.done:
		t.Fatalf("the agent process exited (%v) instead of starting itself again", a.err)
	default:
	}
	agentWorks(t, s, node)

	s.Stop()
	t.Log(certificate("rotate-ca", "--complete", "--etcd-client-port", etcdPort))
	s.Start()
	if err := s.WaitReady(time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := bundleOf(t, caFile); len(got) != 1 || !got[0].Equal(newCA) {
		t.Fatalf("after --complete the server's ca.crt holds %d certificates, want the new CA alone", len(got))
	}
	if out, err := kubectl(oldAdmin); err == nil || !strings.Contains(out, "certificate") {
		t.Errorf("kubectl with a kubeconfig of the old CA after the rotation completed: %v, want a certificate error\n%s", err, out)
	}
	if out, err := kubectl(s.Kubeconfig); err != nil || !strings.Contains(out, "node/"+node) {
		t.Errorf("kubectl with the new admin kubeconfig: %v\n%s", err, out)
	}
	eventually(t, time.Minute, "the agent trusts the new CA alone", func() (bool, string) {
		got := bundleOf(t, agentCA)
		return len(got) == 1 && got[0].Equal(newCA), fmt.Sprintf("bundle of %d", len(got))
	})
	agentWorks(t, s, node)

	// The agent restarts with the token it joined with, whose CA hash was the old bundle's.
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the agent did not stop on SIGTERM")
	}
	startJoinedAgent(t, s, bin, node, dir, "--cluster-ca-check-interval", "2s")
	agentWorks(t, s, node)
}

func bundleOf(t *testing.T, path string) []*x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := certutil.ParseCertsPEM(b)
	if err != nil {
		t.Fatal(err)
	}
	return certs
}

// agentWorks: the node renews its Lease from now on, and the API server reaches its API.
func agentWorks(t *testing.T, s *framework.Server, node string) {
	t.Helper()
	c := s.Client(t)
	since := time.Now()
	eventually(t, 90*time.Second, "node "+node+" renews its Lease and serves its API to the API server", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := c.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if l.Spec.RenewTime == nil || !l.Spec.RenewTime.After(since) {
			return false, fmt.Sprint("lease renewed at ", l.Spec.RenewTime)
		}
		body, err := c.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + node + "/proxy/healthz").DoRaw(ctx)
		return err == nil && string(body) == "ok", fmt.Sprintf("node proxy: %q %v", body, err)
	})
}
