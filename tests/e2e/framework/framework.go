// Package framework starts real skiff servers for end-to-end tests: each on its own loopback
// ports with its own data directory, stopped by PID and removed when the test ends (pass or
// fail). It also runs the real kubectl and etcdctl against them.
package framework

import (
	"bytes"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Binary returns the skiff binary under test: $SKIFF_BIN (set by the Makefile), or one built
// once per test process.
func Binary(tb testing.TB) string {
	tb.Helper()
	if b := os.Getenv("SKIFF_BIN"); b != "" {
		if _, err := os.Stat(b); err == nil {
			return b
		}
	}
	return PlainBinary(tb)
}

// PlainBinary is skiff from a plain `go build ./cmd/skiff`, alone in an empty directory (no
// skiff-cni or image archives beside it), built once per test process.
func PlainBinary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "skiff-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		built = filepath.Join(dir, "skiff")
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..", "..")
		cmd := exec.Command("go", "build", "-o", built, "./cmd/skiff")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return built
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// FreePort returns a loopback TCP port nobody listens on right now, chosen below the kernel's
// ephemeral range (32768-60999 here): a port from that range can be taken as the source port
// of any outgoing connection between this call and the server's bind, which made parallel test
// packages collide. Ports handed out once in this process are not handed out again.
func FreePort(tb testing.TB) int {
	tb.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for attempt := 0; attempt < 1000; attempt++ {
		port := 20000 + rand.IntN(12000)
		if portsGiven[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		portsGiven[port] = true
		return port
	}
	tb.Fatal("no free loopback port in 20000-31999")
	return 0
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// Server is a running `skiff server`.
type Server struct {
	Dir        string
	Port       int
	EtcdPort   int
	Kubeconfig string
	// CgroupRoot is where its agent's pods get their cgroups (NewServerWithAgent).
	CgroupRoot string
	// SchedulerAddr and ControllerManagerAddr serve health and metrics over HTTPS.
	SchedulerAddr, ControllerManagerAddr string
	// Env is added to the test's environment for the server process (e.g. GOGC=100).
	Env []string
	// Bin is the skiff binary the server runs (Binary when empty): another build, as a test
	// of version skew runs.
	Bin  string
	args []string
	cmd  *exec.Cmd
	log  *os.File
	tb   testing.TB
}

// StartServer starts `skiff server --disable-agent` on free loopback ports and waits until
// /readyz passes. extra flags are appended (e.g. --etcd-servers).
func StartServer(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	s := NewServer(tb, tb.TempDir(), extra...)
	s.Start()
	return s
}

// NewServer prepares a server in dir without starting it (see Start).
func NewServer(tb testing.TB, dir string, extra ...string) *Server {
	tb.Helper()
	s := &Server{Dir: dir, Port: FreePort(tb), EtcdPort: FreePort(tb), tb: tb,
		SchedulerAddr:         "127.0.0.1:" + strconv.Itoa(FreePort(tb)),
		ControllerManagerAddr: "127.0.0.1:" + strconv.Itoa(FreePort(tb))}
	s.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	s.args = append([]string{"server", "--disable-agent", "--data-dir", dir,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(s.Port),
		"--etcd-client-port", strconv.Itoa(s.EtcdPort),
		"--etcd-peer-port", strconv.Itoa(FreePort(tb)),
		"--etcd-metrics-port", strconv.Itoa(FreePort(tb)),
		"--controller-manager-address", s.ControllerManagerAddr,
		"--scheduler-address", s.SchedulerAddr,
	}, extra...)
	tb.Cleanup(s.Stop)
	return s
}

// Certs creates the cluster PKI in dir with `skiff certs`.
func Certs(tb testing.TB, dir string) {
	tb.Helper()
	if out, err := exec.Command(Binary(tb), "certs", "--data-dir", dir).CombinedOutput(); err != nil {
		tb.Fatalf("skiff certs: %v\n%s", err, out)
	}
}

// Start (re)starts the server process with the same flags and data and waits for /readyz.
func (s *Server) Start() time.Duration {
	s.tb.Helper()
	log, err := os.OpenFile(filepath.Join(s.Dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.tb.Fatal(err)
	}
	s.log = log
	bin := s.Bin
	if bin == "" {
		bin = Binary(s.tb)
	}
	s.cmd = exec.Command(bin, s.args...)
	s.cmd.Env = append(os.Environ(), s.Env...)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatal(err)
	}
	if err := s.WaitReady(60 * time.Second); err != nil {
		s.tb.Fatalf("%v\n--- server log ---\n%s", err, s.Log())
	}
	return time.Since(start)
}

// WaitReady polls /readyz with the admin credentials.
func (s *Server) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if _, err := os.Stat(s.Kubeconfig); err == nil {
			cfg, err := s.restConfig()
			if err == nil {
				body, err := s.raw(cfg, "/readyz")
				if err == nil && strings.TrimSpace(body) == "ok" {
					return nil
				}
				last = err
			}
		}
		if s.cmd.ProcessState != nil || exited(s.cmd.Process.Pid) {
			return fmt.Errorf("skiff server exited")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("skiff server not ready after %s: %v", timeout, last)
}

func (s *Server) raw(cfg *rest.Config, path string) (string, error) {
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return "", err
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: 2 * time.Second}
	resp, err := c.Get(cfg.Host + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != 200 {
		return b.String(), fmt.Errorf("%s: %s", path, resp.Status)
	}
	return b.String(), nil
}

// Stop terminates the server (SIGTERM, then SIGKILL) and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	if s.log != nil {
		s.log.Close()
	}
	if s.tb.Failed() {
		s.tb.Logf("--- server log (tail) ---\n%s", tail(s.Log(), 60))
	}
}

// Kill stops the server abruptly (SIGKILL), as a crashed machine would.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	if s.log != nil {
		s.log.Close()
	}
}

// AddArgs appends flags for the next Start (a restart with another configuration).
func (s *Server) AddArgs(args ...string) { s.args = append(s.args, args...) }

// Args are the server's command-line arguments.
func (s *Server) Args() []string { return s.args }

// Running says whether the server process is still alive.
func (s *Server) Running() bool {
	return s.cmd != nil && s.cmd.Process != nil && s.cmd.ProcessState == nil && !exited(s.cmd.Process.Pid)
}

// PID is the server's process ID.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Log returns the server's output so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "server.log"))
	return string(b)
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (s *Server) restConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
}

// RESTConfig returns the admin client configuration.
func (s *Server) RESTConfig(tb testing.TB) *rest.Config {
	tb.Helper()
	cfg, err := s.restConfig()
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

// Client returns a client-go clientset with admin credentials.
func (s *Server) Client(tb testing.TB) kubernetes.Interface {
	tb.Helper()
	c, err := kubernetes.NewForConfig(s.RESTConfig(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// HTTPSGet fetches a URL without verifying the server (the components' self-signed health
// endpoints) and returns status and body.
func HTTPSGet(tb testing.TB, url string) (int, string) {
	tb.Helper()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// AnonymousStatus returns the HTTP status of an unauthenticated GET.
func (s *Server) AnonymousStatus(tb testing.TB, path string) int {
	tb.Helper()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 5 * time.Second}
	resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d%s", s.Port, path))
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Kubectl returns the path of the installed kubectl 1.<minor>; the test is skipped... never:
// the machines this suite runs on all have them, so a missing one fails the test.
func Kubectl(tb testing.TB, minor int) string {
	tb.Helper()
	p := fmt.Sprintf("/usr/lib/google-cloud-sdk/bin/kubectl.1.%d", minor)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("kubectl 1.%d not installed at %s", minor, p)
	}
	return p
}

// Run runs a command with KUBECONFIG pointing at the server and returns combined output.
func (s *Server) Run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.Kubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Etcdctl runs Debian's etcdctl against the embedded etcd with the health-check client
// certificate, as the seed shows.
func (s *Server) Etcdctl(tb testing.TB, args ...string) string {
	tb.Helper()
	pki := filepath.Join(s.Dir, "pki", "etcd")
	base := []string{"--endpoints=https://127.0.0.1:" + strconv.Itoa(s.EtcdPort),
		"--cacert=" + filepath.Join(pki, "ca.crt"),
		"--cert=" + filepath.Join(pki, "healthcheck-client.crt"),
		"--key=" + filepath.Join(pki, "healthcheck-client.key")}
	cmd := exec.Command("etcdctl", append(base, args...)...)
	cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("etcdctl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// Eventually polls f until it reports true, failing the test with f's last state after timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := f()
		if ok {
			return
		}
		last = state
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not reached within %s; last state: %s", what, timeout, last)
}

// exited reports whether pid has exited (a zombie not yet reaped, or gone).
func exited(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// Main is the TestMain of every end-to-end package: under -short (make unit: no root, no
// network namespaces, no real components) the package's tests are skipped, saying so; make
// test and make e2e run them.
func Main(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipped: end-to-end tests need root, network namespaces, etcd and containerd (make test runs them; make unit is -short)")
		os.Exit(0)
	}
	os.Exit(m.Run())
}
