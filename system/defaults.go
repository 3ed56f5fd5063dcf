package system

import (
	"os"
	"path/filepath"
	"time"

	"github.com/skiff-sh/skiff/agent/cgroups"
	"github.com/skiff-sh/skiff/agent/eviction"
	"github.com/skiff-sh/skiff/agent/imagegc"
	"github.com/skiff-sh/skiff/agent/logrotate"
	"github.com/skiff-sh/skiff/controlplane/controllermanager"
	"github.com/skiff-sh/skiff/controlplane/scheduler"
	"github.com/skiff-sh/skiff/dataplane/services"
	"github.com/skiff-sh/skiff/internal/gctune"
	"github.com/skiff-sh/skiff/internal/layout"
)

// The cluster's address plan (DESIGN.md, "Defaults"): one value each, read by the flags of
// every command that takes them.
const (
	DefaultClusterCIDR   = "10.244.0.0/16"
	DefaultServiceCIDR   = "10.96.0.0/12"
	DefaultClusterDNS    = "10.96.0.10"
	DefaultNodePortRange = "30000-32767"
	DefaultClusterDomain = "cluster.local"
	DefaultAPIServerURL  = "https://127.0.0.1:6443"
)

// DefaultServer is `skiff server` and `skiff apiserver` with no flags given. Flags are bound
// with these values as their defaults, so --help shows them and nothing restates them.
func DefaultServer() Server {
	return Server{
		DataDir: layout.ServerDir, BindAddress: "0.0.0.0", SecurePort: 6443,
		ServiceCIDR: DefaultServiceCIDR, NodePortRange: DefaultNodePortRange,
		EtcdClientPort: 2379, EtcdPeerPort: 2380, EtcdMetrics: 2381,
		Compaction: 5 * time.Minute, MetricResolution: 15 * time.Second,
		ControllerManager: DefaultControllerManager(), Scheduler: DefaultScheduler(),
		Agent: DefaultAgent(), IdleGCPercent: gctune.DefaultIdlePercent,
		SnapshotCron: "0 */12 * * *", SnapshotRetention: 5, CertificateLifetime: 365 * 24 * time.Hour,
	}
}

// DefaultControllerManager is the controllers' settings, in `skiff server` and alone.
func DefaultControllerManager() controllermanager.Options {
	ca := layout.DefaultServer.PKI().CA()
	return controllermanager.Options{
		ClusterCIDR: DefaultClusterCIDR, NodeCIDRMaskSizeIPv4: 24, NodeCIDRMaskSizeIPv6: 64,
		ClusterSigningDuration: 365 * 24 * time.Hour, NodeMonitorGracePeriod: 40 * time.Second,
		SecureAddress: "127.0.0.1:10257", UseServiceAccountCredentials: true, ClusterDNS: DefaultClusterDNS,
		RootCAFile: ca.Cert, ClusterSigningCertFile: ca.Cert, ClusterSigningKeyFile: ca.Key,
	}
}

// DefaultScheduler is the scheduler's settings, in `skiff server` and alone.
func DefaultScheduler() scheduler.Options {
	return scheduler.Options{SecureAddress: "127.0.0.1:10259"}
}

// DefaultAgent is `skiff agent` with no flags given (and the server's own agent).
func DefaultAgent() Agent {
	host, _ := os.Hostname()
	return Agent{
		DataDir: layout.AgentDir, NodeName: host, CNIPlugin: filepath.Join(ExeDir(), "skiff-cni"),
		PodLogDir: layout.PodLogDir, PodManifestPath: layout.PodManifestDir, ResolvConf: layout.ResolvConf,
		HealthzAddress: "127.0.0.1:10248", Port: 10250, CgroupRoot: cgroups.DefaultRoot,
		ClusterDomain: DefaultClusterDomain,
		ServiceProxy:  true, BPFMapSizes: services.DefaultMapSizes, NetworkPolicy: true, DNS: true,
		BGP: true, BGPAPI: "127.0.0.1:50051",
		ContainerLogMaxSize: "10Mi", ContainerLogMaxFiles: logrotate.DefaultMaxFiles, ContainerLogMonitorInterval: logrotate.DefaultPeriod,
		EvictionHard: eviction.DefaultHard, EvictionPressureTransitionPeriod: eviction.DefaultTransitionPeriod,
		ImageGCHighThreshold: imagegc.DefaultHighThresholdPercent, ImageGCLowThreshold: imagegc.DefaultLowThresholdPercent,
		MinimumImageTTL: imagegc.DefaultMinAge, EnforceNodeAllocatable: "pods",
		CgroupsPerQOS: true, CPUCFSQuota: true, PodMaxPIDs: -1,
		CPUManagerPolicy: "none", CPUManagerReconcilePeriod: 10 * time.Second,
		IdleGCPercent: gctune.DefaultIdlePercent,
	}
}
