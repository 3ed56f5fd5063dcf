package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// EtcdMember is one process of an EtcdCluster.
type EtcdMember struct {
	Name      string
	ClientURL string
	cmd       *exec.Cmd
	args      []string
}

// EtcdCluster is a real etcd cluster of Debian's etcd-server on loopback, with TLS and
// client-certificate verification by the PKI's etcd CA.
type EtcdCluster struct {
	Members []*EtcdMember
	pkiDir  string
}

// StartEtcdCluster starts n members using the certificates under pkiDir/etcd and waits
// until the cluster answers.
func StartEtcdCluster(tb testing.TB, pkiDir string, n int) *EtcdCluster {
	tb.Helper()
	if _, err := exec.LookPath("etcd"); err != nil {
		tb.Fatal("Debian's etcd-server is not installed (make deps installs it)")
	}
	c := &EtcdCluster{pkiDir: pkiDir}
	var initial []string
	peers := make([]string, n)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("m%d", i)
		peers[i] = fmt.Sprintf("https://127.0.0.1:%d", FreePort(tb))
		initial = append(initial, name+"="+peers[i])
		c.Members = append(c.Members, &EtcdMember{Name: name, ClientURL: fmt.Sprintf("https://127.0.0.1:%d", FreePort(tb))})
	}
	etcdPKI := filepath.Join(pkiDir, "etcd")
	token := fmt.Sprintf("skiff-e2e-%d", time.Now().UnixNano())
	for i, m := range c.Members {
		dir := tb.TempDir()
		args := []string{"--name", m.Name, "--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", m.ClientURL, "--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new", "--initial-cluster-token", token,
			"--cert-file", filepath.Join(etcdPKI, "server.crt"), "--key-file", filepath.Join(etcdPKI, "server.key"),
			"--client-cert-auth", "--trusted-ca-file", filepath.Join(etcdPKI, "ca.crt"),
			"--peer-cert-file", filepath.Join(etcdPKI, "peer.crt"), "--peer-key-file", filepath.Join(etcdPKI, "peer.key"),
			"--peer-client-cert-auth", "--peer-trusted-ca-file", filepath.Join(etcdPKI, "ca.crt"),
			"--logger", "zap", "--log-outputs", filepath.Join(dir, "etcd.log")}
		m.args = args
		if err := m.start(); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { c.Kill(m) })
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := c.Etcdctl(c.Endpoints(), "endpoint", "health"); err == nil {
			return c
		} else if time.Now().After(deadline) {
			tb.Fatalf("etcd cluster not healthy: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Endpoints returns the client URLs of the members still running.
func (c *EtcdCluster) Endpoints() []string {
	var out []string
	for _, m := range c.Members {
		if m.cmd != nil && m.cmd.ProcessState == nil {
			out = append(out, m.ClientURL)
		}
	}
	return out
}

func (m *EtcdMember) start() error {
	cmd := exec.Command("etcd", m.args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	m.cmd = cmd
	return nil
}

// Restart starts a killed member again on its data directory (it rejoins the cluster).
func (c *EtcdCluster) Restart(tb testing.TB, m *EtcdMember) {
	tb.Helper()
	if m.cmd != nil && m.cmd.ProcessState == nil {
		tb.Fatalf("etcd member %s is running", m.Name)
	}
	if err := m.start(); err != nil {
		tb.Fatal(err)
	}
}

// Kill stops a member by PID (SIGKILL) and reaps it.
func (c *EtcdCluster) Kill(m *EtcdMember) {
	if m.cmd == nil || m.cmd.ProcessState != nil {
		return
	}
	_ = m.cmd.Process.Kill()
	_ = m.cmd.Wait()
}

// Etcdctl runs etcdctl against endpoints with the health-check client certificate.
func (c *EtcdCluster) Etcdctl(endpoints []string, args ...string) (string, error) {
	etcdPKI := filepath.Join(c.pkiDir, "etcd")
	base := []string{"--endpoints=" + strings.Join(endpoints, ","),
		"--cacert=" + filepath.Join(etcdPKI, "ca.crt"),
		"--cert=" + filepath.Join(etcdPKI, "healthcheck-client.crt"),
		"--key=" + filepath.Join(etcdPKI, "healthcheck-client.key"), "--dial-timeout=2s", "--command-timeout=5s"}
	cmd := exec.Command("etcdctl", append(base, args...)...)
	cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("etcdctl %v: %v: %s", args, err, out)
	}
	return string(out), nil
}

// Revision returns the cluster's current revision.
func (c *EtcdCluster) Revision(tb testing.TB) int64 {
	tb.Helper()
	out, err := c.Etcdctl(c.Endpoints(), "endpoint", "status", "-w", "fields")
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, `"Revision" : `) {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(l, `"Revision" : `)), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	tb.Fatalf("no revision in:\n%s", out)
	return 0
}

// PID is the process ID of member i.
func (c *EtcdCluster) PID(i int) int { return c.Members[i].cmd.Process.Pid }
