package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	gobgpmetrics "github.com/osrg/gobgp/v3/pkg/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
	"github.com/skiff-sh/skiff/dataplane"
	"github.com/skiff-sh/skiff/images"
	"github.com/skiff-sh/skiff/images/embedded"
	sharedinformers "github.com/skiff-sh/skiff/internal/informers"
	"github.com/skiff-sh/skiff/internal/layout"
	"github.com/skiff-sh/skiff/internal/supervisor"
)

// Options configure the agent.
type Options struct {
	// DataDir holds containerd's state, the CNI binaries and config, IPAM and the socket.
	DataDir string
	// Parts are the process's own long-running parts (its garbage collector tuner, for
	// `skiff agent`), run under the agent's supervisor.
	Parts []supervisor.Part
	// NodeName and InternalIP identify the node.
	NodeName, InternalIP string
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
	// by BPFMapSizes (zero: dataplane.DefaultMapSizes).
	ServiceProxy bool
	BPFMapSizes  dataplane.MapSizes
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

// Run runs the agent until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o Options, log *slog.Logger) error {
	// client-go's default 5 QPS would serialize a burst of pod starts behind the rate
	// limiter (each start reads volumes and services and writes status); upstream's kubelet
	// uses 50/100 too.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
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
	dirs := layout.Agent{Dir: o.DataDir}
	cpus, err := cpuManager(o, log)
	if err != nil {
		return err
	}
	cniBin, cniConf, socket := dirs.CNIBin(), dirs.CNIConf(), dirs.CNISocket()
	if err := installCNI(o.CNIPlugin, cniBin, dirs.CNIConflist(), socket); err != nil {
		return err
	}
	var ctr *runtime.Containerd
	if o.RuntimeEndpoint != "" {
		// The operator's containerd must use cniBin/cniConf (or their own skiff-cni setup).
		log.Info("using an external container runtime", "endpoint", o.RuntimeEndpoint, "cniBinDir", cniBin, "cniConfDir", cniConf)
		ctr, err = runtime.Connect(ctx, o.RuntimeEndpoint)
	} else {
		ctr, err = runtime.Start(ctx, runtime.Options{Dir: dirs.Containerd(), CNIBinDir: cniBin, CNIConfDir: cniConf,
			SandboxImage: images.Pause, PodLogDir: o.PodLogDir, Netns: o.Netns,
			RegistryConfigDir: dirs.RegistryConfig()}, log)
	}
	if err != nil {
		return err
	}
	defer ctr.Close()
	// The images built into this binary first (a node needs no image directory to start
	// pods), then any archives in the image directories, which may replace them. All are
	// pinned, as k3s pins its airgap images: image garbage collection never removes them.
	pinned := map[string]bool{images.Pause: true}
	if files, err := embedded.WriteTo(dirs.EmbeddedImages()); err != nil {
		log.Warn("embedded images", "err", err)
	} else {
		for _, f := range files {
			refs, err := ctr.ImportPinned(ctx, f)
			if err != nil {
				log.Warn("image import", "file", f, "err", err)
			}
			for _, r := range refs {
				pinned[r] = true
			}
		}
	}
	for _, dir := range o.ImageDirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.tar"))
		for _, f := range files {
			refs, err := ctr.ImportPinned(ctx, f)
			if err != nil {
				log.Warn("image import", "file", f, "err", err)
			} else {
				log.Info("image imported", "file", f, "images", refs)
			}
			for _, r := range refs {
				pinned[r] = true
			}
		}
	}
	v, err := ctr.Version(ctx)
	if err != nil {
		return err
	}
	// Every long-running part from here on runs under one supervisor: the pod workers are
	// required (their end ends the agent, non-zero), the others restart with backoff, and
	// any part that is down makes /healthz fail and the Node NotReady, naming it.
	sup := supervisor.New(ctx, log)
	// One watch per resource for the whole agent: the pods' service environment, the service
	// proxy and the BGP speaker read the same Services, EndpointSlices and Nodes.
	sharedCtx, stopShared := context.WithCancel(ctx)
	defer stopShared()
	shared := sharedinformers.NewShared(sharedCtx, client)
	// Node pressure is observed once the runtime's connection and the pod manager exist;
	// until then the node reports none.
	var pressureMgr atomic.Pointer[pressure.Manager]
	pressureNow := func() eviction.Conditions {
		if p := pressureMgr.Load(); p != nil {
			return p.Conditions()
		}
		return nil
	}
	pressureChanged := make(chan struct{}, 1)
	var mapStatus atomic.Pointer[dataplane.MapStatus] // the service maps' fill after the last sync
	proxySyncs := newProxySyncSeconds()
	nopts := node.Options{Name: o.NodeName, InternalIP: o.InternalIP, RuntimeVersion: "containerd://" + v.RuntimeVersion, Taints: o.Taints,
		Labels: o.Labels, APIPort: o.APIPort, Health: sup.Health, Pressure: pressureNow, PressureChanged: pressureChanged,
		Conditions: func() []corev1.NodeCondition { return serviceMapsCondition(o.ServiceProxy, mapStatus.Load()) },
		NodeFs:     o.DataDir, Reserved: o.Reserved, EvictionHard: o.EvictionHard,
		// The PV binder provisions local-path volumes under this directory of the node.
		Annotations: map[string]string{volumes.LocalPathRootAnnotation: dirs.Storage()}}
	if _, err := node.Register(ctx, client, nopts, log); err != nil {
		return err
	}
	for _, p := range o.Parts {
		sup.Go(p)
	}
	sup.Go(supervisor.Part{Name: "node-lease", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
		node.Heartbeat(ctx, client, nopts, log)
		return ctx.Err()
	}})

	// The BGP speaker starts before the pod CIDR is known: its sessions come up while the
	// block is assigned, and it advertises the block at the event that brings it.
	var speaker atomic.Pointer[bgp.Speaker]
	if o.BGP != nil {
		bo := *o.BGP
		bo.NodeName = o.NodeName
		bo.Informers = shared
		bo.BFDStateFile = dirs.BFDSessions()
		bo.Started = func(s *bgp.Speaker) { speaker.Store(s) }
		sup.Go(supervisor.Part{Name: "bgp", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
			return bgp.Run(ctx, client, bo, log.With("component", "bgp"))
		}})
	}

	// Pod addresses come from the node's block, which the nodeipam controller assigns.
	podCIDR, err := waitPodCIDR(ctx, client, o.NodeName)
	if err != nil {
		sup.Stop()
		return err
	}
	alloc, err := ipam.New(podCIDR, ipam.FileStore{Path: dirs.IPAM()})
	if err != nil {
		sup.Stop()
		return err
	}
	cni := &cniserver.Server{IPAM: alloc, Log: log}
	var policyEnforcer *dataplane.Enforcer
	if o.NetworkPolicy {
		// NetworkPolicy in eBPF: every pod's veth gets the programs, during CNI ADD and
		// after its entries are written, so no pod's first packet escapes its policy.
		local := func() map[netip.Addr]dataplane.PodRef {
			out := map[netip.Addr]dataplane.PodRef{}
			for _, a := range alloc.Allocations() {
				out[a.IP] = dataplane.PodRef{Namespace: a.PodNamespace, Name: a.PodName}
			}
			return out
		}
		var host []netip.Addr
		if a, err := netip.ParseAddr(o.InternalIP); err == nil {
			host = append(host, a)
		}
		enf := dataplane.NewEnforcer(dataplane.EnforcerOptions{PinDir: dataplane.PinDir(o.NodeName), Local: local, Host: host,
			Netns: o.Netns, Informers: shared, Node: o.NodeName}, log.With("component", "network-policy"))
		cni.Policy = enf
		policyEnforcer = enf
		sup.Go(supervisor.Part{Name: "network-policy", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
			return enf.Run(ctx, client)
		}})
	}
	sup.Go(supervisor.Part{Name: "cni-server", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
		return cniserver.Serve(ctx, socket, cni.Handler())
	}})
	var proxy atomic.Pointer[dataplane.Dataplane]
	if o.ServiceProxy {
		po := dataplane.ProxyOptions{Node: dataplane.Node{Name: o.NodeName, IP: nodeAddr(o.InternalIP)}, Netns: o.Netns, Uplink: uplinkOf(o.InternalIP), PinDir: dataplane.PinDir(o.NodeName), CgroupPath: filepath.Join(cgroups.Unified(), o.CgroupRoot),
			Informers: shared, Started: func(d *dataplane.Dataplane) { proxy.Store(d) },
			MapSizes: o.BPFMapSizes, Synced: func(s dataplane.MapStatus) {
				mapStatus.Store(&s)
				proxySyncs.WithLabelValues(s.Sync).Observe(s.Took.Seconds())
			}}
		sup.Go(supervisor.Part{Name: "service-proxy", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
			return dataplane.RunProxy(ctx, client, po, log.With("component", "service-proxy"))
		}})
	}
	var dnsServer *clusterdns.Server
	if o.DNS {
		if dnsServer, err = startDNS(ctx, sup, client, shared, o, log); err != nil {
			sup.Stop()
			return err
		}
	}
	log.Info("agent ready", "node", o.NodeName, "podCIDR", podCIDR, "runtime", nopts.RuntimeVersion)

	conn, err := ctr.Dial()
	if err != nil {
		sup.Stop()
		return err
	}
	defer conn.Close()
	if o.ServingCert != "" {
		sup.Go(supervisor.Part{Name: "agent-api", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
			rt := runtimeapi.NewRuntimeServiceClient(conn)
			h := (&api.Server{Runtime: rt, Netns: o.Netns, Stats: &stats.Source{Runtime: rt, NodeName: o.NodeName}}).Handler()
			return api.Serve(ctx, o.APIAddress, o.ServingCert, o.ServingKey, o.ClientCA, h)
		}})
	}
	// What the node offers is what the downward API reports for limits a container leaves
	// unset (the same figures the Node registered with).
	nodeStatus := node.Status(nopts)
	allocatable, memoryCapacity := nodeStatus.Allocatable, nodeStatus.Capacity[corev1.ResourceMemory]
	vols := volumes.New(client, dirs.Pods())
	vols.SetNode(o.InternalIP, allocatable)
	vols.SetLocalPathRoot(dirs.Storage())
	// Image volumes are mounted through containerd's snapshots (its 1.6 CRI cannot mount
	// images); views whose pod is gone are released at start and every 10 minutes.
	vols.SetImageMounter(imagemount.New(conn))
	sup.Go(supervisor.Part{Name: "image-volume-cleanup", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
		return releaseOrphanImages(ctx, vols, 10*time.Minute, log)
	}})
	logs := o.ContainerLogs
	if logs == (logrotate.Policy{}) {
		logs = logrotate.Policy{MaxSize: logrotate.DefaultMaxSize, MaxFiles: logrotate.DefaultMaxFiles}
	}
	sup.Go(supervisor.Part{Name: "container-log-rotation", Policy: supervisor.Restart, Run: (&logrotate.Manager{
		Runtime: runtimeapi.NewRuntimeServiceClient(conn), Policy: logs, Log: log}).Run})
	sup.Go(supervisor.Part{Name: "local-path-cleanup", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
		return volumes.CleanLocalPath(ctx, client, dirs.Storage(), time.Minute, log)
	}})
	pm := pods.New(client, runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn),
		pods.Options{NodeName: o.NodeName, HostIP: o.InternalIP, PodLogDir: o.PodLogDir, Netns: o.Netns, CgroupRoot: o.CgroupRoot,
			FlatCgroups: o.FlatCgroups, PodMaxPIDs: o.PodMaxPIDs, NoCFSQuota: o.NoCFSQuota, CPUs: cpus, CPUReconcilePeriod: o.CPUManagerReconcilePeriod,
			MemoryCapacity: memoryCapacity.Value(), ClusterDNS: o.ClusterDNS, ClusterDNSService: o.DNS, ClusterDomain: o.ClusterDomain, ResolvConf: o.ResolvConf, Informers: shared,
			Volumes: vols, PodsDir: dirs.Pods(), Allocatable: allocatable, RegistryLogins: dirs.RegistryLogins(), Pressure: pressureNow}, log)
	sup.Go(supervisor.Part{Name: "pod-resources", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
		return (&podresources.Server{Pods: pm.ActivePods, CPUs: cpus}).Run(ctx, dirs.PodResourcesSocket())
	}})
	transition := o.EvictionPressureTransitionPeriod
	// The node's own events (upstream's kubelet records them on its Node): pressure
	// transitions and image collections that could not free enough.
	nodeEvents := record.NewBroadcaster()
	nodeEvents.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer nodeEvents.Shutdown()
	nodeRecorder := nodeEvents.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: o.NodeName})
	nodeRef := &corev1.ObjectReference{Kind: "Node", Name: o.NodeName, UID: types.UID(o.NodeName)}
	gcPolicy := o.ImageGC
	if gcPolicy == (imagegc.Policy{}) {
		gcPolicy = imagegc.Policy{HighThresholdPercent: imagegc.DefaultHighThresholdPercent, LowThresholdPercent: imagegc.DefaultLowThresholdPercent, MinAge: imagegc.DefaultMinAge}
	}
	gc := &imagegc.Manager{Images: runtimeapi.NewImageServiceClient(conn), Runtime: runtimeapi.NewRuntimeServiceClient(conn), Policy: gcPolicy, Log: log,
		Pinned: func(img imagegc.Image) bool {
			for _, t := range img.Tags {
				if pinned[t] {
					return true
				}
			}
			return false
		},
		AlsoInUse: pm.ImageVolumeRefs,
		Failed:    func(msg string) { nodeRecorder.Event(nodeRef, corev1.EventTypeWarning, "FreeDiskSpaceFailed", msg) }}
	sup.Go(supervisor.Part{Name: "image-gc", Policy: supervisor.Restart, Run: gc.Run})
	pmgr := pressure.New(pressure.Options{Thresholds: append(append([]eviction.Threshold{}, o.EvictionHard...), o.EvictionSoft...),
		MaxPodGracePeriod: o.EvictionMaxPodGracePeriod, TransitionPeriod: transition, NodeFs: o.DataDir,
		PodLogDir: o.PodLogDir, PodsDir: dirs.Pods(), CgroupPath: filepath.Join(cgroups.Unified(), o.CgroupRoot), Changed: pressureChanged,
		Reclaim: gc.DeleteUnused,
		Event: func(reason string) {
			nodeRecorder.Eventf(nodeRef, corev1.EventTypeNormal, reason, "Node %s status is now: %s", o.NodeName, reason)
		}},
		runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn), pm, log)
	pressureMgr.Store(pmgr)
	sup.Go(supervisor.Part{Name: "eviction", Policy: supervisor.Restart, Run: pmgr.Run})
	if o.HealthzAddress != "" {
		sup.Go(supervisor.Part{Name: "healthz", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
			return serveHealthz(ctx, o.HealthzAddress, ctr, sup, &speaker, proxyCollector{proxy: &proxy, maps: &mapStatus, syncs: proxySyncs}, policyEnforcer, dnsServer)
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
	return sup.Wait()
}

// installCNI puts the plugin in the bin dir as skiff-cni (and as "loopback", which CRI runs
// for lo) and writes the network config. A separate skiff-cni binary is copied; without one
// (a plain `go build ./cmd/skiff`), both names link to this binary, which is the plugin when
// started by them.
func installCNI(plugin, binDir, conflist, socket string) error {
	for _, d := range []string{binDir, filepath.Dir(conflist)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	dst := filepath.Join(binDir, "skiff-cni")
	if _, err := os.Stat(plugin); err == nil {
		if err := copyExecutable(plugin, dst); err != nil {
			return fmt.Errorf("skiff-cni plugin: %w", err)
		}
	} else {
		self, eerr := os.Executable()
		if eerr != nil {
			return fmt.Errorf("skiff-cni plugin: %v, and this binary cannot be found to serve instead: %w", err, eerr)
		}
		if err := replaceLink(self, dst); err != nil {
			return err
		}
	}
	if err := replaceLink("skiff-cni", filepath.Join(binDir, "loopback")); err != nil {
		return err
	}
	conf, _ := json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0", "name": "skiff",
		"plugins": []map[string]any{{"type": "skiff-cni", "agentSocket": socket}},
	}, "", "  ")
	return os.WriteFile(conflist, conf, 0o644)
}

// waitPodCIDR watches the node until the nodeipam controller has given it a pod CIDR.
func waitPodCIDR(ctx context.Context, client kubernetes.Interface, name string) (string, error) {
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
		return ok && n.Spec.PodCIDR != "", nil
	})
	if err != nil {
		return "", fmt.Errorf("waiting for node %s's pod CIDR: %w", name, err)
	}
	return ev.Object.(*corev1.Node).Spec.PodCIDR, nil
}

// copyExecutable copies src to dst through a temporary file, so a plugin containerd is
// running is never seen half-written.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// replaceLink makes name a symbolic link to target, replacing whatever name was.
func replaceLink(target, name string) error {
	tmp := name + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// serveHealthz serves /healthz, as the kubelet's 10248 — ok while the runtime answers CRI and
// every supervised part runs; `?verbose` lists each — /metrics (the BGP speaker's session
// states and route counts, the service tables, each part's state) and /debug/pprof on the
// agent's loopback address.
func serveHealthz(ctx context.Context, addr string, ctr *runtime.Containerd, sup *supervisor.Supervisor, speaker *atomic.Pointer[bgp.Speaker],
	proxy proxyCollector, policy *dataplane.Enforcer, dnsServer *clusterdns.Server) error {
	mux := http.NewServeMux()
	reg := prometheus.NewRegistry()
	reg.MustRegister(bgpCollector{speaker}, proxy, partsCollector{sup})
	if policy != nil {
		reg.MustRegister(policyCollector{policy})
	}
	if dnsServer != nil {
		reg.MustRegister(dnsServer.Metrics().Collectors()...)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// Go's profiles, as the kubelet serves them (enableProfilingHandler): on this loopback
	// address only, for `go tool pprof http://127.0.0.1:10248/debug/pprof/heap` on the node.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		cctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		report := "[+]containerd ok\n"
		healthy := true
		if _, err := ctr.Version(cctx); err != nil {
			report, healthy = "[-]containerd failed: "+err.Error()+"\n", false
		}
		report += sup.Report()
		if sup.Health() != nil {
			healthy = false
		}
		if !healthy {
			http.Error(w, report+"healthz check failed", http.StatusInternalServerError)
			return
		}
		if _, verbose := r.URL.Query()["verbose"]; verbose {
			fmt.Fprint(w, report+"healthz check passed\n")
			return
		}
		fmt.Fprint(w, "ok")
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		return err
	}
	return nil
}

var (
	partUpDesc = prometheus.NewDesc("skiff_agent_part_up",
		"1 while a supervised part of the agent runs, 0 while it is down (restarting, or ended).", []string{"part"}, nil)
	partRestartsDesc = prometheus.NewDesc("skiff_agent_part_restarts_total",
		"How often a supervised part of the agent failed and was restarted.", []string{"part"}, nil)
)

// partsCollector exports each supervised part's state.
type partsCollector struct{ sup *supervisor.Supervisor }

func (c partsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- partUpDesc
	ch <- partRestartsDesc
}

func (c partsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.sup.Statuses() {
		up := 0.0
		if st.Running {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(partUpDesc, prometheus.GaugeValue, up, st.Name)
		ch <- prometheus.MustNewConstMetric(partRestartsDesc, prometheus.CounterValue, float64(st.Restarts), st.Name)
	}
}

// bgpCollector exposes GoBGP's collector (bgp_peer_state, bgp_routes_received/accepted/
// advertised per peer) once the speaker runs; before that it reports nothing.
type bgpCollector struct{ speaker *atomic.Pointer[bgp.Speaker] }

func (c bgpCollector) Describe(ch chan<- *prometheus.Desc) {}

func (c bgpCollector) Collect(ch chan<- prometheus.Metric) {
	if s := c.speaker.Load(); s != nil {
		gobgpmetrics.NewBgpCollector(s.Server()).Collect(ch)
	}
}

var (
	socketsDesc = prometheus.NewDesc("skiff_service_sockets",
		"Live sockets balanced to a Service backend: the exact entry count of the socket translation table (skiff_sock_nat).", nil, nil)
	socketsCapDesc = prometheus.NewDesc("skiff_service_sockets_capacity",
		"Capacity of the socket translation table.", nil, nil)
	ctDesc = prometheus.NewDesc("skiff_conntrack_entries",
		"NodePort connection-tracking entries: the exact entry count of skiff_ct.", nil, nil)
	ctCapDesc = prometheus.NewDesc("skiff_conntrack_capacity",
		"Capacity of the NodePort connection-tracking table.", nil, nil)
)

var (
	mapEntriesDesc = prometheus.NewDesc("skiff_bpf_map_entries",
		"Entries the cluster's Services need in each service map after the last sync (more than the capacity when it is full).", []string{"map"}, nil)
	mapCapacityDesc = prometheus.NewDesc("skiff_bpf_map_capacity",
		"Capacity of each service map (--bpf-map-services, --bpf-map-backends, --bpf-map-maglev).", []string{"map"}, nil)
	unprogrammedDesc = prometheus.NewDesc("skiff_service_frontends_unprogrammed",
		"Service frontends left out of the maps because a map is full (0 when everything fits).", nil, nil)
)

// ServiceMapsFull is the Node condition that says a service map is full: True names the
// map and the first frontend left out, as NetworkUnavailable names a broken network.
const ServiceMapsFull corev1.NodeConditionType = "SkiffServiceMapsFull"

// serviceMapsCondition is the node's ServiceMapsFull condition; none before the first sync
// or without the service proxy.
func serviceMapsCondition(proxy bool, s *dataplane.MapStatus) []corev1.NodeCondition {
	if !proxy || s == nil {
		return nil
	}
	now := metav1.Now()
	c := corev1.NodeCondition{Type: ServiceMapsFull, Status: corev1.ConditionFalse, Reason: "ServiceMapsHaveRoom",
		Message: "every Service frontend is programmed", LastHeartbeatTime: now, LastTransitionTime: now}
	if msg := s.Full(); msg != "" {
		c.Status, c.Reason, c.Message = corev1.ConditionTrue, "ServiceMapFull", msg
	}
	return []corev1.NodeCondition{c}
}

// proxyCollector exports the service dataplane's table occupancy, counted exactly at scrape,
// and the service maps' fill as of the last sync.
type proxyCollector struct {
	proxy *atomic.Pointer[dataplane.Dataplane]
	maps  *atomic.Pointer[dataplane.MapStatus]
	syncs *prometheus.HistogramVec // skiff_service_proxy_sync_seconds
}

// newProxySyncSeconds is how long each sync of the service maps took, by how it ran (see
// dataplane.SyncChanges, SyncWhole, SyncResync): kube-proxy's sync_proxy_rules_duration_seconds.
func newProxySyncSeconds() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "skiff_service_proxy_sync_seconds",
		Help:    "Time a sync of the service maps took, by kind: changes (the changed Services alone), whole (the whole state for a change), resync (everything rewritten, periodically).",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}}, []string{"kind"})
}

func (c proxyCollector) Describe(ch chan<- *prometheus.Desc) {
	c.syncs.Describe(ch)
	ch <- socketsDesc
	ch <- socketsCapDesc
	ch <- ctDesc
	ch <- ctCapDesc
	ch <- mapEntriesDesc
	ch <- mapCapacityDesc
	ch <- unprogrammedDesc
}

func (c proxyCollector) Collect(ch chan<- prometheus.Metric) {
	c.syncs.Collect(ch)
	if s := c.maps.Load(); s != nil {
		for _, f := range s.Fill {
			ch <- prometheus.MustNewConstMetric(mapEntriesDesc, prometheus.GaugeValue, float64(f.Entries), f.Map)
			ch <- prometheus.MustNewConstMetric(mapCapacityDesc, prometheus.GaugeValue, float64(f.Capacity), f.Map)
		}
		ch <- prometheus.MustNewConstMetric(unprogrammedDesc, prometheus.GaugeValue, float64(len(s.Dropped)))
	}
	d := c.proxy.Load()
	if d == nil {
		return
	}
	n, capacity, err := d.Maps.SocketCount()
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(socketsDesc, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(socketsCapDesc, prometheus.GaugeValue, float64(capacity))
	if n, capacity, err := dataplane.ConntrackCount(d.Maps.CT); err == nil {
		ch <- prometheus.MustNewConstMetric(ctDesc, prometheus.GaugeValue, float64(n))
		ch <- prometheus.MustNewConstMetric(ctCapDesc, prometheus.GaugeValue, float64(capacity))
	}
}

var policyDropsDesc = prometheus.NewDesc("skiff_network_policy_drops_total",
	"Packets dropped by network policy, by pod and direction (ingress: to the pod, egress: from it).",
	[]string{"pod", "direction"}, nil)

// policyCollector exports the policy program's drop counters, named by pod.
type policyCollector struct{ e *dataplane.Enforcer }

func (c policyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- policyDropsDesc }

func (c policyCollector) Collect(ch chan<- prometheus.Metric) {
	drops, err := c.e.Drops()
	if err != nil {
		return
	}
	res := c.e.Last()
	for _, d := range drops {
		pod := d.Endpoint.String()
		if res != nil {
			if ep, ok := res.Endpoints[d.Endpoint]; ok {
				pod = ep.Pod
			}
		}
		ch <- prometheus.MustNewConstMetric(policyDropsDesc, prometheus.CounterValue, float64(d.Packets), pod, d.Direction.String())
	}
}

func nodeAddr(ip string) netip.Addr {
	a, _ := netip.ParseAddr(ip)
	return a
}

// uplinkOf names the interface that holds the node's address in the agent's namespace, where
// NodePort traffic arrives; "" when none does (then no NodePorts are served).
func uplinkOf(ip string) string {
	want := nodeAddr(ip)
	ifaces, _ := net.Interfaces()
	for _, ifc := range ifaces {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if got, ok := netip.AddrFromSlice(n.IP); ok && got.Unmap() == want && !n.IP.IsLoopback() {
					return ifc.Name
				}
			}
		}
	}
	return ""
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

// cpuManager starts the static CPU manager policy when asked for (nil for none): the CPUs
// reserved are --reserved-cpus, or as many as --kube-reserved and --system-reserved add up
// to, rounded up; its checkpoint is in the data directory.
func cpuManager(o Options, log *slog.Logger) (*cpumanager.Manager, error) {
	if o.CPUManagerPolicy != cpumanager.PolicyStatic {
		return nil, nil
	}
	topo, err := cpumanager.Discover("/sys")
	if err != nil {
		return nil, fmt.Errorf("CPU manager: %w", err)
	}
	reserved := o.ReservedCPUs
	if reserved.IsEmpty() {
		var milli int64
		for _, r := range o.Reserved {
			milli += r.Cpu().MilliValue()
		}
		if reserved, err = cpumanager.ReservedFor(topo, int((milli+999)/1000)); err != nil {
			return nil, fmt.Errorf("CPU manager: reserving the CPUs of --kube-reserved and --system-reserved: %w", err)
		}
	}
	m, err := cpumanager.New(topo, reserved, layout.Agent{Dir: o.DataDir}.CPUManagerCheckpoint())
	if err != nil {
		return nil, fmt.Errorf("CPU manager: %w", err)
	}
	log.Info("static CPU manager policy", "cpus", topo.All().String(), "reserved", reserved.String(), "shared", m.Shared().String())
	return m, nil
}

// enforceNodeAllocatable limits the cgroup every pod is created under to the node's capacity
// less what is reserved for its own daemons, as the kubelet limits kubepods: pods together
// can then never take the memory, CPU share or tasks the node's daemons were promised, even
// before the eviction manager sees pressure. The hard eviction thresholds are not taken off
// here (they are in allocatable, for the scheduler), as the kubelet's.
func enforceNodeAllocatable(o Options, log *slog.Logger) error {
	root := o.CgroupRoot
	capacity := node.Capacity(0, o.DataDir)
	pidReserved := false
	for _, r := range o.Reserved {
		_, ok := r[node.ResourcePID]
		pidReserved = pidReserved || ok
	}
	if pidReserved {
		n, err := pressure.PIDLimit("/proc")
		if err != nil {
			return fmt.Errorf("reading the node's PID limit for --system-reserved/--kube-reserved pid: %w", err)
		}
		capacity[node.ResourcePID] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	pods := node.PodsLimit(capacity, o.Reserved...)
	limits := cgroups.Limits{MemoryBytes: pods.Memory().Value(), MilliCPU: pods.Cpu().MilliValue()}
	if pidReserved {
		limits.PIDs = max(pods.Name(node.ResourcePID, resource.DecimalSI).Value(), 1)
	}
	// Nothing may be reserved down to zero: a zero limit would lift the limit instead.
	limits.MemoryBytes = max(limits.MemoryBytes, 1)
	limits.MilliCPU = max(limits.MilliCPU, 1)
	if err := cgroups.EnforceLimits(cgroups.Mounts(), root, limits); err != nil {
		return fmt.Errorf("enforcing node allocatable on the pods' cgroup %s (--enforce-node-allocatable=none leaves it alone): %w", root, err)
	}
	log.Info("node allocatable enforced on the pods' cgroup", "cgroup", root, "memoryBytes", limits.MemoryBytes,
		"milliCPU", limits.MilliCPU, "pids", limits.PIDs)
	return nil
}
