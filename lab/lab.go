package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/agent/cgroups"
	"github.com/skiff-sh/skiff/agent/runtime"
	"github.com/skiff-sh/skiff/internal/layout"
	"github.com/skiff-sh/skiff/internal/podcidr"
)

// Root is where labs keep their state.
const Root = layout.LabRoot

// Options configure `skiff lab up`.
type Options struct {
	Spec
	// Binary is the skiff executable the nodes run (this one by default).
	Binary string
	// Dir is the lab's directory (Root/<name>).
	Dir string
	// Timeout bounds waiting for every node to be Ready (5 minutes).
	Timeout time.Duration
	// Out receives progress lines.
	Out io.Writer
}

// state is what `lab down` needs even after a crash; it is written before anything starts.
type state struct {
	Spec Spec           `json:"spec"`
	PIDs map[string]int `json:"pids"`
}

func dirOf(name string) string { return layout.LabOf(name).Dir }

// otherLabs looks at the labs other than except that skiff recorded under Root: running
// names one in which a recorded process runs ("" if none does), stale those in which none
// does any more. A state file skiff cannot read is left to the user.
func otherLabs(except string) (running string, stale []string) {
	entries, _ := os.ReadDir(Root)
	for _, e := range entries {
		if !e.IsDir() || e.Name() == except || !nameRE.MatchString(e.Name()) {
			continue
		}
		st, err := load(layout.LabOf(e.Name()).Dir)
		switch {
		case err == nil && st.anyAlive():
			running = e.Name()
		case err == nil || errors.Is(err, os.ErrNotExist):
			stale = append(stale, e.Name())
		}
	}
	return running, stale
}

// errNoLab is what every verb says of a lab that does not exist.
func errNoLab(name string) error {
	return fmt.Errorf("no lab named %q (skiff lab up --name %s)", name, name)
}

// PID is the process a lab host's role runs ("node1", "master", "tor-bgp", ...), as the
// lab recorded it; 0 if there is none.
func PID(name, role string) (int, error) {
	st, err := load(dirOf(name))
	if err != nil {
		return 0, err
	}
	return st.PIDs[role], nil
}

// CgroupRoot is where every pod of the lab's nodes gets its cgroup.
func CgroupRoot(name string) string { return "/skiff/lab-" + name }

// Kubeconfig is the admin kubeconfig the host uses.
func Kubeconfig(name string) string { return layout.LabOf(name).Kubeconfig() }

func (o *Options) defaults() error {
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		o.Binary = exe
	}
	if o.Dir == "" {
		o.Dir = dirOf(o.Name)
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	return nil
}

// Up builds the lab and waits until every node is Ready. On failure it leaves what it
// built for inspection; `skiff lab down` removes it.
func Up(ctx context.Context, o Options, log *slog.Logger) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if err := o.defaults(); err != nil {
		return err
	}
	if st, err := load(o.Dir); err == nil && st.anyAlive() {
		return fmt.Errorf("lab %q is already up (skiff lab down --name %s)", o.Name, o.Name)
	}
	// Every lab uses the same host link address and routes the same ranges from the host:
	// a second one would wait for an API it cannot reach. Refuse at once, naming the first.
	other, stale := otherLabs(o.Name)
	if other != "" {
		return fmt.Errorf("lab %q is up, and only one lab runs on a machine (they share the host link %s and the host's routes to %s): skiff lab down --name %s first",
			other, hostSide, o.PodCIDR(), other)
	}
	progress := func(format string, args ...any) { fmt.Fprintf(o.Out, format+"\n", args...) }
	// A lab whose processes are all gone (the machine stopped them, or a crash) still holds
	// its namespaces, its host link and the host's routes into it, which would refuse this
	// lab's routes. Nothing runs in it, so it is removed rather than named in an error.
	for _, name := range stale {
		progress("removing lab %s: its processes are gone, its namespaces and routes remained", name)
		if err := Down(name, io.Discard); err != nil {
			return fmt.Errorf("clearing stale lab %q: %w", name, err)
		}
	}
	if err := Down(o.Name, io.Discard); err != nil {
		return fmt.Errorf("clearing an earlier lab %q: %w", o.Name, err)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	st := &state{Spec: o.Spec, PIDs: map[string]int{}}
	if err := st.save(o.Dir); err != nil {
		return err
	}

	progress("network: namespaces, the fabric %s and the host link", o.families(fabric.String(), fabric6.String()))
	if err := buildNetwork(o.Spec); err != nil {
		return err
	}
	if o.ToR != ToRNone {
		progress("top-of-rack: %s in %s (AS %d, route reflector for %s)", o.ToR, o.ToRHost().Netns, ASN, o.sessionRange())
		pids, err := startRouter(o.Spec, layout.Lab{Dir: o.Dir}.Router())
		for k, v := range pids {
			st.PIDs[k] = v
		}
		_ = st.save(o.Dir)
		if err != nil {
			return err
		}
	}

	master := o.Master()
	dirs := layout.Lab{Dir: o.Dir}
	args := serverArgs(o.Spec, o.Dir, master)
	if o.Servers > 1 {
		args = append(args, "--cluster-init")
	}
	pid, err := spawn(master.Netns, dirs.Log("master"), o.Binary, args...)
	if err != nil {
		return err
	}
	st.PIDs["master"] = pid
	_ = st.save(o.Dir)
	progress("master: skiff server in %s at %s (pid %d, log %s)", master.Netns, master.Addr(), pid, dirs.Log("master"))

	client, err := waitAPI(ctx, dirs.Master().Kubeconfig("admin"), Kubeconfig(o.Name), o.HostAPIServer(), 2*time.Minute)
	if err != nil {
		return err
	}
	bgpConf := meshConfigMap()
	if o.ToR != ToRNone {
		bgpConf = bgpConfigMap(o.Spec)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "skiff-bgp", Namespace: metav1.NamespaceSystem},
		Data: map[string]string{"config.yaml": bgpConf}}
	if _, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("BGP configuration: %w", err)
	}
	for i := 1; i <= o.Nodes; i++ {
		if err := AddNode(o, i, st); err != nil {
			return err
		}
	}
	progress("waiting for %d nodes to be Ready", len(o.Hosts()))
	if err := waitReady(ctx, client, o.Hosts(), o.Timeout); err != nil {
		return err
	}
	progress("waiting for every node's route to every other node's pods (BGP)")
	return waitRoutes(ctx, client, o.Hosts(), o.Timeout)
}

// AddNode starts worker i (its namespace must exist: Up builds them, Grow adds one).
func AddNode(o Options, i int, st *state) error {
	n := o.Node(i)
	dirs := layout.Lab{Dir: o.Dir}
	token := dirs.Master().Token()
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, err := os.Stat(token)
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("the server wrote no join token at %s", token)
	}
	args, what, err := workerArgs(o.Spec, o.Dir, i)
	if err != nil {
		return err
	}
	pid, err := spawn(n.Netns, dirs.Log(n.Role), o.Binary, args...)
	if err != nil {
		return err
	}
	st.PIDs[n.Role] = pid
	fmt.Fprintf(o.Out, "%s: %s in %s at %s (pid %d, log %s)\n", n.Role, what, n.Netns, n.Addr(), pid, dirs.Log(n.Role))
	return st.save(o.Dir)
}

// workerArgs are what worker i runs: `skiff agent`, or with --servers `skiff server` joining
// the master's with its token.
func workerArgs(s Spec, labDir string, i int) ([]string, string, error) {
	n := s.Node(i)
	if !s.IsServer(i) {
		return agentArgs(s, labDir, n), "skiff agent", nil
	}
	b, err := os.ReadFile(layout.Lab{Dir: labDir}.Master().Token())
	if err != nil {
		return nil, "", err
	}
	return append(serverArgs(s, labDir, n), "--server", s.APIServer(), "--token", strings.TrimSpace(string(b))), "skiff server (joined to the master's)", nil
}

// serverArgs are `skiff server` on host n of the lab: the master, or a worker that joins it.
func serverArgs(s Spec, labDir string, n Host) []string {
	dirs := layout.Lab{Dir: labDir}
	args := []string{"server",
		"--cluster-cidr", s.ClusterCIDRs(), "--service-cidr", s.ServiceCIDRs(), "--data-dir", dirs.Server(n.Role).Dir, "--advertise-address", n.Addr().String(),
		"--node-name", n.NodeName, "--node-ip", n.NodeIPs(),
		"--agent-data-dir", dirs.Agent(n.Role).Dir, "--pod-log-dir", dirs.PodLogs(n.Role),
		"--pod-manifest-path", dirs.Manifests(n.Role), "--cgroup-root", CgroupRoot(s.Name) + "/" + n.Role,
		"--service-proxy=" + strconv.FormatBool(!s.NoServiceProxy), "--network-policy=" + strconv.FormatBool(!s.NoNetworkPolicy),
		// The lab's traffic never leaves it: its cluster DNS forwards nowhere.
		"--dns-upstream=none", "--loadbalancer-cidr=" + s.LoadBalancerPools(), "--eviction-hard=" + EvictionHard, "--image-gc-high-threshold=100"}
	if n.Role == "master" {
		args = append(args, "--tls-san", s.masterSide().String())
	}
	return args
}

func agentArgs(s Spec, labDir string, n Host) []string {
	dirs := layout.Lab{Dir: labDir}
	return []string{"agent", "--server", s.APIServers(), "--token-file", dirs.Master().Token(), "--data-dir", dirs.Agent(n.Role).Dir,
		"--node-name", n.NodeName, "--node-ip", n.NodeIPs(), "--pod-log-dir", dirs.PodLogs(n.Role),
		"--pod-manifest-path", dirs.Manifests(n.Role), "--cgroup-root", CgroupRoot(s.Name) + "/" + n.Role,
		"--service-proxy=" + strconv.FormatBool(!s.NoServiceProxy), "--network-policy=" + strconv.FormatBool(!s.NoNetworkPolicy),
		"--dns-upstream=none", "--eviction-hard=" + EvictionHard, "--image-gc-high-threshold=100"}
}

// EvictionHard is the eviction thresholds of the lab's agents: memory only. Its nodes share
// the host's disk with each other and with everything else on the host, so disk thresholds
// would measure the host's fill, not a node's, and evict every node's pods at once (kind
// turns them off for the same reason); for the same reason their image garbage collection is
// off (--image-gc-high-threshold=100): the images tests import by hand are not pinned. Tests
// that start agents on a shared disk do the same.
const EvictionHard = "memory.available<100Mi"

// RestartAgent stops a worker's skiff — its agent, or its server with --servers — (SIGTERM,
// as an upgrade would) and starts it again; its pods keep running, and with graceful restart
// its routes stay in every table.
func RestartAgent(o Options, role string) (int, error) {
	if err := o.defaults(); err != nil {
		return 0, err
	}
	st, err := load(o.Dir)
	if err != nil {
		return 0, fmt.Errorf("lab %q is not up: %w", o.Name, err)
	}
	var host *Host
	index := 0
	for i := 1; i <= st.Spec.Nodes; i++ {
		if h := st.Spec.Node(i); h.Role == role {
			host, index = &h, i
		}
	}
	if host == nil {
		return 0, fmt.Errorf("lab %s has no worker %q", o.Name, role)
	}
	args, _, err := workerArgs(st.Spec, o.Dir, index)
	if err != nil {
		return 0, err
	}
	stop(st.PIDs[role])
	pid, err := spawn(host.Netns, layout.Lab{Dir: o.Dir}.Log(role), o.Binary, args...)
	if err != nil {
		return 0, err
	}
	st.PIDs[role] = pid
	return pid, st.save(o.Dir)
}

// stop ends a skiff process as systemd stops a unit: SIGTERM, and SIGKILL after 20 s.
func stop(pid int) {
	if !alive(pid) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(20 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// Upgrade replaces every host's skiff with bin, as an operator upgrades a cluster: the
// servers first (the master, then those joined to it), then the agents, one at a time — each
// stopped (SIGTERM), started again from bin with its flags, and its node's Lease renewed by
// the new process and the node Ready before the next. Pods keep running throughout: the
// dataplane is pinned and BGP graceful restart keeps the routes.
func Upgrade(ctx context.Context, o Options, bin string) error {
	if err := o.defaults(); err != nil {
		return err
	}
	st, err := load(o.Dir)
	if err != nil {
		return fmt.Errorf("lab %q is not up: %w", o.Name, err)
	}
	client, err := ClientFor(o.Name)
	if err != nil {
		return err
	}
	spec, dirs := st.Spec, layout.Lab{Dir: o.Dir}
	for i, h := range spec.Hosts() {
		var args []string
		if i == 0 {
			if args = serverArgs(spec, o.Dir, h); spec.Servers > 1 {
				args = append(args, "--cluster-init")
			}
		} else if args, _, err = workerArgs(spec, o.Dir, i); err != nil {
			return err
		}
		stop(st.PIDs[h.Role])
		started := time.Now()
		pid, err := spawn(h.Netns, dirs.Log(h.Role), bin, args...)
		if err != nil {
			return err
		}
		st.PIDs[h.Role] = pid
		if err := st.save(o.Dir); err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "%s: upgraded to %s (pid %d); waiting for its node\n", h.Role, bin, pid)
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, o.Timeout, true, func(ctx context.Context) (bool, error) {
			lease, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, h.NodeName, metav1.GetOptions{})
			if err != nil || lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Time.Before(started) {
				return false, nil
			}
			n, err := client.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
			return err == nil && ready(n), nil
		}); err != nil {
			return fmt.Errorf("%s after its upgrade: its node did not renew its Lease and stay Ready: %w", h.Role, err)
		}
	}
	return nil
}

// Grow adds worker nodes to a running lab until it has nodes workers, and waits for the
// new ones to be Ready.
func Grow(ctx context.Context, o Options, nodes int) error {
	if err := o.defaults(); err != nil {
		return err
	}
	st, err := load(o.Dir)
	if err != nil {
		return fmt.Errorf("lab %q is not up: %w", o.Name, err)
	}
	o.Spec = st.Spec
	var added []Host
	for i := st.Spec.Nodes + 1; i <= nodes; i++ {
		added = append(added, o.Node(i))
		o.Spec.Nodes = i
		if err := buildNode(o.Spec, o.Node(i)); err != nil {
			return err
		}
		st.Spec.Nodes = i
		if err := AddNode(o, i, st); err != nil {
			return err
		}
	}
	client, err := ClientFor(o.Name)
	if err != nil {
		return err
	}
	if err := waitReady(ctx, client, added, o.Timeout); err != nil {
		return err
	}
	return waitRoutes(ctx, client, o.Hosts(), o.Timeout)
}

// ClientFor is an admin client of a running lab.
func ClientFor(name string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", Kubeconfig(name))
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// spawn starts a long-running process in a namespace, detached from this one.
func spawn(netns, logFile, bin string, args ...string) (int, error) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + netns, "--", bin}, args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s in %s: %w", filepath.Base(bin), netns, err)
	}
	pid := cmd.Process.Pid
	go func() { _ = cmd.Wait() }() // reap it if it dies while this process still runs
	return pid, nil
}

// waitAPI waits for the server's admin kubeconfig, writes the host's copy pointing at the
// host link, and returns a client once /readyz passes.
func waitAPI(ctx context.Context, src, dst, server string, timeout time.Duration) (kubernetes.Interface, error) {
	var client kubernetes.Interface
	err := wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		cfg, err := clientcmd.LoadFromFile(src)
		if err != nil {
			return false, nil
		}
		for _, c := range cfg.Clusters {
			c.Server = server
		}
		if err := clientcmd.WriteToFile(*cfg, dst); err != nil {
			return false, err
		}
		rc, err := clientcmd.BuildConfigFromFlags("", dst)
		if err != nil {
			return false, err
		}
		c, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return false, err
		}
		if _, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
			return false, nil
		}
		client = c
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the API server did not become ready at %s: %w", server, err)
	}
	return client, nil
}

func waitReady(ctx context.Context, client kubernetes.Interface, hosts []Host, timeout time.Duration) error {
	var missing []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		missing = missing[:0]
		for _, h := range hosts {
			n, err := client.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
			if err != nil || !ready(n) {
				missing = append(missing, h.NodeName)
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("nodes not Ready after %s: %v", timeout, missing)
	}
	return nil
}

// waitRoutes waits until every host's table routes every other host's pod CIDR (learned over
// BGP), so pods are reachable across nodes when the lab is declared up — not only Ready.
func waitRoutes(ctx context.Context, client kubernetes.Interface, hosts []Host, timeout time.Duration) error {
	var missing []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		cidrs := map[string][]string{}
		for _, h := range hosts {
			n, err := client.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
			if err != nil || len(podcidr.All(n)) == 0 {
				missing = []string{h.NodeName + " has no pod CIDR yet"}
				return false, nil
			}
			cidrs[h.NodeName] = podcidr.All(n)
		}
		missing = missingRoutes(hosts, cidrs, func(netns string) (string, error) {
			v4, err := exec.CommandContext(ctx, "ip", "-n", netns, "route", "show").Output()
			if err != nil {
				return "", err
			}
			v6, err := exec.CommandContext(ctx, "ip", "-n", netns, "-6", "route", "show").Output()
			return string(v4) + string(v6), err
		})
		return len(missing) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("pod routes missing after %s: %s (check the sessions: skiff lab exec <node> -- skiff bgp peers)",
			timeout, strings.Join(missing, "; "))
	}
	return nil
}

// missingRoutes lists, for each host, the other hosts' pod CIDRs (one per family) its routing
// tables (as `ip route show` and `ip -6 route show` print them, read by routesOf) lack.
func missingRoutes(hosts []Host, cidrs map[string][]string, routesOf func(netns string) (string, error)) []string {
	var missing []string
	for _, h := range hosts {
		table, err := routesOf(h.Netns)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s: %v", h.Role, err))
			continue
		}
		have := map[string]bool{}
		for _, line := range strings.Split(table, "\n") {
			if f := strings.Fields(line); len(f) > 0 {
				have[f[0]] = true
			}
		}
		for _, other := range hosts {
			if other.NodeName == h.NodeName {
				continue
			}
			for _, c := range cidrs[other.NodeName] {
				if !have[c] {
					missing = append(missing, fmt.Sprintf("%s has no route to %s's pods (%s)", h.Role, other.Role, c))
				}
			}
		}
	}
	return missing
}

// ready says a node is Ready and no longer carries the taints that stand for a condition
// (not-ready, unreachable). The node lifecycle controller lifts those only after the agent
// reports Ready; a lab declared up in between would have the scheduler put every pod of a
// Deployment created at once on the nodes that were quicker.
func ready(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func load(dir string) (*state, error) {
	b, err := os.ReadFile(layout.Lab{Dir: dir}.State())
	if err != nil {
		return nil, err
	}
	st := &state{}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("%s: %w", layout.Lab{Dir: dir}.State(), err)
	}
	return st, nil
}

func (st *state) save(dir string) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(layout.Lab{Dir: dir}.State(), b, 0o644)
}

func (st *state) anyAlive() bool {
	for _, pid := range st.PIDs {
		if alive(pid) {
			return true
		}
	}
	return false
}

func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	// A zombie is not alive.
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// Down removes every trace of lab name: processes (recorded PIDs, then anything started
// from the lab's directory or still in its cgroups), namespaces, cgroups, mounts, files.
// It is safe to run twice and after a crash.
func Down(name string, out io.Writer) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("lab name %q: use 1-8 lowercase letters and digits, starting with a letter", name)
	}
	dir := dirOf(name)
	var errs []error
	if st, err := load(dir); err == nil {
		for _, pid := range st.PIDs {
			if alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGTERM)
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for st.anyAlive() && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		for _, pid := range st.PIDs {
			if alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	// Whatever else was started from the lab's directory (containerd, shims, routers), its
	// mounts and the pods' network namespaces.
	runtime.Teardown(dir)
	mounts := cgroups.Mounts()
	if exists(mounts, CgroupRoot(name)) {
		if err := cgroups.KillAll(mounts, CgroupRoot(name)); err != nil {
			errs = append(errs, fmt.Errorf("cgroups: %w", err))
		}
	}
	// The host end of the API link goes with the master's namespace, but only once the kernel
	// has torn that down; deleting it here makes down finished when it returns.
	_ = exec.Command("ip", "link", "del", name+"-api").Run()
	for _, ns := range namespaces(name) {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip netns del %s: %v: %s", ns, err, strings.TrimSpace(string(out))))
		}
	}
	_ = os.RemoveAll(filepath.Join(layout.FRRRunDir, name+"-tor"))
	_ = os.RemoveAll(frrEtc(Spec{Name: name}))
	// Each node's pinned programs, links and maps (layout.PinDir of its node name).
	pins, _ := filepath.Glob(layout.PinDir(name + "-*"))
	for _, pin := range pins {
		if err := os.RemoveAll(pin); err != nil {
			errs = append(errs, fmt.Errorf("bpf pins: %w", err))
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		fmt.Fprintf(out, "lab %s removed\n", name)
	}
	return errors.Join(errs...)
}

func exists(mounts []string, cg string) bool {
	for _, m := range mounts {
		if _, err := os.Stat(filepath.Join(m, cg)); err == nil {
			return true
		}
	}
	return false
}

// namespaces lists the lab's namespaces that exist.
func namespaces(name string) []string {
	entries, _ := os.ReadDir(layout.NetnsDir)
	var out []string
	for _, e := range entries {
		n := e.Name()
		rest, ok := strings.CutPrefix(n, name+"-")
		if ok && (rest == "master" || rest == "tor" || (strings.HasPrefix(rest, "node") && isDigits(rest[4:]))) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Status reports each host's namespace, process and node readiness.
func Status(ctx context.Context, name string, out io.Writer) error {
	st, err := load(dirOf(name))
	if err != nil {
		return errNoLab(name)
	}
	client, cerr := ClientFor(name)
	fmt.Fprintf(out, "lab %s: %d workers, ToR %s; kubeconfig %s\n", name, st.Spec.Nodes, st.Spec.ToR, Kubeconfig(name))
	fmt.Fprintf(out, "%-8s %-14s %-14s %-8s %s\n", "HOST", "NETNS", "ADDRESS", "PID", "STATE")
	hosts := st.Spec.Hosts()
	if st.Spec.ToR != ToRNone {
		hosts = append(hosts, st.Spec.ToRHost())
	}
	for _, h := range hosts {
		state := "down"
		pidText := "-"
		pid := st.PIDs[h.Role]
		if h.Role == "tor" {
			pid = st.PIDs["tor-bgp"]
		}
		if pid > 0 {
			pidText = strconv.Itoa(pid)
			if alive(pid) {
				state = "running"
			}
		}
		if h.NodeName != "" && cerr == nil && state == "running" {
			if n, err := client.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{}); err == nil && ready(n) {
				state = "Ready"
			} else {
				state = "NotReady"
			}
		}
		fmt.Fprintf(out, "%-8s %-14s %-14s %-8s %s\n", h.Role, h.Netns, h.Addr(), pidText, state)
	}
	return nil
}

// Exec runs argv in a host's namespace with this terminal; host is "master", "node<i>",
// "tor" or a full namespace name.
func Exec(name, host string, argv []string) error {
	if len(argv) == 0 {
		return errors.New("nothing to run: skiff lab exec HOST -- COMMAND [ARGS...]")
	}
	st, err := load(dirOf(name))
	if err != nil {
		return errNoLab(name)
	}
	ns := host
	if !strings.HasPrefix(host, name+"-") {
		ns = name + "-" + host
	}
	if !slices.Contains(namespaces(name), ns) {
		return fmt.Errorf("lab %s has no host %q (try master, node1, tor)", name, host)
	}
	for _, h := range st.Spec.Hosts() {
		if h.Netns == ns {
			argv = InferNode(argv, h.NodeName)
		}
	}
	cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + ns, "--"}, argv...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd.Run()
}

// InferNode adds --node NODE to `skiff bpf …` and `skiff policy …` run on a lab host that does not name one, so
// `skiff lab exec node1 -- skiff bpf services` shows node1's maps.
func InferNode(argv []string, node string) []string {
	if len(argv) < 2 || filepath.Base(argv[0]) != "skiff" || (argv[1] != "bpf" && argv[1] != "policy") || node == "" {
		return argv
	}
	for _, a := range argv[2:] {
		if a == "--node" || strings.HasPrefix(a, "--node=") || a == "--" {
			return argv
		}
	}
	return append(slices.Clone(argv), "--node", node)
}

// frrOwner is FRR's user and group, which must own its run directory.
func frrOwner() (int, int, error) {
	u, err := user.Lookup("frr")
	if err != nil {
		return 0, 0, fmt.Errorf("FRR's user: %w (is FRR installed? make deps)", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uid, gid, nil
}
