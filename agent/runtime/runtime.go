// Package runtime supervises the node's containerd: it writes a config of its own (version 2,
// its own root, state and socket, so it never collides with a system containerd), starts
// Debian's containerd with it — inside a given network namespace when the node is one of the
// lab's — restarts it if it dies, and imports skiff's images into the k8s.io namespace, where
// CRI looks for them.
package runtime

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Options configure the supervised containerd.
type Options struct {
	// Dir holds config.toml, root/, state/ and containerd.sock.
	Dir string
	// CNIBinDir and CNIConfDir are where CRI finds skiff-cni and its config.
	CNIBinDir, CNIConfDir string
	// SandboxImage is the pause image (localhost/skiff/pause:1).
	SandboxImage string
	// PodLogDir is where CRI writes container logs (/var/log/pods).
	PodLogDir string
	// Netns, if set, is the network namespace (a /run/netns path) containerd runs in. It is
	// entered with nsenter --net, not `ip netns exec`, which remounts /sys and hides cgroups.
	Netns string
	// Binary is the containerd executable (containerd on PATH).
	Binary string
	// RegistryConfigDir, if set, is CRI's registry config_path: a directory of per-registry
	// hosts.toml files (<dir>/<host[:port]>/hosts.toml, containerd's certs.d layout), read at
	// each pull, so registries (plain-HTTP ones included) can be added without a restart.
	RegistryConfigDir string
	// LowerOOMScores lets containerd give containers OOM score adjustments below its own (a
	// Guaranteed pod's -997), which takes CAP_SYS_RESOURCE; without it they are raised to
	// containerd's own (restrict_oom_score_adj), or sandboxes could not start. Start sets it
	// from the agent's capabilities (CanLowerOOMScores).
	LowerOOMScores bool
}

// CanLowerOOMScores reports whether this process holds CAP_SYS_RESOURCE, which lowering an
// OOM score adjustment below its own takes (a root in a container may lack it).
func CanLowerOOMScores() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<capSysResource) != 0
		}
	}
	return false
}

// capSysResource is CAP_SYS_RESOURCE's bit.
const capSysResource = 24

// Config renders containerd's configuration.
func Config(o Options) string {
	c := fmt.Sprintf(`version = 2
root = %q
state = %q

[grpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # Without CAP_SYS_RESOURCE (a root in a container) lower scores fail RunPodSandbox ("can't
  # get final child's PID from pipe"): raise them to containerd's own instead.
  restrict_oom_score_adj = %t
  enable_selinux = false

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = false

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = %q
  conf_dir = %q
  max_conf_num = 1
`, filepath.Join(o.Dir, "root"), filepath.Join(o.Dir, "state"), Socket(o), o.SandboxImage, !o.LowerOOMScores, o.CNIBinDir, o.CNIConfDir)
	if o.RegistryConfigDir != "" {
		c += fmt.Sprintf(`
[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = %q
`, o.RegistryConfigDir)
	}
	return c
}

// Socket is the containerd socket of these options.
func Socket(o Options) string { return filepath.Join(o.Dir, "containerd.sock") }

// Containerd is a supervised containerd, or one the node runs itself (see Connect).
type Containerd struct {
	opts Options
	// endpoint is the CRI address (unix:///...).
	endpoint string
	log      *slog.Logger
	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	cancel   context.CancelFunc
}

// Start writes the config, starts containerd and waits until its CRI service answers; a
// supervisor restarts it (with backoff) until ctx ends or Close is called.
func Start(ctx context.Context, o Options, log *slog.Logger) (*Containerd, error) {
	if o.Binary == "" {
		o.Binary = "containerd"
	}
	for _, d := range []string{o.Dir, o.CNIBinDir, o.CNIConfDir} {
		if d != "" {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, err
			}
		}
	}
	o.LowerOOMScores = CanLowerOOMScores()
	if err := os.WriteFile(filepath.Join(o.Dir, "config.toml"), []byte(Config(o)), 0o644); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &Containerd{opts: o, endpoint: "unix://" + Socket(o), log: log, done: make(chan struct{}), cancel: cancel}
	if err := c.spawn(); err != nil {
		cancel()
		return nil, err
	}
	if err := c.waitReady(ctx, time.Minute); err != nil {
		c.Close()
		return nil, err
	}
	go c.supervise(ctx)
	return c, nil
}

// Connect uses a containerd that something else runs (--container-runtime-endpoint), as a
// kubelet does; it must answer CRI within a minute. Its configuration (CNI directories, sandbox
// image, log directory) is the operator's business.
func Connect(ctx context.Context, endpoint string) (*Containerd, error) {
	if !strings.HasPrefix(endpoint, "unix://") {
		if !strings.HasPrefix(endpoint, "/") {
			return nil, fmt.Errorf("container runtime endpoint %q: want unix:///path or an absolute socket path", endpoint)
		}
		endpoint = "unix://" + endpoint
	}
	c := &Containerd{endpoint: endpoint}
	if err := c.waitReady(ctx, time.Minute); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Containerd) spawn() error {
	args := []string{"--config", filepath.Join(c.opts.Dir, "config.toml")}
	name := c.opts.Binary
	if c.opts.Netns != "" {
		args = append([]string{"--net=" + c.opts.Netns, "--", c.opts.Binary}, args...)
		name = "nsenter"
	}
	logf, err := os.OpenFile(filepath.Join(c.opts.Dir, "containerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// containerd dies with the agent; its shims (and so the containers) outlive both, as with
	// a kubelet restart. Pdeathsig follows the forking thread: see startFromStableThread.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := startFromStableThread(cmd); err != nil {
		logf.Close()
		return fmt.Errorf("start containerd: %w", err)
	}
	go func() { _ = cmd.Wait(); logf.Close() }()
	c.mu.Lock()
	c.cmd = cmd
	c.mu.Unlock()
	return nil
}

func (c *Containerd) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		v, err := c.Version(cctx)
		cancel()
		if err == nil && v.RuntimeName != "" {
			return nil
		}
		last = err
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("containerd not ready after %s (log: %s): %v", timeout, filepath.Join(c.opts.Dir, "containerd.log"), last)
}

func (c *Containerd) supervise(ctx context.Context) {
	defer close(c.done)
	backoff := time.Second
	for {
		c.mu.Lock()
		cmd := c.cmd
		c.mu.Unlock()
		for cmd.ProcessState == nil {
			select {
			case <-ctx.Done():
				_ = cmd.Process.Signal(syscall.SIGTERM)
				deadline := time.Now().Add(10 * time.Second)
				for cmd.ProcessState == nil && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
				}
				if cmd.ProcessState == nil {
					_ = cmd.Process.Kill()
				}
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
		c.log.Warn("containerd exited, restarting", "state", cmd.ProcessState.String(), "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
		if err := c.spawn(); err != nil {
			c.log.Error("restart containerd", "err", err)
		}
	}
}

// PID is containerd's current process ID.
func (c *Containerd) PID() int {
	if c.cancel == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cmd.Process.Pid
}

// Close stops containerd and the supervisor; a connected runtime is left running.
func (c *Containerd) Close() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil && c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Kill()
	}
}

// Endpoint is the CRI address (grpc-go needs an absolute unix:// URL).
func (c *Containerd) Endpoint() string { return c.endpoint }

// Dial connects a gRPC client to the CRI service.
func (c *Containerd) Dial() (*grpc.ClientConn, error) {
	return grpc.NewClient(c.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// Version asks CRI for the runtime's name and version.
func (c *Containerd) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	conn, err := c.Dial()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
}

// ImportImage imports an OCI or Docker archive into the k8s.io namespace with Debian's ctr.
func (c *Containerd) ImportImage(ctx context.Context, file string) error {
	_, err := c.importImage(ctx, file)
	return err
}

// ImportPinned imports an archive and pins its images: each is labelled
// io.cri-containerd.pinned=pinned, which containerd's CRI (from 1.7) reports as pinned so no
// image garbage collector removes it, and its references are returned, which skiff's own
// collector also leaves (containerd 1.6 reports no pins). A node that reaches no registry
// could not get these images back.
func (c *Containerd) ImportPinned(ctx context.Context, file string) ([]string, error) {
	refs, err := c.importImage(ctx, file)
	if err != nil {
		return nil, err
	}
	for _, ref := range refs {
		out, err := exec.CommandContext(ctx, "ctr", "--address", strings.TrimPrefix(c.endpoint, "unix://"), "-n", "k8s.io",
			"images", "label", ref, "io.cri-containerd.pinned=pinned").CombinedOutput()
		if err != nil {
			return refs, fmt.Errorf("pin %s: %v: %s", ref, err, strings.TrimSpace(string(out)))
		}
	}
	return refs, nil
}

// unpackingRE is how ctr import names each image it imports: "unpacking REF (DIGEST)...done".
var unpackingRE = regexp.MustCompile(`unpacking (\S+) \((sha256:[0-9a-f]{64})\)`)

func (c *Containerd) importImage(ctx context.Context, file string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ctr", "--address", strings.TrimPrefix(c.endpoint, "unix://"), "-n", "k8s.io", "images", "import", "--all-platforms", file).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("import %s: %v: %s", file, err, strings.TrimSpace(string(out)))
	}
	return ImportedRefs(out), nil
}

// ImportedRefs are the image references ctr import's output names.
func ImportedRefs(out []byte) []string {
	var refs []string
	for _, m := range unpackingRE.FindAllSubmatch(out, -1) {
		refs = append(refs, string(m[1]))
	}
	return refs
}

// podNetnsRE matches the network namespaces containerd's CRI creates for pod sandboxes.
var podNetnsRE = regexp.MustCompile(`/var/run/netns/cni-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// RemovePodNamespaces deletes the pod network namespaces a containerd under dir created and
// left behind (it removes them itself only when it stops a sandbox, not when it is killed).
// They are found in its metadata store, so namespaces of other runtimes are never touched.
func RemovePodNamespaces(dir string) []string {
	var removed []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		// Image layers and blobs hold no metadata store and can be many thousands of files.
		if d.IsDir() && (strings.HasPrefix(d.Name(), "io.containerd.snapshotter.") || strings.HasPrefix(d.Name(), "io.containerd.content.")) {
			return fs.SkipDir
		}
		if d.IsDir() || d.Name() != "meta.db" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		for _, ns := range podNetnsRE.FindAll(b, -1) {
			path := string(ns)
			if _, err := os.Stat(path); err != nil {
				continue
			}
			_ = unix.Unmount(path, unix.MNT_DETACH)
			if err := os.Remove(path); err == nil {
				removed = append(removed, path)
			}
		}
		return nil
	})
	return removed
}

// Teardown removes what containerd runs under dir left behind after it was killed, as a
// crashed node would: it SIGKILLs every process whose command line mentions dir (containerd,
// its shims, anything else started from there), lazily unmounts everything mounted below dir,
// and removes the pod network namespaces (RemovePodNamespaces). Container processes live in
// the agent's cgroups; whoever owns the cgroup root kills those (cgroups.KillAll).
func Teardown(dir string) {
	dir = filepath.Clean(dir)
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), dir+"/") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	time.Sleep(200 * time.Millisecond)
	mounts, _ := os.ReadFile("/proc/self/mounts")
	lines := strings.Split(string(mounts), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		f := strings.Fields(lines[i])
		if len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			_ = unix.Unmount(f[1], unix.MNT_DETACH)
		}
	}
	RemovePodNamespaces(dir)
}
