package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	watchtools "k8s.io/client-go/tools/watch"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"

	"github.com/skiff-sh/skiff/agent/api"
	"github.com/skiff-sh/skiff/agent/cgroups"
	"github.com/skiff-sh/skiff/agent/clusterdns"
	"github.com/skiff-sh/skiff/agent/cniserver"
	"github.com/skiff-sh/skiff/agent/cpumanager"
	"github.com/skiff-sh/skiff/agent/eviction"
	"github.com/skiff-sh/skiff/agent/hostprep"
	"github.com/skiff-sh/skiff/agent/imagegc"
	"github.com/skiff-sh/skiff/agent/imagemount"
	"github.com/skiff-sh/skiff/agent/ipam"
	"github.com/skiff-sh/skiff/agent/logrotate"
	"github.com/skiff-sh/skiff/agent/node"
	"github.com/skiff-sh/skiff/agent/podresources"
	"github.com/skiff-sh/skiff/agent/pods"
	"github.com/skiff-sh/skiff/agent/pressure"
	"github.com/skiff-sh/skiff/agent/runtime"
	"github.com/skiff-sh/skiff/agent/static"
	"github.com/skiff-sh/skiff/agent/stats"
	"github.com/skiff-sh/skiff/agent/volumes"
	"github.com/skiff-sh/skiff/bgp"
	"github.com/skiff-sh/skiff/dataplane/flows"
	"github.com/skiff-sh/skiff/dataplane/loader"
	"github.com/skiff-sh/skiff/dataplane/netpol"
	"github.com/skiff-sh/skiff/dataplane/proxy"
	"github.com/skiff-sh/skiff/dataplane/services"
	"github.com/skiff-sh/skiff/images"
	"github.com/skiff-sh/skiff/images/embedded"
	sharedinformers "github.com/skiff-sh/skiff/internal/informers"
	"github.com/skiff-sh/skiff/internal/layout"
	"github.com/skiff-sh/skiff/internal/podcidr"
	"github.com/skiff-sh/skiff/internal/supervisor"
)

// Options configure the agent.
type Options struct {
	// DataDir holds containerd's state, the CNI binaries and config, IPAM and the socket.
	DataDir string
	// Parts are the process's own long-running parts (its garbage collector tuner, for
	// `skiff agent`), run under the agent's supervisor.
	Parts []supervisor.Part
	// NodeName and InternalIPs identify the node: its addresses, one per family, the primary
	// first (a dual-stack node's --node-ip v4,v6).
	NodeName    string
	InternalIPs []string
	// Taints are set when the node registers, Labels added to the standard ones
	// (node-role.kubernetes.io/control-plane on the server's own node).
	Taints []corev1.Taint
	Labels map[string]string
	// Netns, if set, runs containerd (and so every pod's host-side network) in that namespace.
	Netns string
	// CNIPlugin is the skiff-cni binary to install.
	CNIPlugin string
	// ImageDirs are searched for image archives (*.tar) to import at start.
	ImageDirs []string
	// PodLogDir is where container logs go (/var/log/pods).
	PodLogDir string
	// APIAddress serves the agent API (0.0.0.0:10250); APIPort is its port, published in the
	// Node's daemonEndpoints.
	APIAddress string
	APIPort    int
	// ServingCert, ServingKey and ClientCA secure the agent API.
	ServingCert, ServingKey, ClientCA string
	// PodManifestPath holds static pod manifests (/etc/skiff/manifests).
	PodManifestPath string
	// HealthzAddress serves /healthz over plain HTTP (127.0.0.1:10248); empty disables it.
	HealthzAddress string
	// CgroupRoot is the parent of every pod cgroup (/skiff).
	CgroupRoot string
	// FlatCgroups, PodMaxPIDs and NoCFSQuota: see pods.Options (--cgroups-per-qos=false,
	// --pod-max-pids, --cpu-cfs-quota=false).
	FlatCgroups bool
	PodMaxPIDs  int64
	NoCFSQuota  bool
	// CPUManagerPolicy is the kubelet's --cpu-manager-policy: "static" gives the containers
	// of Guaranteed pods that request whole CPUs those CPUs to themselves (agent/cpumanager);
	// "none" or empty leaves every container on every CPU. ReservedCPUs (--reserved-cpus) are
	// the CPUs kept for the node's daemons; when empty, as many as Reserved's cpu adds up to
	// (rounded up) are chosen. CPUManagerReconcilePeriod is how often containers are checked
	// to be on their CPUs (10 s).
	CPUManagerPolicy          string
	ReservedCPUs              cpuset.CPUSet
	CPUManagerReconcilePeriod time.Duration
	// ServiceProxy runs the eBPF service load balancer for the node's pods, its maps sized
	// by BPFMapSizes (zero: services.DefaultMapSizes).
	ServiceProxy bool
	BPFMapSizes  services.MapSizes
	// NetworkPolicy enforces NetworkPolicies on the node's pod veths with eBPF.
	NetworkPolicy bool
	// BGP, if set, runs the node's BGP speaker and installs learned pod routes.
	BGP *bgp.Options
	// RuntimeEndpoint, if set, is a containerd the agent uses instead of supervising its own.
	RuntimeEndpoint string
	// ClusterDNS, ClusterDomain and ResolvConf give pods their resolv.conf (see pods.Options).
	ClusterDNS    []string
	ClusterDomain string
	ResolvConf    string
	// DNS serves the cluster DNS on DNSAddress (default <InternalIP>:53) and publishes it
	// in the Node's dns.skiff.sh/address annotation; names outside the cluster go to
	// DNSUpstreams (nil: ResolvConf's nameservers; ["none"]: nowhere).
	DNS          bool
	DNSAddress   string
	DNSUpstreams []string
	// ContainerLogs is how large a container's log grows before it is rotated and how many
	// files it keeps (logrotate's defaults, 10 MiB and 5, when zero).
	ContainerLogs logrotate.Policy
	// EvictionHard are the node-pressure eviction thresholds (none: the node never reports
	// pressure or evicts); EvictionPressureTransitionPeriod holds a pressure condition after
	// the last crossing (agent/eviction's default when zero).
	EvictionHard                     []eviction.Threshold
	EvictionPressureTransitionPeriod time.Duration
	// EvictionSoft are soft thresholds (each with its grace period); a pod evicted for one
	// gets its own termination grace period, at most EvictionMaxPodGracePeriod seconds when
	// that is positive.
	EvictionSoft              []eviction.Threshold
	EvictionMaxPodGracePeriod int64
	// ImageGC is when unused images are removed (imagegc's defaults, 85% and 80% of the
	// image file system and 2 minutes, when zero).
	ImageGC imagegc.Policy
	// Reserved is what the node keeps back from pods for its own daemons (the kubelet's
	// --kube-reserved and --system-reserved): allocatable leaves it out, and with
	// EnforceNodeAllocatable the cgroup holding every pod (CgroupRoot) is limited to the
	// capacity less it (--enforce-node-allocatable=pods).
	Reserved               []corev1.ResourceList
	EnforceNodeAllocatable bool
}

// Run runs the agent until ctx ends. It is wired in groups, each a method of nodeAgent that
// adds its long-running parts to one supervisor, in this order: infrastructure (the API
// client, the kernel's prerequisites, cgroups, CNI, containerd and the images it holds), the
// node (registration, its Lease, the BGP speaker, then the pod CIDR it is given), the
// datapath (pod addresses, NetworkPolicy, the service proxy, cluster DNS) and the workloads
// (the pods, their volumes and logs, eviction, image GC, static pods, the agent's API and
// health).
func Run(ctx context.Context, cfg *rest.Config, o Options, log *slog.Logger) error {
	a := &nodeAgent{o: o, log: log, dirs: layout.Agent{Dir: o.DataDir}, proxySyncs: newProxySyncSeconds(),
		pressureChanged: make(chan struct{}, 1)}
	if err := a.infrastructure(ctx, cfg); err != nil {
		return err
	}
	defer a.ctr.Close()
	// Every long-running part from here on runs under one supervisor: the pod workers are
	// required (their end ends the agent, non-zero), the others restart with backoff, and
	// any part that is down makes /healthz fail and the Node NotReady, naming it.
	a.sup = supervisor.New(ctx, log)
	// One watch per resource for the whole agent: the pods' service environment, the service
	// proxy and the BGP speaker read the same Services, EndpointSlices and Nodes.
	sharedCtx, stopShared := context.WithCancel(ctx)
	defer stopShared()
	a.shared = sharedinformers.NewShared(sharedCtx, a.client)
	podCIDRs, err := a.node(ctx)
	if err == nil {
		err = a.datapath(ctx, podCIDRs)
	}
	if err != nil {
		a.sup.Stop()
		return err
	}
	log.Info("agent ready", "node", o.NodeName, "podCIDRs", podCIDRs, "runtime", a.nodeOpts.RuntimeVersion)
	conn, err := a.ctr.Dial()
	if err != nil {
		a.sup.Stop()
		return err
	}
	defer conn.Close()
	stopEvents := a.workloads(conn)
	defer stopEvents()
	return a.sup.Wait()
}

// nodeAgent is one running agent: what its groups share.
type nodeAgent struct {
	o    Options
	log  *slog.Logger
	dirs layout.Agent

	// infrastructure
	client     kubernetes.Interface
	restConfig *rest.Config
	cpus       *cpumanager.Manager
	ctr        *runtime.Containerd
	pinned     map[string]bool // images image GC never removes
	socket     string          // where skiff-cni reaches the agent

	sup    *supervisor.Supervisor
	shared *sharedinformers.Shared

	// node: pressure is observed once the runtime's connection and the pod manager exist;
	// until then the node reports none.
	nodeOpts        node.Options
	pressureMgr     atomic.Pointer[pressure.Manager]
	pressureChanged chan struct{}
	speaker         atomic.Pointer[bgp.Speaker]

	// datapath
	proxy          atomic.Pointer[loader.Dataplane]
	mapStatus      atomic.Pointer[services.MapStatus] // the service maps' fill after the last sync
	proxySyncs     *prometheus.HistogramVec
	policyEnforcer *netpol.Enforcer
	dnsServer      *clusterdns.Server
	flows          flows.Observer
}

// infrastructure readies what every other part stands on: the API client, the kernel (fixed
// where it is not right; the agent stops if pod networking cannot work), the pods' cgroup,
// the CPU manager, the CNI plugin and configuration, containerd and its images.
func (a *nodeAgent) infrastructure(ctx context.Context, cfg *rest.Config) error {
	o, log := a.o, a.log
	// client-go's default 5 QPS would serialize a burst of pod starts behind the rate
	// limiter (each start reads volumes and services and writes status); upstream's kubelet
	// uses 50/100 too.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	a.client, a.restConfig = client, cfg
	// As the kubelet (--oom-score-adj -999): the kernel's OOM killer takes pods before the
	// agent and its containerd (which inherits this), where the agent may lower its score.
	if runtime.CanLowerOOMScores() {
		if err := os.WriteFile("/proc/self/oom_score_adj", []byte("-999"), 0o644); err != nil {
			log.Warn("lowering the agent's OOM score adjustment", "err", err)
		}
	}
	// The kernel first: forwarding, bpffs, cgroup v2 — fixed where they are not right, and
	// the agent stops if pod networking cannot work (it would otherwise report Ready).
	steps, err := hostprep.Prepare(hostprep.System{Netns: o.Netns}, hostprep.Needs{ServiceProxy: o.ServiceProxy})
	for _, st := range steps {
		switch {
		case st.Problem != "":
			log.Warn("node prerequisite not met", "check", st.Name, "problem", st.Problem, "required", st.Required)
		case st.Changed:
			log.Info("node prepared", "check", st.Name, "change", st.Detail)
		}
	}
	if err != nil {
		return err
	}
	if o.EnforceNodeAllocatable {
		if err := enforceNodeAllocatable(o, log); err != nil {
			return err
		}
	}
	if a.cpus, err = cpuManager(o, log); err != nil {
		return err
	}
	cniBin, cniConf := a.dirs.CNIBin(), a.dirs.CNIConf()
	a.socket = a.dirs.CNISocket()
	if err := installCNI(o.CNIPlugin, cniBin, a.dirs.CNIConflist(), a.socket); err != nil {
		return err
	}
	if o.RuntimeEndpoint != "" {
		// The operator's containerd must use cniBin/cniConf (or their own skiff-cni setup).
		log.Info("using an external container runtime", "endpoint", o.RuntimeEndpoint, "cniBinDir", cniBin, "cniConfDir", cniConf)
		a.ctr, err = runtime.Connect(ctx, o.RuntimeEndpoint)
	} else {
		a.ctr, err = runtime.Start(ctx, runtime.Options{Dir: a.dirs.Containerd(), CNIBinDir: cniBin, CNIConfDir: cniConf,
			SandboxImage: images.Pause, PodLogDir: o.PodLogDir, Netns: o.Netns,
			RegistryConfigDir: a.dirs.RegistryConfig()}, log)
	}
	if err != nil {
		return err
	}
	a.pinned = a.importImages(ctx)
	v, err := a.ctr.Version(ctx)
	if err != nil {
		a.ctr.Close()
		return err
	}
	a.nodeOpts.RuntimeVersion = "containerd://" + v.RuntimeVersion
	return nil
}

// importImages imports the images built into this binary first (a node needs no image
// directory to start pods), then any archives in the image directories, which may replace
// them. All are pinned, as k3s pins its airgap images: image garbage collection never
// removes them.
func (a *nodeAgent) importImages(ctx context.Context) map[string]bool {
	pinned := map[string]bool{images.Pause: true}
	if files, err := embedded.WriteTo(a.dirs.EmbeddedImages()); err != nil {
		a.log.Warn("embedded images", "err", err)
	} else {
		for _, f := range files {
			refs, err := a.ctr.ImportPinned(ctx, f)
			if err != nil {
				a.log.Warn("image import", "file", f, "err", err)
			}
			for _, r := range refs {
				pinned[r] = true
			}
		}
	}
	for _, dir := range a.o.ImageDirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.tar"))
		for _, f := range files {
			refs, err := a.ctr.ImportPinned(ctx, f)
			if err != nil {
				a.log.Warn("image import", "file", f, "err", err)
			} else {
				a.log.Info("image imported", "file", f, "images", refs)
			}
			for _, r := range refs {
				pinned[r] = true
			}
		}
	}
	return pinned
}

// node registers the Node, keeps its Lease, starts the BGP speaker (its sessions come up
// while the pod CIDR is assigned; it advertises the block at the event that brings it) and
// returns the pod CIDR the nodeipam controller gives the node.
func (a *nodeAgent) node(ctx context.Context) ([]string, error) {
	o, log, client := a.o, a.log, a.client
	pressureNow := func() eviction.Conditions {
		if p := a.pressureMgr.Load(); p != nil {
			return p.Conditions()
		}
		return nil
	}
	a.nodeOpts = node.Options{Name: o.NodeName, InternalIPs: o.InternalIPs, RuntimeVersion: a.nodeOpts.RuntimeVersion, Taints: o.Taints,
		Labels: o.Labels, APIPort: o.APIPort, Health: a.sup.Health, Pressure: pressureNow, PressureChanged: a.pressureChanged,
		Conditions: func() []corev1.NodeCondition { return serviceMapsCondition(o.ServiceProxy, a.mapStatus.Load()) },
		NodeFs:     o.DataDir, Reserved: o.Reserved, EvictionHard: o.EvictionHard,
		// The PV binder provisions local-path volumes under this directory of the node.
		Annotations: map[string]string{volumes.LocalPathRootAnnotation: a.dirs.Storage()}}
	nopts := a.nodeOpts
	if _, err := node.Register(ctx, client, nopts, log); err != nil {
		return nil, err
	}
	for _, p := range o.Parts {
		a.sup.Go(p)
	}
	a.sup.Go(supervisor.Part{Name: "node-lease", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
		node.Heartbeat(ctx, client, nopts, log)
		return ctx.Err()
	}})
	if o.BGP != nil {
		bo := *o.BGP
		bo.NodeName = o.NodeName
		sh := a.shared
		bo.Informers = bgp.Informers{Nodes: sh.Core().V1().Nodes(), Services: sh.Core().V1().Services(),
			EndpointSlices: sh.Discovery().V1().EndpointSlices(), Start: sh.Start}
		bo.BFDStateFile = a.dirs.BFDSessions()
		bo.Started = func(s *bgp.Speaker) { a.speaker.Store(s) }
		a.sup.Go(supervisor.Part{Name: "bgp", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
			return bgp.Run(ctx, client, bo, log.With("component", "bgp"))
		}})
	}
	// Pod addresses come from the node's block, which the nodeipam controller assigns.
	return waitPodCIDR(ctx, client, o.NodeName)
}

// datapath serves pod addresses from the node's blocks to skiff-cni, and runs what the pods'
// packets go through: NetworkPolicy at their veths, the service proxy, the cluster DNS.
func (a *nodeAgent) datapath(ctx context.Context, podCIDRs []string) error {
	o, log, client := a.o, a.log, a.client
	alloc, err := ipam.NewNode(podCIDRs, func(ipv6 bool) ipam.Store {
		if ipv6 {
			return ipam.FileStore{Path: a.dirs.IPAMv6()}
		}
		return ipam.FileStore{Path: a.dirs.IPAM()}
	})
	if err != nil {
		return err
	}
	if slices.ContainsFunc(alloc.CIDRs(), func(c netip.Prefix) bool { return c.Addr().Is6() }) {
		// Pods are routed through the node in IPv6 as in IPv4.
		st := hostprep.ForwardIPv6(hostprep.System{Netns: o.Netns})
		if st.Changed || st.Problem != "" {
			log.Info("host preparation", "step", st.String())
		}
		if st.Problem != "" {
			return errors.New("the node cannot route its pods' IPv6: " + st.String())
		}
	}
	cni := &cniserver.Server{IPAM: alloc, Log: log}
	if o.NetworkPolicy {
		// NetworkPolicy in eBPF: every pod's veth gets the programs, during CNI ADD and
		// after its entries are written, so no pod's first packet escapes its policy.
		local := func() map[netip.Addr]netpol.PodRef {
			out := map[netip.Addr]netpol.PodRef{}
			for _, al := range alloc.Allocations() {
				out[al.IP] = netpol.PodRef{Namespace: al.PodNamespace, Name: al.PodName}
			}
			return out
		}
		var host []netip.Addr
		for _, ip := range o.InternalIPs {
			if addr, err := netip.ParseAddr(ip); err == nil {
				host = append(host, addr)
			}
		}
		informers := netpol.Informers{Pods: a.shared.Core().V1().Pods(), Namespaces: a.shared.Core().V1().Namespaces(),
			NetworkPolicies: a.shared.Networking().V1().NetworkPolicies(), Start: a.shared.Start}
		if err := clusterNetworkPolicies(ctx, a.restConfig, client, &informers); err != nil {
			log.Warn("ClusterNetworkPolicies are not enforced", "err", err)
		}
		enf := netpol.NewEnforcer(netpol.EnforcerOptions{PinDir: loader.PinDir(o.NodeName), Local: local, Host: host,
			Netns: o.Netns, Node: o.NodeName, Informers: informers}, log.With("component", "network-policy"))
		cni.Policy = enf
		a.policyEnforcer = enf
		a.sup.Go(supervisor.Part{Name: "network-policy", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
			return enf.Run(ctx, client)
		}})
	}
	socket := a.socket
	a.sup.Go(supervisor.Part{Name: "cni-server", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
		return cniserver.Serve(ctx, socket, cni.Handler())
	}})
	if o.ServiceProxy {
		// NodePorts are served on the node's address of each family; the per-packet NodePort
		// programs sit on the interface of its IPv4 address (its IPv6 one on an IPv6-only node).
		primary := ipv4Of(o.InternalIPs)
		nodeIP := nodeAddr(primary)
		if !nodeIP.Is4() {
			nodeIP = netip.Addr{}
		}
		po := proxy.Options{Node: services.Node{Name: o.NodeName, IP: nodeIP, IP6: ipv6Of(o.InternalIPs)}, Netns: o.Netns, Uplink: uplinkOf(primary), PinDir: loader.PinDir(o.NodeName), CgroupPath: filepath.Join(cgroups.Unified(), o.CgroupRoot),
			Informers: proxy.Informers{Services: a.shared.Core().V1().Services(), EndpointSlices: a.shared.Discovery().V1().EndpointSlices(),
				Pods: a.shared.Core().V1().Pods(), Start: a.shared.Start},
			Started:  func(d *loader.Dataplane) { a.proxy.Store(d) },
			MapSizes: o.BPFMapSizes, Synced: func(s services.MapStatus) {
				a.mapStatus.Store(&s)
				a.proxySyncs.WithLabelValues(s.Sync).Observe(s.Took.Seconds())
			}}
		a.sup.Go(supervisor.Part{Name: "service-proxy", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
			return proxy.Run(ctx, client, po, log.With("component", "service-proxy"))
		}})
	}
	if o.DNS {
		if a.dnsServer, err = startDNS(ctx, a.sup, client, a.shared, o, log); err != nil {
			return err
		}
	}
	return nil
}

// workloads runs the pods and what serves them: the agent's API (logs, exec, stats), volumes,
// container log rotation, pod resources, image GC, node-pressure eviction, static pods and
// the health endpoint. It returns what stops the node's event recorder.
func (a *nodeAgent) workloads(conn *grpc.ClientConn) (stop func()) {
	o, log, client, sup, dirs := a.o, a.log, a.client, a.sup, a.dirs
	rt, img := runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	if o.ServingCert != "" {
		sup.Go(supervisor.Part{Name: "agent-api", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
			h := (&api.Server{Runtime: rt, Netns: o.Netns, Stats: &stats.Source{Runtime: rt, NodeName: o.NodeName}, Flows: a.flows.Handler()}).Handler()
			return api.Serve(ctx, o.APIAddress, o.ServingCert, o.ServingKey, o.ClientCA, h)
		}})
	}
	// What the node offers is what the downward API reports for limits a container leaves
	// unset (the same figures the Node registered with).
	nodeStatus := node.Status(a.nodeOpts)
	allocatable, memoryCapacity := nodeStatus.Allocatable, nodeStatus.Capacity[corev1.ResourceMemory]
	vols := volumes.New(client, dirs.Pods())
	vols.SetNode(o.primaryIP(), allocatable)
	vols.SetLocalPathRoot(dirs.Storage())
	// Image volumes are mounted through containerd's snapshots (its 1.6 CRI cannot mount
	// images); views whose pod is gone are released at start and every 10 minutes.
	vols.SetImageMounter(imagemount.New(conn))
	sup.Go(supervisor.Part{Name: "image-volume-cleanup", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
		return releaseOrphanImages(ctx, vols, 10*time.Minute, log)
	}})
	sup.Go(supervisor.Part{Name: "container-log-rotation", Policy: supervisor.Restart, Run: (&logrotate.Manager{
		Runtime: rt, Policy: o.ContainerLogs, Log: log}).Run})
	sup.Go(supervisor.Part{Name: "local-path-cleanup", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
		return volumes.CleanLocalPath(ctx, client, dirs.Storage(), time.Minute, log)
	}})
	pm := pods.New(client, rt, img,
		pods.Options{NodeName: o.NodeName, HostIPs: o.InternalIPs, PodLogDir: o.PodLogDir, Netns: o.Netns, CgroupRoot: o.CgroupRoot,
			FlatCgroups: o.FlatCgroups, PodMaxPIDs: o.PodMaxPIDs, NoCFSQuota: o.NoCFSQuota, CPUs: a.cpus, CPUReconcilePeriod: o.CPUManagerReconcilePeriod,
			MemoryCapacity: memoryCapacity.Value(), ClusterDNS: o.ClusterDNS, ClusterDNSService: o.DNS, ClusterDomain: o.ClusterDomain, ResolvConf: o.ResolvConf,
			Services: a.shared.Core().V1().Services(), StartInformers: a.shared.Start,
			Volumes: vols, PodsDir: dirs.Pods(), Allocatable: allocatable, RegistryLogins: dirs.RegistryLogins(), Pressure: a.nodeOpts.Pressure}, log)
	// Flow events: read from the ring the eBPF programs pin, named from the policy
	// enforcer's view, the service maps and the node's pod cgroups (`skiff observe`).
	names := &flowNames{enforcer: a.policyEnforcer, proxy: &a.proxy, pods: pm.ActivePods, cgroupRoot: filepath.Join(cgroups.Unified(), o.CgroupRoot)}
	a.flows.PinDir, a.flows.Node, a.flows.Names, a.flows.Log = loader.PinDir(o.NodeName), o.NodeName, names, log.With("component", "flows")
	sup.Go(supervisor.Part{Name: "flows", Policy: supervisor.Restart, Run: a.flows.Run})
	sup.Go(supervisor.Part{Name: "pod-resources", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
		return (&podresources.Server{Pods: pm.ActivePods, CPUs: a.cpus}).Run(ctx, dirs.PodResourcesSocket())
	}})
	// The node's own events (upstream's kubelet records them on its Node): pressure
	// transitions and image collections that could not free enough.
	nodeEvents := record.NewBroadcaster()
	nodeEvents.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	nodeRecorder := nodeEvents.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: o.NodeName})
	nodeRef := &corev1.ObjectReference{Kind: "Node", Name: o.NodeName, UID: types.UID(o.NodeName)}
	gc := &imagegc.Manager{Images: img, Runtime: rt, Policy: o.ImageGC, Log: log,
		Pinned: func(i imagegc.Image) bool {
			for _, t := range i.Tags {
				if a.pinned[t] {
					return true
				}
			}
			return false
		},
		AlsoInUse: pm.ImageVolumeRefs,
		Failed:    func(msg string) { nodeRecorder.Event(nodeRef, corev1.EventTypeWarning, "FreeDiskSpaceFailed", msg) }}
	sup.Go(supervisor.Part{Name: "image-gc", Policy: supervisor.Restart, Run: gc.Run})
	pmgr := pressure.New(pressure.Options{Thresholds: append(append([]eviction.Threshold{}, o.EvictionHard...), o.EvictionSoft...),
		MaxPodGracePeriod: o.EvictionMaxPodGracePeriod, TransitionPeriod: o.EvictionPressureTransitionPeriod, NodeFs: o.DataDir,
		PodLogDir: o.PodLogDir, PodsDir: dirs.Pods(), CgroupPath: filepath.Join(cgroups.Unified(), o.CgroupRoot), Changed: a.pressureChanged,
		Reclaim: gc.DeleteUnused,
		Event: func(reason string) {
			nodeRecorder.Eventf(nodeRef, corev1.EventTypeNormal, reason, "Node %s status is now: %s", o.NodeName, reason)
		}},
		rt, img, pm, log)
	a.pressureMgr.Store(pmgr)
	sup.Go(supervisor.Part{Name: "eviction", Policy: supervisor.Restart, Run: pmgr.Run})
	if o.HealthzAddress != "" {
		sup.Go(supervisor.Part{Name: "healthz", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
			return serveHealthz(ctx, o.HealthzAddress, a.ctr, sup, &a.speaker, proxyCollector{proxy: &a.proxy, maps: &a.mapStatus, syncs: a.proxySyncs}, a.policyEnforcer, a.dnsServer, &a.flows)
		}})
	}
	if o.PodManifestPath != "" {
		sup.Go(supervisor.Part{Name: "static-pods", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
			static.Run(ctx, client, o.PodManifestPath, o.NodeName, pm, 2*time.Second, log)
			return ctx.Err()
		}})
	}
	sup.Go(supervisor.Part{Name: "pods", Policy: supervisor.Fatal, Run: func(ctx context.Context) error {
		pm.Run(ctx)
		return ctx.Err()
	}})
	return nodeEvents.Shutdown
}

// primaryIP is the node's primary address ("" when it has none).
func (o Options) primaryIP() string {
	if len(o.InternalIPs) == 0 {
		return ""
	}
	return o.InternalIPs[0]
}

// waitPodCIDR watches the node until the nodeipam controller has given it its pod CIDRs (one
// per family of the cluster's --cluster-cidr).
func waitPodCIDR(ctx context.Context, client kubernetes.Interface, name string) ([]string, error) {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (apiruntime.Object, error) {
			o.FieldSelector = sel
			return client.CoreV1().Nodes().List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return client.CoreV1().Nodes().Watch(ctx, o)
		},
	}
	ev, err := watchtools.UntilWithSync(ctx, lw, &corev1.Node{}, nil, func(e watch.Event) (bool, error) {
		n, ok := e.Object.(*corev1.Node)
		return ok && len(podcidr.All(n)) > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for node %s's pod CIDR: %w", name, err)
	}
	return podcidr.All(ev.Object.(*corev1.Node)), nil
}

// releaseOrphanImages releases image volume views no pod uses, now and every period. A failed
// round is logged and tried again the next period (the runtime may be restarting).
func releaseOrphanImages(ctx context.Context, vols *volumes.Manager, period time.Duration, log *slog.Logger) error {
	for {
		released, err := vols.ReleaseOrphanImages(ctx)
		if len(released) > 0 {
			log.Info("released image volume views of pods that are gone", "views", released)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("releasing image volume views", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(period):
		}
	}
}
