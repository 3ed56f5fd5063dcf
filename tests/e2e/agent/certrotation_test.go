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

	"github.com/skiff-sh/skiff/agent/cgroups"
	"github.com/skiff-sh/skiff/internal/certfile"
	"github.com/skiff-sh/skiff/lab"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

func certOf(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	c, err := certfile.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAgentCertificateRotation signs node certificates for three minutes (the controller
// manager's --cluster-signing-duration), so a joined agent's client and serving certificates
// come due while it runs: it renews both through CSRs made as itself, and past the first
// ones' expiry its node still renews its Lease and the API server still reaches its API.
func TestAgentCertificateRotation(t *testing.T) {
	s := framework.StartServer(t, "--cluster-signing-duration", "3m")
	c := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const node = "rotator"
	dir := t.TempDir()
	startJoinedAgent(t, s, framework.Binary(t), node, dir)
	clientCrt, servingCrt := filepath.Join(dir, "pki", "client.crt"), filepath.Join(dir, "pki", "agent.crt")
	eventually(t, 90*time.Second, "the agent joined", func() (bool, string) {
		_, err1 := os.Stat(clientCrt)
		_, err2 := os.Stat(servingCrt)
		return err1 == nil && err2 == nil, fmt.Sprint(err1, err2)
	})
	firstClient, firstServing := certOf(t, clientCrt), certOf(t, servingCrt)
	if life := firstClient.NotAfter.Sub(firstClient.NotBefore); life > 10*time.Minute {
		t.Fatalf("the client certificate lasts %v: --cluster-signing-duration not applied", life)
	}
	eventually(t, 3*time.Minute, "both certificates renewed before they expire", func() (bool, string) {
		cl, sv := certOf(t, clientCrt), certOf(t, servingCrt)
		return cl.SerialNumber.Cmp(firstClient.SerialNumber) != 0 && sv.SerialNumber.Cmp(firstServing.SerialNumber) != 0 &&
			time.Now().Before(firstClient.NotAfter), fmt.Sprint(cl.SerialNumber, sv.SerialNumber)
	})
	// Past the first certificates' expiry, the agent works with the new ones.
	time.Sleep(time.Until(later(firstClient.NotAfter, firstServing.NotAfter).Add(5 * time.Second)))
	after := time.Now()
	eventually(t, 30*time.Second, "the node's Lease renewed after the first client certificate expired", func() (bool, string) {
		l, err := c.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(after), fmt.Sprint(l.Spec.RenewTime)
	})
	body, err := c.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + node + "/proxy/healthz").DoRaw(ctx)
	if err != nil || string(body) != "ok" {
		t.Errorf("the API server reaching the agent's API past the first serving certificate's expiry: %q %v", body, err)
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// joinedAgent is a `skiff agent` joined to a server with its token, its containerd and pods in
// a network namespace of the test's, everything under its data directory.
type joinedAgent struct {
	cmd     *exec.Cmd
	logFile string
	done    chan struct{} // closed when the process has exited, with err its Wait's
	err     error
}

// startJoinedAgent starts bin as an agent named node joining s, with data in dir; the agent
// is stopped, and its log shown if the test failed, at cleanup.
func startJoinedAgent(t *testing.T, s *framework.Server, bin, node, dir string, extra ...string) *joinedAgent {
	t.Helper()
	tokenBytes, err := os.ReadFile(filepath.Join(s.Dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	return startAgentWithToken(t, s, bin, node, dir, string(tokenBytes), extra...)
}

// startAgentWithToken is startJoinedAgent joining with the given token.
func startAgentWithToken(t *testing.T, s *framework.Server, bin, node, dir, token string, extra ...string) *joinedAgent {
	t.Helper()
	cni, images := framework.AgentArtifacts(t)
	_, nsPath := framework.Netns(t)
	t.Cleanup(func() { framework.KillUnder(dir) })
	// The agent pins its policy maps under its node's name; they outlive it.
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Join("/sys/fs/bpf/skiff", node)) })
	root := fmt.Sprintf("/skiff/e2e-%s-%d", node, os.Getpid())
	t.Cleanup(func() { _ = cgroups.KillAll(cgroups.Mounts(), root) })
	logFile, err := os.OpenFile(filepath.Join(dir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "agent", "--server", fmt.Sprintf("https://127.0.0.1:%d", s.Port), "--token", strings.TrimSpace(token),
		"--data-dir", dir, "--netns", nsPath, "--bgp=false", "--service-proxy=false", "--dns=false", "--eviction-hard="+lab.EvictionHard, "--image-gc-high-threshold=100",
		"--cgroup-root", root, "--node-name", node, "--node-ip", "127.0.0.1", "--port", strconv.Itoa(framework.FreePort(t)),
		"--healthz-address", "127.0.0.1:"+strconv.Itoa(framework.FreePort(t)),
		"--cni-plugin", cni, "--images-dir", images, "--pod-log-dir", filepath.Join(dir, "logs"))
	cmd.Args = append(cmd.Args, extra...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &joinedAgent{cmd: cmd, logFile: logFile.Name(), done: make(chan struct{})}
	go func() { a.err = cmd.Wait(); close(a.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-a.done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-a.done
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", a.log())
		}
	})
	return a
}

func (a *joinedAgent) log() string {
	b, _ := os.ReadFile(a.logFile)
	return string(b)
}
