package scale

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/controlplane/pki"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// upstreamBin is where `make scale-upstream` puts upstream's binaries.
const upstreamBin = "upstream/bin"

// upstreamTarget is upstream's control plane as kubeadm runs it, on loopback: etcd,
// kube-apiserver (Node and RBAC authorization, default admission), kube-scheduler and
// kube-controller-manager (node IPAM on, as skiff's), each with its own identity. The
// controller manager gets 100 requests/s, as upstream's own 5,000-node tests give it (its
// default 20/s would make it, not the server, the bottleneck of the burst).
type upstreamTarget struct {
	dir   string
	procs []*exec.Cmd
}

func init() {
	startUpstream = func(t *testing.T) Target {
		for _, b := range []string{"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager"} {
			if _, err := os.Stat(filepath.Join(upstreamBin, b)); err != nil {
				t.Fatalf("-scale.upstream: %s is missing: `make scale-upstream` builds it", b)
			}
		}
		u := &upstreamTarget{dir: t.TempDir()}
		t.Cleanup(u.stop)
		if err := u.start(t); err != nil {
			t.Fatal(err)
		}
		return u
	}
}

func (u *upstreamTarget) start(t *testing.T) error {
	layout, err := pki.Ensure(pki.Options{Dir: filepath.Join(u.dir, "pki"), ServiceIP: net.ParseIP("10.96.0.1")})
	if err != nil {
		return err
	}
	ca, err := pki.LoadCA(layout.CA())
	if err != nil {
		return err
	}
	port := framework.FreePort(t)
	server := fmt.Sprintf("https://127.0.0.1:%d", port)
	for _, id := range []struct{ file, user, group string }{
		{"admin", "kubernetes-admin", "system:masters"},
		{"scheduler", "system:kube-scheduler", ""},
		{"controller-manager", "system:kube-controller-manager", ""},
	} {
		var groups []string
		if id.group != "" {
			groups = []string{id.group}
		}
		if err := pki.WriteKubeconfig(filepath.Join(u.dir, id.file+".kubeconfig"), server, ca, id.user, groups); err != nil {
			return err
		}
	}
	etcdClient, etcdPeer := framework.FreePort(t), framework.FreePort(t)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	u.run(t, "etcd", "--name", "scale", "--data-dir", filepath.Join(u.dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "scale="+peerURL, "--quota-backend-bytes", strconv.Itoa(8<<30))
	u.run(t, "kube-apiserver",
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"--tls-cert-file", layout.APIServer().Cert, "--tls-private-key-file", layout.APIServer().Key,
		"--client-ca-file", layout.CA().Cert,
		"--service-account-key-file", layout.SAPub(), "--service-account-signing-key-file", layout.SAKey(),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range", "10.96.0.0/12",
		"--authorization-mode", "Node,RBAC", "--allow-privileged",
		// Upstream refuses a loopback advertise address for the kubernetes Service's
		// endpoints; nothing here dials that Service.
		"--endpoint-reconciler-type", "none",
		"--cert-dir", filepath.Join(u.dir, "apiserver-certs"))
	if err := u.waitReady(90 * time.Second); err != nil {
		return err
	}
	u.run(t, "kube-scheduler", "--kubeconfig", filepath.Join(u.dir, "scheduler.kubeconfig"),
		"--authentication-kubeconfig", filepath.Join(u.dir, "scheduler.kubeconfig"),
		"--authorization-kubeconfig", filepath.Join(u.dir, "scheduler.kubeconfig"),
		"--secure-port", "0")
	u.run(t, "kube-controller-manager", "--kubeconfig", filepath.Join(u.dir, "controller-manager.kubeconfig"),
		"--authentication-kubeconfig", filepath.Join(u.dir, "controller-manager.kubeconfig"),
		"--authorization-kubeconfig", filepath.Join(u.dir, "controller-manager.kubeconfig"),
		"--secure-port", "0",
		"--service-account-private-key-file", layout.SAKey(), "--root-ca-file", layout.CA().Cert,
		"--cluster-signing-cert-file", layout.CA().Cert, "--cluster-signing-key-file", layout.CA().Key,
		"--use-service-account-credentials",
		"--allocate-node-cidrs", "--cluster-cidr", "10.128.0.0/9", "--node-cidr-mask-size", "24",
		"--service-cluster-ip-range", "10.96.0.0/12",
		"--kube-api-qps", "100", "--kube-api-burst", "100")
	return nil
}

func (u *upstreamTarget) run(t *testing.T, name string, args ...string) {
	log, err := os.Create(filepath.Join(u.dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(upstreamBin, name), args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	u.procs = append(u.procs, cmd)
}

func (u *upstreamTarget) waitReady(timeout time.Duration) error {
	cfg, err := u.RESTConfig()
	if err != nil {
		return err
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && !exitedProcess(u.procs[len(u.procs)-1]) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		body, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		cancel()
		if err == nil && strings.TrimSpace(string(body)) == "ok" {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(u.dir, "kube-apiserver.log"))
	return fmt.Errorf("kube-apiserver not ready after %s:\n%s", timeout, tailLines(string(log), 30))
}

func exitedProcess(c *exec.Cmd) bool {
	return syscall.Kill(c.Process.Pid, 0) != nil || zombie(c.Process.Pid)
}

// zombie reports a child that has exited but not been waited for.
func zombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}

func (u *upstreamTarget) stop() {
	for i := len(u.procs) - 1; i >= 0; i-- {
		p := u.procs[i]
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
}

func (u *upstreamTarget) Name() string       { return "upstream" }
func (u *upstreamTarget) Kubeconfig() string { return filepath.Join(u.dir, "admin.kubeconfig") }
func (u *upstreamTarget) RESTConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", u.Kubeconfig())
}
func (u *upstreamTarget) PIDs() []int {
	var pids []int
	for _, p := range u.procs {
		pids = append(pids, p.Process.Pid)
	}
	return pids
}
func (u *upstreamTarget) EtcdDBBytes() int64 { return DirBytes(filepath.Join(u.dir, "etcd"), "db") }
