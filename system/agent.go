package system

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/cpuset"

	"github.com/skiff-sh/skiff/agent"
	"github.com/skiff-sh/skiff/agent/apiservers"
	"github.com/skiff-sh/skiff/agent/cpumanager"
	"github.com/skiff-sh/skiff/agent/eviction"
	"github.com/skiff-sh/skiff/agent/imagegc"
	"github.com/skiff-sh/skiff/agent/join"
	"github.com/skiff-sh/skiff/agent/logrotate"
	"github.com/skiff-sh/skiff/agent/node"
	"github.com/skiff-sh/skiff/bgp"
	bgpconfig "github.com/skiff-sh/skiff/bgp/config"
	"github.com/skiff-sh/skiff/dataplane/services"
	"github.com/skiff-sh/skiff/internal/gctune"
	"github.com/skiff-sh/skiff/internal/hostaddr"
	"github.com/skiff-sh/skiff/internal/layout"
	"github.com/skiff-sh/skiff/internal/supervisor"
	"github.com/skiff-sh/skiff/internal/version"
)

// Agent is a node agent's configuration, shared by `skiff agent` and `skiff server`.
type Agent struct {
	DataDir, NodeName, NodeIP, Netns, CNIPlugin, PodLogDir string
	PodManifestPath, HealthzAddress                        string
	ImageDirs                                              []string
	Port                                                   int
	ServingCert, ServingKey, ClientCA                      string
	ClusterDNS                                             []string
	ClusterDomain, ResolvConf, RuntimeEndpoint             string
	CgroupRoot                                             string
	ServiceProxy                                           bool
	// BPFMapSizes are the service maps' capacities (--bpf-map-*).
	BPFMapSizes   services.MapSizes
	NetworkPolicy bool
	// DNS serves the cluster DNS on DNSAddress (default <node-ip>:53), forwarding other
	// names to DNSUpstreams (default: --resolv-conf's nameservers; "none": nowhere).
	DNS          bool
	DNSAddress   string
	DNSUpstreams []string
	// BGP runs the speaker; BGPASN, BGPPeers ("ADDRESS:ASN"), BGPNodeMesh ("", "true",
	// "false") override the cluster's configuration; BGPAPI serves GoBGP's gRPC API.
	BGP         bool
	BGPASN      uint32
	BGPPeers    []string
	BGPNodeMesh string
	BGPAPI      string
	// ContainerLogMaxSize (a quantity, "10Mi") and ContainerLogMaxFiles bound each
	// container's log files, as the kubelet's settings of those names.
	ContainerLogMaxSize         string
	ContainerLogMaxFiles        int
	ContainerLogMonitorInterval time.Duration
	// EvictionHard is the kubelet's --eviction-hard ("memory.available<100Mi,…"; empty: no
	// eviction); EvictionPressureTransitionPeriod its --eviction-pressure-transition-period.
	EvictionHard                     string
	EvictionPressureTransitionPeriod time.Duration
	// EvictionSoft, EvictionSoftGracePeriod and EvictionMaxPodGracePeriod are the kubelet's
	// --eviction-soft, --eviction-soft-grace-period and --eviction-max-pod-grace-period.
	EvictionSoft, EvictionSoftGracePeriod string
	EvictionMaxPodGracePeriod             int64
	// EvictionMinimumReclaim is the kubelet's --eviction-minimum-reclaim
	// ("nodefs.available=500Mi,…"), for hard and soft thresholds alike.
	EvictionMinimumReclaim string
	// ImageGCHighThreshold and ImageGCLowThreshold (percent of the image file system) and
	// MinimumImageTTL are the kubelet's image garbage collection settings of those names.
	ImageGCHighThreshold, ImageGCLowThreshold int
	MinimumImageTTL                           time.Duration
	// KubeReserved and SystemReserved are the kubelet's --kube-reserved and
	// --system-reserved ("cpu=200m,memory=512Mi,ephemeral-storage=1Gi,pid=1000");
	// EnforceNodeAllocatable its --enforce-node-allocatable ("pods", or "none").
	KubeReserved, SystemReserved string
	EnforceNodeAllocatable       string
	// CgroupsPerQOS is the kubelet's --cgroups-per-qos: each pod's cgroup in its QoS class's
	// tier with the pod's own limits (false: all right under --cgroup-root, unlimited);
	// PodMaxPIDs its --pod-max-pids (-1 or 0: no limit).
	CgroupsPerQOS bool
	PodMaxPIDs    int64
	// CPUCFSQuota is the kubelet's --cpu-cfs-quota: enforce CPU limits with CFS quotas.
	CPUCFSQuota bool
	// CPUManagerPolicy ("none" or "static"), ReservedCPUs (a CPU list, "0-1,4") and
	// CPUManagerReconcilePeriod are the kubelet's --cpu-manager-policy, --reserved-cpus and
	// --cpu-manager-reconcile-period.
	CPUManagerPolicy          string
	ReservedCPUs              string
	CPUManagerReconcilePeriod time.Duration
	// IdleGCPercent is the garbage collector's target while `skiff agent` is idle (see
	// internal/gctune; 0: Go's default always). The server's own agent shares the server's.
	IdleGCPercent int
}

// Join is how `skiff agent` reaches the API server: a kubeconfig, or a server URL and a
// join token (or a file holding it).
type Join struct {
	Kubeconfig, Server, Token, TokenFile string
	// CACheckInterval is how often a joined agent reads the server's CA bundle, to follow a
	// CA rotation (agent/join.TrustWatcher; 10 minutes when zero).
	CACheckInterval time.Duration
}

// NodeAddress is the node's primary address: the first asked for, else the first
// non-loopback IPv4 address of this machine (127.0.0.1 when there is none).
func NodeAddress(asked string) string {
	if ips, err := NodeAddresses(asked); err == nil {
		return ips[0]
	}
	return strings.TrimSpace(strings.Split(asked, ",")[0])
}

// NodeAddresses are the node's addresses from --node-ip: one address, or one per family,
// comma-separated, the primary first (the kubelet's form, "198.18.0.2,2001:2::2"); the
// machine's first non-loopback address when none is asked for.
func NodeAddresses(asked string) ([]string, error) {
	if strings.TrimSpace(asked) == "" {
		return []string{hostaddr.First().String()}, nil
	}
	var out []string
	var v4, v6 int
	for _, f := range strings.Split(asked, ",") {
		a, err := netip.ParseAddr(strings.TrimSpace(f))
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("--node-ip %q: %q is not an IP address", asked, strings.TrimSpace(f))
		}
		if a.IsUnspecified() || a.IsMulticast() || a.Is4In6() {
			return nil, fmt.Errorf("--node-ip %q: %s cannot be a node's address", asked, a)
		}
		if a.Is4() {
			v4++
		} else {
			v6++
		}
		out = append(out, a.String())
	}
	if len(out) > 2 || v4 > 1 || v6 > 1 {
		return nil, fmt.Errorf("--node-ip %q: give one address, or one IPv4 and one IPv6 address (dual-stack)", asked)
	}
	return out, nil
}

// nodeNetIPs are the node's addresses (for its serving certificate).
func nodeNetIPs(asked string) []net.IP {
	ips, _ := NodeAddresses(asked)
	var out []net.IP
	for _, ip := range ips {
		out = append(out, net.ParseIP(ip))
	}
	return out
}

// ExeDir is the directory of the running binary ("." if it cannot be told): a skiff-cni and
// an images/ directory beside it are used by default.
func ExeDir() string {
	exe, err := os.Executable()
	if err != nil {
		return "."
	}
	return filepath.Dir(exe)
}

// BGPOptions turns the BGP settings into the speaker's options; nil when BGP is off.
func (a Agent) BGPOptions() (*bgp.Options, error) {
	if !a.BGP {
		return nil, nil
	}
	var o bgpconfig.Overrides
	if a.BGPASN != 0 {
		asn := a.BGPASN
		o.ASN = &asn
	}
	switch a.BGPNodeMesh {
	case "":
	case "true", "false":
		mesh := a.BGPNodeMesh == "true"
		o.NodeMesh = &mesh
	default:
		return nil, fmt.Errorf("--bgp-node-mesh %q: want true or false", a.BGPNodeMesh)
	}
	if a.BGPPeers != nil {
		o.Peers = []bgpconfig.Peer{}
		for _, p := range a.BGPPeers {
			host, asn, ok := strings.Cut(p, ":")
			addr, err := netip.ParseAddr(host)
			n, aerr := strconv.ParseUint(asn, 10, 32)
			if !ok || err != nil || aerr != nil || n == 0 || !addr.Is4() {
				return nil, fmt.Errorf("--bgp-peer %q: want IPV4ADDRESS:ASN, e.g. 198.18.0.254:64512", p)
			}
			o.Peers = append(o.Peers, bgpconfig.Peer{Address: addr, ASN: uint32(n)})
		}
	}
	return &bgp.Options{Overrides: o, APIAddress: a.BGPAPI}, nil
}

// LogPolicy is the container log rotation asked for; empty flags take logrotate's defaults.
func (a Agent) LogPolicy() (logrotate.Policy, error) {
	p := logrotate.Policy{MaxSize: logrotate.DefaultMaxSize, MaxFiles: logrotate.DefaultMaxFiles}
	if a.ContainerLogMaxSize != "" {
		q, err := resource.ParseQuantity(a.ContainerLogMaxSize)
		if err != nil {
			return p, fmt.Errorf("--container-log-max-size %q: want a quantity such as 10Mi: %w", a.ContainerLogMaxSize, err)
		}
		p.MaxSize = q.Value()
	}
	if a.ContainerLogMaxFiles != 0 {
		p.MaxFiles = a.ContainerLogMaxFiles
	}
	if a.ContainerLogMonitorInterval != 0 {
		p.Interval = a.ContainerLogMonitorInterval
	}
	if err := p.Validate(); err != nil {
		return p, fmt.Errorf("--container-log-max-size/--container-log-max-files/--container-log-monitor-interval: %w", err)
	}
	return p, nil
}

// Options are the agent's options, with its node's taints.
func (a Agent) Options(taints []corev1.Taint) (agent.Options, error) {
	nodeIPs, err := NodeAddresses(a.NodeIP)
	if err != nil {
		return agent.Options{}, err
	}
	dirs := a.ImageDirs
	if len(dirs) == 0 {
		dirs = []string{layout.Agent{Dir: a.DataDir}.Images(), filepath.Join(ExeDir(), "images")}
	}
	b, err := a.BGPOptions()
	if err != nil {
		return agent.Options{}, err
	}
	logs, err := a.LogPolicy()
	if err != nil {
		return agent.Options{}, err
	}
	hard, err := eviction.ParseHard(a.EvictionHard)
	if err != nil {
		return agent.Options{}, fmt.Errorf("--eviction-hard: %w", err)
	}
	soft, err := eviction.ParseSoft(a.EvictionSoft, a.EvictionSoftGracePeriod)
	if err != nil {
		return agent.Options{}, fmt.Errorf("--eviction-soft: %w", err)
	}
	all, err := eviction.ParseMinReclaim(a.EvictionMinimumReclaim, append(append([]eviction.Threshold{}, hard...), soft...))
	if err != nil {
		return agent.Options{}, fmt.Errorf("--eviction-minimum-reclaim: %w", err)
	}
	hard, soft = all[:len(hard)], all[len(hard):]
	if a.EvictionMaxPodGracePeriod < 0 {
		return agent.Options{}, fmt.Errorf("--eviction-max-pod-grace-period %d: must not be negative", a.EvictionMaxPodGracePeriod)
	}
	if a.EvictionPressureTransitionPeriod < 0 {
		return agent.Options{}, fmt.Errorf("--eviction-pressure-transition-period %s: must not be negative", a.EvictionPressureTransitionPeriod)
	}
	var reserved []corev1.ResourceList
	for _, r := range []struct{ flag, value string }{{"--kube-reserved", a.KubeReserved}, {"--system-reserved", a.SystemReserved}} {
		rl, err := node.ParseReserved(r.value)
		if err != nil {
			return agent.Options{}, fmt.Errorf("%s: %w", r.flag, err)
		}
		reserved = append(reserved, rl)
	}
	cpuPolicy, reservedCPUs, err := a.cpuManager()
	if err != nil {
		return agent.Options{}, err
	}
	if !reservedCPUs.IsEmpty() {
		// As the kubelet: the list stands for the cpu of --kube-reserved and --system-reserved.
		delete(reserved[0], corev1.ResourceCPU)
		reserved[1][corev1.ResourceCPU] = *resource.NewQuantity(int64(reservedCPUs.Size()), resource.DecimalSI)
	}
	enforce, err := enforceNodeAllocatable(a.EnforceNodeAllocatable)
	if err != nil {
		return agent.Options{}, err
	}
	if a.PodMaxPIDs < -1 {
		return agent.Options{}, fmt.Errorf("--pod-max-pids %d: want a positive number of processes, or -1 for no limit", a.PodMaxPIDs)
	}
	for _, size := range []struct {
		flag string
		n    int
	}{{"--bpf-map-services", a.BPFMapSizes.Services}, {"--bpf-map-backends", a.BPFMapSizes.Backends}, {"--bpf-map-maglev", a.BPFMapSizes.Maglev}} {
		// 0 is the default (services.DefaultMapSizes), as for a server's own agent.
		if size.n < 0 || size.n > 1<<28 {
			return agent.Options{}, fmt.Errorf("%s: %d entries; give 1 to %d (0: the default)", size.flag, size.n, 1<<28)
		}
	}
	gc := imagegc.Policy{HighThresholdPercent: a.ImageGCHighThreshold, LowThresholdPercent: a.ImageGCLowThreshold, MinAge: a.MinimumImageTTL}
	if err := gc.Validate(); err != nil {
		return agent.Options{}, fmt.Errorf("--image-gc-high-threshold/--image-gc-low-threshold/--minimum-image-ttl-duration: %w", err)
	}
	return agent.Options{Reserved: reserved, EnforceNodeAllocatable: enforce, ContainerLogs: logs, EvictionHard: hard, EvictionPressureTransitionPeriod: a.EvictionPressureTransitionPeriod, ImageGC: gc,
		EvictionSoft: soft, EvictionMaxPodGracePeriod: a.EvictionMaxPodGracePeriod, DataDir: a.DataDir, NodeName: a.NodeName, InternalIPs: nodeIPs, Taints: taints, Netns: a.Netns,
		CNIPlugin: a.CNIPlugin, ImageDirs: dirs, PodLogDir: a.PodLogDir, PodManifestPath: a.PodManifestPath, HealthzAddress: a.HealthzAddress,
		APIAddress: fmt.Sprintf(":%d", a.Port), APIPort: a.Port, ServingCert: a.ServingCert, ServingKey: a.ServingKey, ClientCA: a.ClientCA,
		ClusterDNS: a.ClusterDNS, ClusterDomain: a.ClusterDomain, ResolvConf: a.ResolvConf, RuntimeEndpoint: a.RuntimeEndpoint,
		CgroupRoot: a.CgroupRoot, FlatCgroups: !a.CgroupsPerQOS, PodMaxPIDs: a.PodMaxPIDs, NoCFSQuota: !a.CPUCFSQuota,
		CPUManagerPolicy: cpuPolicy, ReservedCPUs: reservedCPUs, CPUManagerReconcilePeriod: a.CPUManagerReconcilePeriod, ServiceProxy: a.ServiceProxy, BPFMapSizes: a.BPFMapSizes, NetworkPolicy: a.NetworkPolicy, BGP: b,
		DNS: a.DNS, DNSAddress: a.DNSAddress, DNSUpstreams: a.DNSUpstreams}, nil
}

// cpuManager reads --cpu-manager-policy, --reserved-cpus and --cpu-manager-reconcile-period.
func (a Agent) cpuManager() (string, cpuset.CPUSet, error) {
	policy := a.CPUManagerPolicy
	switch policy {
	case "", "none":
		policy = "none"
	case cpumanager.PolicyStatic:
	default:
		return "", cpuset.New(), fmt.Errorf("--cpu-manager-policy %q: want none or static", a.CPUManagerPolicy)
	}
	reserved, err := cpuset.Parse(strings.TrimSpace(a.ReservedCPUs))
	if err != nil {
		return "", cpuset.New(), fmt.Errorf("--reserved-cpus %q: want a CPU list such as 0-1,4: %w", a.ReservedCPUs, err)
	}
	if a.CPUManagerReconcilePeriod < 0 {
		return "", cpuset.New(), fmt.Errorf("--cpu-manager-reconcile-period %s: must not be negative", a.CPUManagerReconcilePeriod)
	}
	return policy, reserved, nil
}

// enforceNodeAllocatable reads --enforce-node-allocatable: "pods" (the kubelet's default)
// limits the cgroup of every pod to the capacity less what is reserved; "none" or empty
// leaves it alone. The kubelet's "system-reserved" and "kube-reserved" would limit cgroups
// that the operator's init system runs the node's daemons in, which skiff does not manage.
func enforceNodeAllocatable(v string) (bool, error) {
	pods := false
	for _, e := range strings.Split(v, ",") {
		switch strings.TrimSpace(e) {
		case "pods":
			pods = true
		case "none", "":
		case "system-reserved", "kube-reserved", "system-reserved-compressible", "kube-reserved-compressible":
			return false, fmt.Errorf("--enforce-node-allocatable %q: skiff enforces only pods (the daemons' own cgroups belong to the init system that runs them)", v)
		default:
			return false, fmt.Errorf("--enforce-node-allocatable %q: want pods or none", v)
		}
	}
	return pods, nil
}

// RunAgent runs `skiff agent`: with a token it first joins (see agent/join: the CA pinned,
// client and serving certificates through CSRs; what the data directory already holds is
// reused), then runs the agent until ctx ends.
func RunAgent(ctx context.Context, a Agent, j Join, log *slog.Logger) error {
	// A bad flag is reported before anything is joined or read.
	opts, err := a.Options(nil)
	if err != nil {
		return err
	}
	tuner, err := gctune.New(a.IdleGCPercent, log)
	if err != nil {
		return err
	}
	paths := join.Paths(a.DataDir)
	token := j.Token
	if j.TokenFile != "" && token == "" {
		b, err := os.ReadFile(j.TokenFile)
		if err != nil {
			return err
		}
		token = strings.TrimSpace(string(b))
	}
	var servers []string
	if token != "" {
		if j.Server == "" || j.Kubeconfig != "" {
			return errors.New("--token needs --server and excludes --kubeconfig")
		}
		var err error
		if servers, err = apiservers.ParseURLs(j.Server); err != nil {
			return err
		}
		// Any server of a highly available control plane can admit the node.
		for i, server := range servers {
			paths, err = join.Ensure(ctx, join.Options{Server: server, Token: token, Dir: a.DataDir,
				NodeName: a.NodeName, IPs: nodeNetIPs(a.NodeIP), DNSNames: []string{a.NodeName}}, log)
			if err == nil || ctx.Err() != nil {
				break
			}
			if i < len(servers)-1 {
				log.Warn("cannot join through this API server; trying the next", "server", server, "err", err)
			}
		}
		if err != nil {
			return fmt.Errorf("joining %s: %w", j.Server, err)
		}
	}
	kubeconfig := j.Kubeconfig
	if kubeconfig == "" {
		kubeconfig = paths.Kubeconfig
	}
	if opts.ServingCert == "" {
		opts.ServingCert, opts.ServingKey = paths.ServingCert, paths.ServingKey
	}
	if opts.ClientCA == "" {
		opts.ClientCA = paths.CAFile
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	// With several servers every connection goes to one that answers.
	if cfg, _, err = apiservers.Config(cfg, servers, log); err != nil {
		return err
	}
	if err := checkServerVersion(ctx, cfg, log); err != nil {
		return err
	}
	if tuner != nil {
		opts.Parts = append(opts.Parts, supervisor.Part{Name: "gc-tuner", Policy: supervisor.Restart, Run: tuner.Run})
	}
	if token != "" {
		// A joined node renews its own certificates while it runs, as the kubelet rotates its.
		node, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		renewer := join.Renewer{Options: join.Options{Dir: a.DataDir, NodeName: a.NodeName, IPs: nodeNetIPs(a.NodeIP), DNSNames: []string{a.NodeName}},
			Node: node, Log: log.With("component", "cert-rotation")}
		opts.Parts = append(opts.Parts, supervisor.Part{Name: "cert-rotation", Policy: supervisor.Restart, Run: renewer.Run})
		// A changed CA bundle ends the agent (join.ErrTrustChanged, a
		// supervisor.ErrRestartProcess): `skiff agent` starts itself again to load it.
		trust := join.TrustWatcher{Dir: a.DataDir, Node: node, Interval: j.CACheckInterval, Log: log.With("component", "ca-trust")}
		opts.Parts = append(opts.Parts, supervisor.Part{Name: "ca-trust", Policy: supervisor.Restart, Run: trust.Run})
	}
	// systemd (Type=notify) learns the agent is up once its health endpoint answers.
	go notifyReady(ctx, func(ctx context.Context) error {
		return wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
			resp, err := http.Get("http://" + a.HealthzAddress + "/healthz")
			if err != nil {
				return false, nil
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, nil
		})
	}, log)
	return agent.Run(ctx, cfg, opts, log)
}

// checkServerVersion refuses to start an agent that its server's version does not allow
// (upstream's version-skew policy: internal/version.CheckAgentSkew). A server that does not
// answer now does not stop the agent — its pods keep running while the servers are away —
// and a build without a release version cannot be judged; both are logged.
func checkServerVersion(ctx context.Context, cfg *rest.Config, log *slog.Logger) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	raw, err := client.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(ctx)
	var info apimachineryversion.Info
	if err == nil {
		err = json.Unmarshal(raw, &info)
	}
	own := version.Kubernetes()
	switch {
	case err != nil:
		log.Warn("cannot read the server's version; the version-skew check is left to the next start", "err", err)
		return nil
	case !version.Known(own) || !version.Known(info.GitVersion):
		log.Warn("the version skew between this agent and its server cannot be judged: a build without a release version",
			"agent", own, "server", info.GitVersion)
		return nil
	}
	return version.CheckAgentSkew(info.GitVersion, own)
}
