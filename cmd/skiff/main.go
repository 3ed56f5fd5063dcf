// Command skiff is the single binary of a skiff cluster: `skiff server` runs the control
// plane; later roles (agent, lab) join it as subcommands.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/cni"
	"github.com/skiff-sh/skiff/controlplane/allocator"
	"github.com/skiff-sh/skiff/controlplane/controllermanager"
	"github.com/skiff-sh/skiff/controlplane/pki"
	"github.com/skiff-sh/skiff/controlplane/scheduler"
	"github.com/skiff-sh/skiff/images"
	"github.com/skiff-sh/skiff/internal/configfile"
	"github.com/skiff-sh/skiff/internal/layout"
	"github.com/skiff-sh/skiff/internal/supervisor"
	"github.com/skiff-sh/skiff/internal/version"
	"github.com/skiff-sh/skiff/system"
)

func main() {
	// Started as skiff-cni or loopback (the agent installs links to this binary when no
	// separate skiff-cni is beside it), skiff is the CNI plugin.
	if cni.IsPlugin() {
		cni.PluginMain()
		return
	}
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "skiff:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "skiff",
		Short:         "A compact Kubernetes-compatible cluster for bare-metal, network-heavy sites",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		&cobra.Command{
			Use:   "version",
			Short: "Print skiff's version",
			Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), version.String()) },
		},
		withConfigFile(serverCommand("server", "Run the control plane: embedded etcd (or --etcd-servers) and the API server")),
		withConfigFile(serverCommand("apiserver", "Run the API server alone (with embedded etcd unless --etcd-servers is set)")),
		certsCommand(),
		certificateCommand(),
		installCommand(),
		uninstallCommand(),
		killallCommand(),
		checkConfigCommand(),
		secretsEncryptCommand(),
		etcdSnapshotCommand(),
		withConfigFile(controllerManagerCommand()),
		withConfigFile(schedulerCommand()),
		imagesCommand(),
		withConfigFile(agentCommand()),
		bgpCommand(),
		bpfCommand(),
		observeCommand(),
		policyCommand(),
		dnsCommand(),
		labCommand(),
		kubeconfigCommand(),
		genDocsCommand(),
	)
	return root
}

func serverCommand(use, short string) *cobra.Command {
	f := system.DefaultServer()
	var logLevel, resetFrom string
	var reset bool
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if reset {
				return system.ResetCluster(ctx, f, resetFrom, newLogger(logLevel))
			}
			log := newLogger(logLevel)
			return restartable(ctx, log, system.RunServer(ctx, f, use == "server", log))
		},
	}
	fs := cmd.Flags()
	f.Audit = genericoptions.NewAuditOptions()
	f.Audit.AddFlags(fs)
	fs.BoolVar(&f.SecretsEncryption, "secrets-encryption", f.SecretsEncryption, "encrypt Secrets at rest with a generated aescbc key (<data-dir>/cred/encryption-config.json; rotate with `skiff secrets-encrypt rotate-keys`)")
	fs.StringVar(&f.EncryptionProviderConfig, "encryption-provider-config", f.EncryptionProviderConfig, "an EncryptionConfiguration file of your own (upstream's flag); reloaded when it changes")
	fs.StringVar(&f.DataDir, "data-dir", f.DataDir, "directory for etcd data, the PKI and admin.kubeconfig")
	fs.StringVar(&f.BindAddress, "bind-address", f.BindAddress, "address the API server listens on")
	fs.StringVar(&f.AdvertiseAddress, "advertise-address", f.AdvertiseAddress, "address other components reach the API server at (default: first non-loopback address)")
	fs.StringSliceVar(&f.TLSSANs, "tls-san", f.TLSSANs, "extra IP addresses or DNS names for the API server certificate")
	fs.StringVar(&f.Token, "token", f.Token, "join token <id>.<secret> ([a-z0-9]{6}.[a-z0-9]{16}) instead of a random one, or with --server the cluster's K10<CA hash>::<id>.<secret>; written with the CA pin to <data-dir>/token")
	fs.StringVar(&f.AgentToken, "agent-token", f.AgentToken, "a second join token <id>.<secret> for agents only (it never admits a server, which receives the CAs' keys); written with the CA pin to <data-dir>/agent-token. Without it agents join with --token")
	fs.IntVar(&f.SecurePort, "secure-port", f.SecurePort, "HTTPS port of the API server")
	fs.StringVar(&f.ServiceCIDR, "service-cidr", f.ServiceCIDR, "range ClusterIPs are allocated from; an IPv4 and an IPv6 range, comma-separated, serve dual-stack Services (the first is the primary family)")
	fs.StringVar(&f.NodePortRange, "service-node-port-range", f.NodePortRange, "range NodePorts are allocated from")
	fs.StringSliceVar(&f.EtcdServers, "etcd-servers", f.EtcdServers, "external etcd client URLs; embedded etcd is used when empty")
	fs.StringVar(&f.EtcdCA, "etcd-cafile", f.EtcdCA, "CA of the external etcd (default: <data-dir>/pki/etcd/ca.crt)")
	fs.StringVar(&f.EtcdCert, "etcd-certfile", f.EtcdCert, "client certificate for etcd (default: <data-dir>/pki/apiserver-etcd-client.crt)")
	fs.StringVar(&f.EtcdKey, "etcd-keyfile", f.EtcdKey, "client key for etcd (default: <data-dir>/pki/apiserver-etcd-client.key)")
	fs.IntVar(&f.EtcdClientPort, "etcd-client-port", f.EtcdClientPort, "client port of the embedded etcd (127.0.0.1)")
	fs.IntVar(&f.EtcdPeerPort, "etcd-peer-port", f.EtcdPeerPort, "peer port of the embedded etcd (127.0.0.1)")
	fs.IntVar(&f.EtcdMetrics, "etcd-metrics-port", f.EtcdMetrics, "plain-HTTP metrics port of the embedded etcd (127.0.0.1)")
	fs.DurationVar(&f.Compaction, "etcd-compaction-interval", f.Compaction, "how often the API server compacts etcd")
	fs.StringVar(&f.SnapshotCron, "etcd-snapshot-schedule-cron", f.SnapshotCron, "when the embedded etcd is snapshotted, in cron form (minute hour day month weekday; a seconds field first is allowed; @every 6h)")
	fs.IntVar(&f.SnapshotRetention, "etcd-snapshot-retention", f.SnapshotRetention, "how many scheduled snapshots of this server to keep")
	fs.StringVar(&f.SnapshotDir, "etcd-snapshot-dir", f.SnapshotDir, "where scheduled snapshots go (default <data-dir>/db/snapshots)")
	fs.BoolVar(&f.DisableSnapshots, "etcd-disable-snapshots", f.DisableSnapshots, "take no scheduled snapshots")
	fs.DurationVar(&f.CertificateLifetime, "certificate-lifetime", f.CertificateLifetime, "how long the certificates and kubeconfigs the server issues itself last; each is renewed within 90 days of expiry (or in the last quarter of a shorter lifetime), at start and while the server runs")
	fs.DurationVar(&f.MetricResolution, "metric-resolution", f.MetricResolution, "how often node agents are read for metrics.k8s.io (kubectl top, HPAs), as metrics-server's flag")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fs.BoolVar(&f.ClusterInit, "cluster-init", f.ClusterInit, "start a cluster that further servers join with --server (HA with embedded etcd: the member meets its peers on the advertised address)")
	fs.StringVar(&f.JoinServer, "server", f.JoinServer, "join the cluster of this running server (https://ADDRESS:6443) with --token: its etcd as a member, its CAs and keys")
	fs.BoolVar(&reset, "cluster-reset", false, "make this server's embedded etcd member the only one of a new cluster, keeping its data, then stop (after quorum is lost)")
	fs.StringVar(&resetFrom, "cluster-reset-restore-path", "", "with --cluster-reset: a snapshot to restore as the one member's data instead")
	addIdleGCFlag(fs, &f.IdleGCPercent)
	if use == "server" {
		fs.BoolVar(&f.DisableAgent, "disable-agent", f.DisableAgent, "do not run a node agent beside the control plane")
		addControllerManagerFlags(fs, &f.ControllerManager)
		addSchedulerFlags(fs, &f.Scheduler)
		addAgentFlags(fs, &f.Agent, "agent-")
		fs.BoolVar(&f.DisableScheduler, "disable-scheduler", f.DisableScheduler, "do not run the scheduler (run `skiff scheduler` elsewhere)")
		fs.BoolVar(&f.DisableControllerManager, "disable-controller-manager", f.DisableControllerManager, "do not run the controllers (run `skiff controller-manager` elsewhere)")
	}
	return cmd
}

// withConfigFile gives a long-running command --config: its flags' values from a YAML file
// and the config.yaml.d directory beside it, read before it runs (internal/configfile); flags
// on the command line win.
func withConfigFile(cmd *cobra.Command) *cobra.Command {
	path := layout.ConfigFile
	cmd.Flags().StringVar(&path, "config", path, "configuration file: flag names as keys (and "+filepath.Base(path)+".d/*.yaml beside it, in name order); flags given here win; \"\" for none")
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		files, err := configfile.Files(path, cmd.Flags().Changed("config"))
		if err != nil {
			return err
		}
		return configfile.Apply(cmd.Flags(), files)
	}
	return cmd
}

// addIdleGCFlag is --idle-gc-percent, of `skiff server` and `skiff agent` (internal/gctune).
func addIdleGCFlag(fs *pflag.FlagSet, p *int) {
	fs.IntVar(p, "idle-gc-percent", *p, "garbage collector target (GOGC) while the process is idle; Go's default (100) comes back within a quarter of a second of load (0: Go's default always; GOGC in the environment also turns this off)")
}

func addAgentFlags(fs *pflag.FlagSet, f *system.Agent, prefix string) {
	fs.StringVar(&f.DataDir, prefix+"data-dir", f.DataDir, "directory for the agent's containerd, CNI and IPAM state")
	fs.StringVar(&f.NodeName, "node-name", f.NodeName, "name of this node")
	fs.StringVar(&f.NodeIP, "node-ip", f.NodeIP, "address of this node (default: first non-loopback address)")
	fs.StringVar(&f.Netns, prefix+"netns", f.Netns, "network namespace (/run/netns/NAME) for the node's containerd and pods, as in the lab")
	fs.StringVar(&f.CNIPlugin, "cni-plugin", f.CNIPlugin, "skiff-cni binary to install (when it does not exist, this binary serves as the plugin)")
	fs.StringSliceVar(&f.ImageDirs, prefix+"images-dir", f.ImageDirs, "directories of image archives to import at start (default: <data-dir>/images and images/ beside the binary)")
	fs.StringVar(&f.PodLogDir, "pod-log-dir", f.PodLogDir, "where container logs are written")
	fs.StringVar(&f.ContainerLogMaxSize, "container-log-max-size", f.ContainerLogMaxSize, "size at which a container's log is rotated, as the kubelet's containerLogMaxSize")
	fs.IntVar(&f.ContainerLogMaxFiles, "container-log-max-files", f.ContainerLogMaxFiles, "log files kept per container, the live one included (at least 2), as the kubelet's containerLogMaxFiles")
	fs.DurationVar(&f.ContainerLogMonitorInterval, "container-log-monitor-interval", f.ContainerLogMonitorInterval, "how often container logs are checked for rotation, as the kubelet's containerLogMonitorInterval")
	fs.StringVar(&f.EvictionHard, "eviction-hard", f.EvictionHard, "hard node-pressure eviction thresholds SIGNAL<QUANTITY|PERCENT%, comma-separated, as the kubelet's (a signal at 0 is off; empty: none)")
	fs.IntVar(&f.ImageGCHighThreshold, "image-gc-high-threshold", f.ImageGCHighThreshold, "percent of the image file system used that starts removing unused images, as the kubelet's (100: never)")
	fs.IntVar(&f.ImageGCLowThreshold, "image-gc-low-threshold", f.ImageGCLowThreshold, "percent of the image file system used that image garbage collection brings it down to, as the kubelet's")
	fs.DurationVar(&f.MinimumImageTTL, "minimum-image-ttl-duration", f.MinimumImageTTL, "how long an unused image stays before garbage collection may remove it, as the kubelet's")
	fs.StringVar(&f.EvictionSoft, "eviction-soft", f.EvictionSoft, "soft node-pressure eviction thresholds, as --eviction-hard's, each acted on once crossed for its grace period (empty: none)")
	fs.StringVar(&f.EvictionSoftGracePeriod, "eviction-soft-grace-period", f.EvictionSoftGracePeriod, "SIGNAL=DURATION for each --eviction-soft threshold, comma-separated, e.g. memory.available=1m30s")
	fs.Int64Var(&f.EvictionMaxPodGracePeriod, "eviction-max-pod-grace-period", f.EvictionMaxPodGracePeriod, "longest termination grace period, in seconds, of a pod evicted for a soft threshold (0: the pod's own)")
	fs.StringVar(&f.EvictionMinimumReclaim, "eviction-minimum-reclaim", f.EvictionMinimumReclaim, "SIGNAL=QUANTITY|PERCENT% for thresholds, comma-separated: once crossed, a threshold holds until the signal is this far past it, as the kubelet's (e.g. nodefs.available=500Mi)")
	fs.DurationVar(&f.EvictionPressureTransitionPeriod, "eviction-pressure-transition-period", f.EvictionPressureTransitionPeriod, "how long a pressure condition stays after its threshold was last crossed, as the kubelet's")
	fs.StringVar(&f.KubeReserved, "kube-reserved", f.KubeReserved, "resources kept back from pods for skiff and containerd, RESOURCE=QUANTITY comma-separated (cpu, memory, ephemeral-storage, pid), as the kubelet's")
	fs.StringVar(&f.SystemReserved, "system-reserved", f.SystemReserved, "resources kept back from pods for the operating system's daemons, as --kube-reserved's")
	fs.StringVar(&f.EnforceNodeAllocatable, "enforce-node-allocatable", f.EnforceNodeAllocatable, "pods: limit the cgroup holding every pod (--cgroup-root) to the capacity less what is reserved; none: do not")
	fs.IntVar(&f.Port, prefix+"port", f.Port, "HTTPS port of the agent API (container logs)")
	fs.StringVar(&f.PodManifestPath, "pod-manifest-path", f.PodManifestPath, "directory of static pod manifests")
	fs.StringVar(&f.HealthzAddress, prefix+"healthz-address", f.HealthzAddress, "plain-HTTP /healthz of the agent (empty to disable)")
	fs.StringVar(&f.CgroupRoot, "cgroup-root", f.CgroupRoot, "parent cgroup of every pod")
	fs.BoolVar(&f.CgroupsPerQOS, "cgroups-per-qos", f.CgroupsPerQOS, "put each pod's cgroup under its QoS class's (burstable, besteffort) with the pod's CPU weight, quota and memory limit, as the kubelet's; false: every pod's right under --cgroup-root, unlimited")
	fs.BoolVar(&f.CPUCFSQuota, "cpu-cfs-quota", f.CPUCFSQuota, "enforce CPU limits with CFS quotas on pods and containers, as the kubelet's; false: limits are not enforced and nothing is throttled")
	fs.StringVar(&f.CPUManagerPolicy, "cpu-manager-policy", f.CPUManagerPolicy, "static: containers of Guaranteed pods that request whole CPUs get those CPUs to themselves, the others share the rest, as the kubelet's; none: every container may run on every CPU")
	fs.StringVar(&f.ReservedCPUs, "reserved-cpus", f.ReservedCPUs, "CPUs kept for the node's daemons, never given to a container to itself, e.g. 0-1 (stands for the cpu of --kube-reserved and --system-reserved), as the kubelet's")
	fs.DurationVar(&f.CPUManagerReconcilePeriod, "cpu-manager-reconcile-period", f.CPUManagerReconcilePeriod, "how often the static CPU manager policy checks every container is on its CPUs")
	fs.Int64Var(&f.PodMaxPIDs, "pod-max-pids", f.PodMaxPIDs, "most processes and threads each pod may run (pids.max of its cgroup), as the kubelet's (-1: no limit)")
	fs.BoolVar(&f.ServiceProxy, "service-proxy", f.ServiceProxy, "load-balance Services for this node's pods with eBPF (pinned under /sys/fs/bpf/skiff/<node>)")
	fs.IntVar(&f.BPFMapSizes.Services, "bpf-map-services", f.BPFMapSizes.Services, "capacity of the service maps in frontends (a Service port's ClusterIP, NodePort, external or LoadBalancer address each); allocated as used")
	fs.IntVar(&f.BPFMapSizes.Backends, "bpf-map-backends", f.BPFMapSizes.Backends, "capacity of the backend map: the endpoints of every Service port together; allocated as used")
	fs.IntVar(&f.BPFMapSizes.Maglev, "bpf-map-maglev", f.BPFMapSizes.Maglev, "capacity of the Maglev lookup map: 1021 entries per Service port balanced by Maglev; allocated as used")
	fs.BoolVar(&f.NetworkPolicy, "network-policy", f.NetworkPolicy, "enforce NetworkPolicies on this node's pod veths with eBPF (tcx; pinned under /sys/fs/bpf/skiff/<node>)")
	fs.BoolVar(&f.BGP, "bgp", f.BGP, "run the node's BGP speaker: advertise its pod CIDR, install the other nodes' (see ConfigMap kube-system/skiff-bgp)")
	fs.Uint32Var(&f.BGPASN, "bgp-asn", f.BGPASN, "this node's AS, overriding the ConfigMap and the bgp.skiff.sh/asn annotation (default 64512)")
	fs.StringSliceVar(&f.BGPPeers, "bgp-peer", f.BGPPeers, "BGP peer ADDRESS:ASN (repeatable), replacing the configured peers, e.g. a top-of-rack router")
	fs.StringVar(&f.BGPNodeMesh, "bgp-node-mesh", f.BGPNodeMesh, "true or false: peer with every other node (default true, or as configured)")
	fs.StringVar(&f.BGPAPI, "bgp-api-address", f.BGPAPI, "GoBGP gRPC API of the speaker, for skiff bgp peers|routes (empty: none)")
	fs.StringVar(&f.RuntimeEndpoint, "container-runtime-endpoint", f.RuntimeEndpoint, "CRI socket of a containerd to use instead of supervising one (unix:///run/containerd/containerd.sock)")
	fs.StringSliceVar(&f.ClusterDNS, "cluster-dns", f.ClusterDNS, "DNS server IPs of the cluster, for pods with dnsPolicy ClusterFirst (default: kube-system/kube-dns's address when --dns is on; else none, and they use the node's resolv.conf)")
	fs.BoolVar(&f.DNS, "dns", f.DNS, "serve the cluster DNS (the kube-dns Service) for this node's pods")
	fs.StringVar(&f.DNSAddress, "dns-address", f.DNSAddress, "address the cluster DNS listens on, UDP and TCP (default <node-ip>:53)")
	fs.StringSliceVar(&f.DNSUpstreams, "dns-upstream", f.DNSUpstreams, "resolvers for names outside the cluster domain, HOST[:PORT] (default: the nameservers of --resolv-conf; \"none\": forward nowhere)")
	fs.StringVar(&f.ClusterDomain, "cluster-domain", f.ClusterDomain, "cluster DNS domain, the base of pods' search paths")
	fs.StringVar(&f.ResolvConf, "resolv-conf", f.ResolvConf, "the node's resolver configuration, for pods with dnsPolicy Default")
	if prefix == "" {
		fs.StringVar(&f.ServingCert, "tls-cert-file", f.ServingCert, "agent API serving certificate (default <data-dir>/pki/agent.crt, obtained when joining with --token)")
		fs.StringVar(&f.ServingKey, "tls-private-key-file", f.ServingKey, "agent API serving key (default <data-dir>/pki/agent.key)")
		fs.StringVar(&f.ClientCA, "client-ca-file", f.ClientCA, "CA of the clients the agent API accepts (default <data-dir>/pki/ca.crt)")
	}
}

func addControllerManagerFlags(fs *pflag.FlagSet, o *controllermanager.Options) {
	fs.StringVar(&o.ClusterCIDR, "cluster-cidr", o.ClusterCIDR, "range node pod CIDRs are carved from; an IPv4 and an IPv6 range, comma-separated, give each node a block of each (the first is podCIDR)")
	fs.IntVar(&o.NodeCIDRMaskSize, "node-cidr-mask-size", o.NodeCIDRMaskSize, "prefix length of each node's pod CIDR in a single-stack cluster (0: by family, from the two flags below)")
	fs.IntVar(&o.NodeCIDRMaskSizeIPv4, "node-cidr-mask-size-ipv4", o.NodeCIDRMaskSizeIPv4, "prefix length of each node's IPv4 pod CIDR")
	fs.IntVar(&o.NodeCIDRMaskSizeIPv6, "node-cidr-mask-size-ipv6", o.NodeCIDRMaskSizeIPv6, "prefix length of each node's IPv6 pod CIDR")
	fs.DurationVar(&o.ClusterSigningDuration, "cluster-signing-duration", o.ClusterSigningDuration, "longest validity of certificates signed for CSRs")
	fs.DurationVar(&o.NodeMonitorGracePeriod, "node-monitor-grace-period", o.NodeMonitorGracePeriod, "how long a node Lease may go unrenewed before the node is Unknown")
	fs.StringVar(&o.SecureAddress, "controller-manager-address", o.SecureAddress, "HTTPS address of the controller manager's health and metrics")
	fs.BoolVar(&o.UseServiceAccountCredentials, "use-service-account-credentials", o.UseServiceAccountCredentials, "run each controller with its own service account")
	fs.StringSliceVar(&o.LoadBalancerCIDRs, "loadbalancer-cidr", o.LoadBalancerCIDRs, "pool LoadBalancer Services take addresses from (repeatable; more in loadBalancerPools of kube-system/skiff-bgp)")
	fs.StringVar(&o.ClusterDNS, "cluster-dns-address", o.ClusterDNS, "address of the cluster DNS Service kube-system/kube-dns, answered by every agent (empty: no such Service); left at the default with a --service-cidr that does not hold it, the tenth address of the first range (fd00:10:96::a)")
}

func addSchedulerFlags(fs *pflag.FlagSet, o *scheduler.Options) {
	fs.StringVar(&o.SecureAddress, "scheduler-address", o.SecureAddress, "HTTPS address of the scheduler's health and metrics")
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
	// The libraries skiff is built on (apiserver, client-go, etcd's client) log through klog:
	// one format, one level, one stream.
	klog.SetSlogLogger(log.With("logger", "klog"))
	return log
}

// certsCommand writes the PKI without starting anything, like `kubeadm init phase certs all`;
// an external etcd cluster can then be started with <data-dir>/pki/etcd.
func certsCommand() *cobra.Command {
	var dataDir, advertise, serviceCIDR string
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Create the cluster PKI under <data-dir>/pki (existing files are kept)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ips []net.IP
			if advertise != "" {
				ip, err := system.ParseIP("--advertise-address", advertise)
				if err != nil {
					return err
				}
				ips = append(ips, ip)
			}
			// The kubernetes Service's address, as the server derives it: the first of the range.
			rs, err := allocator.ParseServiceCIDRs(serviceCIDR)
			if err != nil {
				return fmt.Errorf("--service-cidr: %w", err)
			}
			l, err := pki.Ensure(pki.Options{Dir: layout.Server{Dir: dataDir}.PKI().Dir, APIServerIPs: ips, ServiceIP: net.ParseIP(rs[0].First())})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "PKI ready in", l.Dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", layout.ServerDir, "directory to create pki/ in")
	cmd.Flags().StringVar(&advertise, "advertise-address", "", "extra IP SAN for the API server certificate")
	cmd.Flags().StringVar(&serviceCIDR, "service-cidr", system.DefaultServiceCIDR, "the server's --service-cidr: the first address of its first range (the kubernetes Service) is a SAN")
	return cmd
}

func imagesCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "images", Short: "skiff's own container images"}
	var pauseBin, netutilBin, out string
	build := &cobra.Command{
		Use:   "build",
		Short: "Assemble the pause and netutil images (OCI archives) from static binaries",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			files, err := images.Build(pauseBin, netutilBin, out)
			for _, f := range files {
				fmt.Fprintln(cmd.OutOrStdout(), f)
			}
			return err
		},
	}
	build.Flags().StringVar(&pauseBin, "pause", "bin/pause", "static pause binary")
	build.Flags().StringVar(&netutilBin, "netutil", "bin/netutil", "static netutil binary")
	build.Flags().StringVar(&out, "out", "bin/images", "directory for pause.tar and netutil.tar")
	var agentDir string
	imp := &cobra.Command{
		Use:   "import FILE...",
		Short: "Import image archives into the node agent's containerd (namespace k8s.io)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			socket := layout.Agent{Dir: agentDir}.ContainerdSocket()
			for _, f := range files {
				out, err := exec.CommandContext(cmd.Context(), "ctr", "--address", socket, "-n", "k8s.io", "images", "import", "--all-platforms", f).CombinedOutput()
				if err != nil {
					return fmt.Errorf("import %s: %v: %s", f, err, strings.TrimSpace(string(out)))
				}
				fmt.Fprint(cmd.OutOrStdout(), string(out))
			}
			return nil
		},
	}
	imp.Flags().StringVar(&agentDir, "agent-data-dir", layout.AgentDir, "the agent's data directory (its containerd socket is under it)")
	cmd.AddCommand(build, imp)
	return cmd
}

// kubeconfigCommand issues a client certificate from the cluster CA and writes a kubeconfig,
// as `kubeadm kubeconfig user` does (e.g. for an agent: --user system:node:NAME --group
// system:nodes).
func kubeconfigCommand() *cobra.Command {
	var dataDir, user, server, out string
	var groups []string
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Write a kubeconfig with a client certificate issued by the cluster CA",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if user == "" || out == "" {
				return fmt.Errorf("--user and --out are required")
			}
			ca, err := pki.LoadCA(layout.Server{Dir: dataDir}.PKI().CA())
			if err != nil {
				return err
			}
			if err := pki.WriteKubeconfig(out, server, ca, user, groups); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), out)
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", layout.ServerDir, "server data directory holding pki/")
	cmd.Flags().StringVar(&user, "user", "", "user name (certificate CN)")
	cmd.Flags().StringSliceVar(&groups, "group", nil, "groups (certificate O)")
	cmd.Flags().StringVar(&server, "server", system.DefaultAPIServerURL, "API server URL")
	cmd.Flags().StringVar(&out, "out", "", "kubeconfig file to write")
	return cmd
}

// clientCommand is a component that talks to the API server with a kubeconfig: it gets the
// --kubeconfig and --log-level flags and runs until SIGINT or SIGTERM.
func clientCommand(use, short, kubeconfig string, run func(ctx context.Context, cfg *rest.Config, log *slog.Logger) error) *cobra.Command {
	var logLevel string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return run(ctx, cfg, newLogger(logLevel))
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", kubeconfig, "kubeconfig to reach the API server")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}

// agentCommand runs a node. With --token it first joins (see agent/join): it pins the CA,
// and obtains its client and serving certificates through CSRs; a kubeconfig and
// certificates already in the data directory are reused.
func agentCommand() *cobra.Command {
	f := system.DefaultAgent()
	var j system.Join
	var logLevel string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent: containerd, CNI, node registration and pods",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := newLogger(logLevel)
			return restartable(ctx, log, system.RunAgent(ctx, f, j, log))
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&j.Server, "server", "", "API server URL to join (https://IP:6443), with --token; several, comma-separated, for a highly available control plane (the agent fails over between them)")
	fs.StringVar(&j.Token, "token", "", "join token, from the server's <data-dir>/token")
	fs.StringVar(&j.TokenFile, "token-file", "", "file holding the join token")
	fs.DurationVar(&j.CACheckInterval, "cluster-ca-check-interval", 10*time.Minute, "how often a joined agent reads the server's CA bundle; when it changed (skiff certificate rotate-ca) the agent writes it and starts again")
	fs.StringVar(&j.Kubeconfig, "kubeconfig", "", "kubeconfig to reach the API server instead of joining (default <data-dir>/node.kubeconfig)")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	addAgentFlags(fs, &f, "")
	addIdleGCFlag(fs, &f.IdleGCPercent)
	return cmd
}

func controllerManagerCommand() *cobra.Command {
	o := system.DefaultControllerManager()
	cmd := clientCommand("controller-manager", "Run the controllers alone (leader-elected on kube-system/kube-controller-manager)",
		layout.DefaultServer.Kubeconfig("controller-manager"), func(ctx context.Context, cfg *rest.Config, log *slog.Logger) error {
			return controllermanager.Run(ctx, cfg, o, log)
		})
	cmd.Flags().StringVar(&o.RootCAFile, "root-ca-file", o.RootCAFile, "cluster CA published as kube-root-ca.crt")
	cmd.Flags().StringVar(&o.ClusterSigningCertFile, "cluster-signing-cert-file", o.ClusterSigningCertFile, "CA certificate that signs approved node CSRs (empty: no signing)")
	cmd.Flags().StringVar(&o.ClusterSigningKeyFile, "cluster-signing-key-file", o.ClusterSigningKeyFile, "CA key that signs approved node CSRs")
	addControllerManagerFlags(cmd.Flags(), &o)
	return cmd
}

func schedulerCommand() *cobra.Command {
	o := system.DefaultScheduler()
	cmd := clientCommand("scheduler", "Run the scheduler alone (leader-elected on kube-system/kube-scheduler)",
		layout.DefaultServer.Kubeconfig("scheduler"), func(ctx context.Context, cfg *rest.Config, log *slog.Logger) error {
			return scheduler.Run(ctx, cfg, o, log)
		})
	addSchedulerFlags(cmd.Flags(), &o)
	return cmd
}

// restartable passes on err, the end of a supervised process, unless a part asked for the
// process to start again (supervisor.ErrRestartProcess: a CA bundle changed): then the
// process is replaced by a fresh start of the same binary and arguments — the same PID, so
// systemd, the lab and tests keep following it.
func restartable(ctx context.Context, log *slog.Logger, err error) error {
	if !errors.Is(err, supervisor.ErrRestartProcess) || ctx.Err() != nil {
		return err
	}
	log.Info("starting again", "because", err.Error())
	return reexec()
}

// reexec replaces the process with a fresh start of the same binary and arguments.
func reexec() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	return syscall.Exec(exe, os.Args, os.Environ())
}
