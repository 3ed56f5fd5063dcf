// Command skiff is the single binary of a skiff cluster: `skiff server` runs the control
// plane; later roles (agent, lab) join it as subcommands.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/agent"
	"github.com/skiff-sh/skiff/agent/join"
	"github.com/skiff-sh/skiff/bgp"
	"github.com/skiff-sh/skiff/bgp/config"
	"github.com/skiff-sh/skiff/cni"
	"github.com/skiff-sh/skiff/controlplane/allocator"
	"github.com/skiff-sh/skiff/controlplane/apiserver"
	"github.com/skiff-sh/skiff/controlplane/controllermanager"
	"github.com/skiff-sh/skiff/controlplane/pki"
	"github.com/skiff-sh/skiff/controlplane/scheduler"
	"github.com/skiff-sh/skiff/images"
	"github.com/skiff-sh/skiff/internal/layout"
	"github.com/skiff-sh/skiff/internal/supervisor"
	"github.com/skiff-sh/skiff/internal/version"
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
		serverCommand("server", "Run the control plane: embedded etcd (or --etcd-servers) and the API server"),
		serverCommand("apiserver", "Run the API server alone (with embedded etcd unless --etcd-servers is set)"),
		certsCommand(),
		controllerManagerCommand(),
		schedulerCommand(),
		imagesCommand(),
		agentCommand(),
		bgpCommand(),
		bpfCommand(),
		labCommand(),
		kubeconfigCommand(),
	)
	return root
}

// serverFlags are the flags of `skiff server` and `skiff apiserver`.
type serverFlags struct {
	dataDir, bindAddress, advertiseAddress     string
	tlsSANs                                    []string
	token                                      string
	securePort                                 int
	serviceCIDR, nodePortRange                 string
	etcdServers                                []string
	etcdCA, etcdCert, etcdKey                  string
	etcdClientPort, etcdPeerPort, etcdMetrics  int
	compaction                                 time.Duration
	disableAgent                               bool
	logLevel                                   string
	cm                                         controllermanager.Options
	disableScheduler, disableControllerManager bool
	agent                                      agentFlags
	sched                                      scheduler.Options
}

func serverCommand(use, short string) *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := newLogger(f.logLevel)
			o := apiserver.Options{
				DataDir: f.dataDir, SecurePort: f.securePort,
				ServiceCIDR: f.serviceCIDR, NodePortRange: f.nodePortRange,
				EtcdServers: f.etcdServers, EtcdCAFile: f.etcdCA, EtcdCertFile: f.etcdCert, EtcdKeyFile: f.etcdKey,
				EtcdClientPort: f.etcdClientPort, EtcdPeerPort: f.etcdPeerPort, EtcdMetricsPort: f.etcdMetrics,
				CompactionInterval: f.compaction,
			}
			var err error
			if o.BindAddress, err = parseIP("--bind-address", f.bindAddress); err != nil {
				return err
			}
			if f.advertiseAddress != "" {
				if o.AdvertiseAddress, err = parseIP("--advertise-address", f.advertiseAddress); err != nil {
					return err
				}
			}
			o.Token = f.token
			for _, san := range f.tlsSANs {
				if ip := net.ParseIP(san); ip != nil {
					o.ExtraSANIPs = append(o.ExtraSANIPs, ip)
				} else {
					o.ExtraSANNames = append(o.ExtraSANNames, san)
				}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// One supervisor: the API server and, in `skiff server`, the node agent are
			// required — one failing stops the process with its error, for systemd to
			// restart. The scheduler and the controllers restart on their own when they fail
			// or lose their lease (etcd without quorum for a while): they campaign again, and
			// the API server, which waits for etcd by itself, stays up.
			sup := supervisor.New(ctx, log)
			if use == "server" {
				runControlPlane(sup, f, log) // each part waits for the API server to be ready
				if !f.disableAgent {
					o.NodeName = f.agent.nodeName
					if ip := net.ParseIP(f.agent.nodeIP); ip != nil {
						o.NodeIPs = []net.IP{ip}
					} else if ip := net.ParseIP(firstAddress()); ip != nil {
						o.NodeIPs = []net.IP{ip}
					}
				}
			}
			sup.Go(supervisor.Part{Name: "apiserver", Policy: supervisor.Fatal, Run: func(ctx context.Context) error {
				return apiserver.Run(ctx, o, log)
			}})
			return sup.Wait()
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.dataDir, "data-dir", layout.ServerDir, "directory for etcd data, the PKI and admin.kubeconfig")
	fs.StringVar(&f.bindAddress, "bind-address", "0.0.0.0", "address the API server listens on")
	fs.StringVar(&f.advertiseAddress, "advertise-address", "", "address other components reach the API server at (default: first non-loopback address)")
	fs.StringSliceVar(&f.tlsSANs, "tls-san", nil, "extra IP addresses or DNS names for the API server certificate")
	fs.StringVar(&f.token, "token", "", "node-join bootstrap token <id>.<secret> ([a-z0-9]{6}.[a-z0-9]{16}) instead of a random one; written with the CA pin to <data-dir>/token")
	fs.IntVar(&f.securePort, "secure-port", 6443, "HTTPS port of the API server")
	fs.StringVar(&f.serviceCIDR, "service-cidr", "10.96.0.0/12", "range ClusterIPs are allocated from")
	fs.StringVar(&f.nodePortRange, "service-node-port-range", "30000-32767", "range NodePorts are allocated from")
	fs.StringSliceVar(&f.etcdServers, "etcd-servers", nil, "external etcd client URLs; embedded etcd is used when empty")
	fs.StringVar(&f.etcdCA, "etcd-cafile", "", "CA of the external etcd (default: <data-dir>/pki/etcd/ca.crt)")
	fs.StringVar(&f.etcdCert, "etcd-certfile", "", "client certificate for etcd (default: <data-dir>/pki/apiserver-etcd-client.crt)")
	fs.StringVar(&f.etcdKey, "etcd-keyfile", "", "client key for etcd (default: <data-dir>/pki/apiserver-etcd-client.key)")
	fs.IntVar(&f.etcdClientPort, "etcd-client-port", 2379, "client port of the embedded etcd (127.0.0.1)")
	fs.IntVar(&f.etcdPeerPort, "etcd-peer-port", 2380, "peer port of the embedded etcd (127.0.0.1)")
	fs.IntVar(&f.etcdMetrics, "etcd-metrics-port", 2381, "plain-HTTP metrics port of the embedded etcd (127.0.0.1)")
	fs.DurationVar(&f.compaction, "etcd-compaction-interval", 5*time.Minute, "how often the API server compacts etcd")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	if use == "server" {
		fs.BoolVar(&f.disableAgent, "disable-agent", false, "do not run a node agent beside the control plane")
		addControllerManagerFlags(fs, &f.cm)
		addSchedulerFlags(fs, &f.sched)
		addAgentFlags(fs, &f.agent, "agent-")
		fs.BoolVar(&f.disableScheduler, "disable-scheduler", false, "do not run the scheduler (run `skiff scheduler` elsewhere)")
		fs.BoolVar(&f.disableControllerManager, "disable-controller-manager", false, "do not run the controllers (run `skiff controller-manager` elsewhere)")
	}
	return cmd
}

// runControlPlane starts the controller manager and the scheduler of `skiff server`, each
// with its own kubeconfig and each behind its own leader election (restarted when they fail
// or lose it), and the server's own node agent, a required part of the server's supervisor.
func runControlPlane(sup *supervisor.Supervisor, f serverFlags, log *slog.Logger) {
	cm := f.cm
	dirs := layout.Server{Dir: f.dataDir}
	cm.RootCAFile = dirs.PKI().CA().Cert
	cm.ClusterSigningCertFile, cm.ClusterSigningKeyFile = cm.RootCAFile, dirs.PKI().CA().Key
	if !f.disableControllerManager {
		sup.Go(supervisor.Part{Name: "controller-manager", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
			if err := apiserver.WaitReady(ctx, dirs.Kubeconfig("controller-manager")); err != nil {
				return err
			}
			return runControllerManager(ctx, f, cm, log)
		}})
	}
	if !f.disableScheduler {
		sup.Go(supervisor.Part{Name: "scheduler", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
			if err := apiserver.WaitReady(ctx, dirs.Kubeconfig("scheduler")); err != nil {
				return err
			}
			return runScheduler(ctx, f, log)
		}})
	}
	if !f.disableAgent {
		sup.Go(supervisor.Part{Name: "agent", Policy: supervisor.Fatal, Run: func(ctx context.Context) error {
			if err := apiserver.WaitReady(ctx, dirs.Kubeconfig("node")); err != nil {
				return err
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", dirs.Kubeconfig("node"))
			if err != nil {
				return err
			}
			// The server's own node runs only what tolerates the control plane, as kubeadm's,
			// and carries its role label (kubectl get nodes: ROLES control-plane).
			taints := []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
			af := f.agent
			af.servingCert, af.servingKey, af.clientCA = dirs.PKI().AgentServing().Cert, dirs.PKI().AgentServing().Key, dirs.PKI().CA().Cert
			opts := af.options(taints)
			opts.Labels = map[string]string{"node-role.kubernetes.io/control-plane": ""}
			if opts.BGP, err = af.bgpOptions(); err != nil {
				return err
			}
			return agent.Run(ctx, cfg, opts, log.With("component", "agent"))
		}})
	}
}

// agentFlags are the node agent's flags, shared by `skiff agent` and `skiff server`.
type agentFlags struct {
	dataDir, nodeName, nodeIP, netns, cniPlugin, podLogDir string
	manifests, healthz                                     string
	imageDirs                                              []string
	port                                                   int
	servingCert, servingKey, clientCA                      string
	clusterDNS                                             []string
	clusterDomain, resolvConf, runtimeEndpoint             string
	cgroupRoot                                             string
	bgp, serviceProxy                                      bool
	bgpASN                                                 uint32
	bgpPeers                                               []string
	bgpNodeMesh, bgpAPI                                    string
}

func exeDir() string {
	exe, err := os.Executable()
	if err != nil {
		return "."
	}
	return filepath.Dir(exe)
}

func addAgentFlags(fs *pflag.FlagSet, f *agentFlags, prefix string) {
	host, _ := os.Hostname()
	fs.StringVar(&f.dataDir, prefix+"data-dir", layout.AgentDir, "directory for the agent's containerd, CNI and IPAM state")
	fs.StringVar(&f.nodeName, "node-name", host, "name of this node")
	fs.StringVar(&f.nodeIP, "node-ip", "", "address of this node (default: first non-loopback address)")
	fs.StringVar(&f.netns, prefix+"netns", "", "network namespace (/run/netns/NAME) for the node's containerd and pods, as in the lab")
	fs.StringVar(&f.cniPlugin, "cni-plugin", filepath.Join(exeDir(), "skiff-cni"), "skiff-cni binary to install (when it does not exist, this binary serves as the plugin)")
	fs.StringSliceVar(&f.imageDirs, prefix+"images-dir", nil, "directories of image archives to import at start (default: <data-dir>/images and images/ beside the binary)")
	fs.StringVar(&f.podLogDir, "pod-log-dir", "/var/log/pods", "where container logs are written")
	fs.IntVar(&f.port, prefix+"port", 10250, "HTTPS port of the agent API (container logs)")
	fs.StringVar(&f.manifests, "pod-manifest-path", "/etc/skiff/manifests", "directory of static pod manifests")
	fs.StringVar(&f.healthz, prefix+"healthz-address", "127.0.0.1:10248", "plain-HTTP /healthz of the agent (empty to disable)")
	fs.StringVar(&f.cgroupRoot, "cgroup-root", "/skiff", "parent cgroup of every pod")
	fs.BoolVar(&f.serviceProxy, "service-proxy", true, "load-balance Services for this node's pods with eBPF (pinned under /sys/fs/bpf/skiff/<node>)")
	fs.BoolVar(&f.bgp, "bgp", true, "run the node's BGP speaker: advertise its pod CIDR, install the other nodes' (see ConfigMap kube-system/skiff-bgp)")
	fs.Uint32Var(&f.bgpASN, "bgp-asn", 0, "this node's AS, overriding the ConfigMap and the bgp.skiff.sh/asn annotation (default 64512)")
	fs.StringSliceVar(&f.bgpPeers, "bgp-peer", nil, "BGP peer ADDRESS:ASN (repeatable), replacing the configured peers, e.g. a top-of-rack router")
	fs.StringVar(&f.bgpNodeMesh, "bgp-node-mesh", "", "true or false: peer with every other node (default true, or as configured)")
	fs.StringVar(&f.bgpAPI, "bgp-api-address", "127.0.0.1:50051", "GoBGP gRPC API of the speaker, for skiff bgp peers|routes (empty: none)")
	fs.StringVar(&f.runtimeEndpoint, "container-runtime-endpoint", "", "CRI socket of a containerd to use instead of supervising one (unix:///run/containerd/containerd.sock)")
	fs.StringSliceVar(&f.clusterDNS, "cluster-dns", nil, "DNS server IPs of the cluster, for pods with dnsPolicy ClusterFirst (none: they use the node's resolv.conf)")
	fs.StringVar(&f.clusterDomain, "cluster-domain", "cluster.local", "cluster DNS domain, the base of pods' search paths")
	fs.StringVar(&f.resolvConf, "resolv-conf", "/etc/resolv.conf", "the node's resolver configuration, for pods with dnsPolicy Default")
	if prefix == "" {
		fs.StringVar(&f.servingCert, "tls-cert-file", "", "agent API serving certificate (default <data-dir>/pki/agent.crt, obtained when joining with --token)")
		fs.StringVar(&f.servingKey, "tls-private-key-file", "", "agent API serving key (default <data-dir>/pki/agent.key)")
		fs.StringVar(&f.clientCA, "client-ca-file", "", "CA of the clients the agent API accepts (default <data-dir>/pki/ca.crt)")
	}
}

// bgpOptions turns the --bgp-* flags into the speaker's options; nil when --bgp=false.
func (f agentFlags) bgpOptions() (*bgp.Options, error) {
	if !f.bgp {
		return nil, nil
	}
	var o config.Overrides
	if f.bgpASN != 0 {
		o.ASN = &f.bgpASN
	}
	switch f.bgpNodeMesh {
	case "":
	case "true", "false":
		mesh := f.bgpNodeMesh == "true"
		o.NodeMesh = &mesh
	default:
		return nil, fmt.Errorf("--bgp-node-mesh %q: want true or false", f.bgpNodeMesh)
	}
	if f.bgpPeers != nil {
		o.Peers = []config.Peer{}
		for _, p := range f.bgpPeers {
			host, asn, ok := strings.Cut(p, ":")
			addr, err := netip.ParseAddr(host)
			n, aerr := strconv.ParseUint(asn, 10, 32)
			if !ok || err != nil || aerr != nil || n == 0 {
				return nil, fmt.Errorf("--bgp-peer %q: want IPV4ADDRESS:ASN, e.g. 198.18.0.254:64512", p)
			}
			o.Peers = append(o.Peers, config.Peer{Address: addr, ASN: uint32(n)})
		}
	}
	return &bgp.Options{Overrides: o, APIAddress: f.bgpAPI}, nil
}

func (f agentFlags) options(taints []corev1.Taint) agent.Options {
	dirs := f.imageDirs
	if len(dirs) == 0 {
		dirs = []string{layout.Agent{Dir: f.dataDir}.Images(), filepath.Join(exeDir(), "images")}
	}
	ip := f.nodeIP
	if ip == "" {
		ip = firstAddress()
	}
	return agent.Options{DataDir: f.dataDir, NodeName: f.nodeName, InternalIP: ip, Taints: taints, Netns: f.netns,
		CNIPlugin: f.cniPlugin, ImageDirs: dirs, PodLogDir: f.podLogDir, PodManifestPath: f.manifests, HealthzAddress: f.healthz,
		APIAddress: fmt.Sprintf(":%d", f.port), APIPort: f.port, ServingCert: f.servingCert, ServingKey: f.servingKey, ClientCA: f.clientCA,
		ClusterDNS: f.clusterDNS, ClusterDomain: f.clusterDomain, ResolvConf: f.resolvConf, RuntimeEndpoint: f.runtimeEndpoint,
		CgroupRoot: f.cgroupRoot, ServiceProxy: f.serviceProxy}
}

func firstAddress() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return "127.0.0.1"
}

func runControllerManager(ctx context.Context, f serverFlags, cm controllermanager.Options, log *slog.Logger) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", layout.Server{Dir: f.dataDir}.Kubeconfig("controller-manager"))
	if err != nil {
		return err
	}
	return controllermanager.Run(ctx, cfg, cm, log.With("component", "controller-manager"))
}

func runScheduler(ctx context.Context, f serverFlags, log *slog.Logger) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", layout.Server{Dir: f.dataDir}.Kubeconfig("scheduler"))
	if err != nil {
		return err
	}
	return scheduler.Run(ctx, cfg, f.sched, log.With("component", "scheduler"))
}

func addControllerManagerFlags(fs *pflag.FlagSet, o *controllermanager.Options) {
	fs.StringVar(&o.ClusterCIDR, "cluster-cidr", "10.244.0.0/16", "range node pod CIDRs are carved from")
	fs.IntVar(&o.NodeCIDRMaskSize, "node-cidr-mask-size", 24, "size of each node's pod CIDR")
	fs.DurationVar(&o.ClusterSigningDuration, "cluster-signing-duration", 365*24*time.Hour, "longest validity of certificates signed for CSRs")
	fs.DurationVar(&o.NodeMonitorGracePeriod, "node-monitor-grace-period", 40*time.Second, "how long a node Lease may go unrenewed before the node is Unknown")
	fs.StringVar(&o.SecureAddress, "controller-manager-address", "127.0.0.1:10257", "HTTPS address of the controller manager's health and metrics")
	fs.BoolVar(&o.UseServiceAccountCredentials, "use-service-account-credentials", true, "run each controller with its own service account")
}

func addSchedulerFlags(fs *pflag.FlagSet, o *scheduler.Options) {
	fs.StringVar(&o.SecureAddress, "scheduler-address", "127.0.0.1:10259", "HTTPS address of the scheduler's health and metrics")
}

func parseIP(flag, s string) (net.IP, error) {
	ip := net.ParseIP(s)
	if ip == nil {
		return nil, fmt.Errorf("%s: %q is not an IP address", flag, s)
	}
	return ip, nil
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
				ip, err := parseIP("--advertise-address", advertise)
				if err != nil {
					return err
				}
				ips = append(ips, ip)
			}
			// The kubernetes Service's address, as the server derives it: the first of the range.
			r, err := allocator.NewIPRange(serviceCIDR)
			if err != nil {
				return fmt.Errorf("--service-cidr: %w", err)
			}
			l, err := pki.Ensure(pki.Options{Dir: layout.Server{Dir: dataDir}.PKI().Dir, APIServerIPs: ips, ServiceIP: net.ParseIP(r.First())})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "PKI ready in", l.Dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", layout.ServerDir, "directory to create pki/ in")
	cmd.Flags().StringVar(&advertise, "advertise-address", "", "extra IP SAN for the API server certificate")
	cmd.Flags().StringVar(&serviceCIDR, "service-cidr", "10.96.0.0/12", "the server's --service-cidr: its first address (the kubernetes Service) is a SAN")
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
			socket := filepath.Join(agentDir, "containerd", "containerd.sock")
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
	cmd.Flags().StringVar(&server, "server", "https://127.0.0.1:6443", "API server URL")
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
	var f agentFlags
	var kubeconfig, server, token, tokenFile, logLevel string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent: containerd, CNI, node registration and pods",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := newLogger(logLevel)
			paths := join.Paths(f.dataDir)
			if tokenFile != "" && token == "" {
				b, err := os.ReadFile(tokenFile)
				if err != nil {
					return err
				}
				token = strings.TrimSpace(string(b))
			}
			if token != "" {
				if server == "" || kubeconfig != "" {
					return errors.New("--token needs --server and excludes --kubeconfig")
				}
				ip := f.nodeIP
				if ip == "" {
					ip = firstAddress()
				}
				var err error
				paths, err = join.Ensure(ctx, join.Options{Server: strings.TrimSuffix(server, "/"), Token: token, Dir: f.dataDir,
					NodeName: f.nodeName, IPs: []net.IP{net.ParseIP(ip)}, DNSNames: []string{f.nodeName}}, log)
				if err != nil {
					return fmt.Errorf("joining %s: %w", server, err)
				}
			}
			if kubeconfig == "" {
				kubeconfig = paths.Kubeconfig
			}
			if f.servingCert == "" {
				f.servingCert, f.servingKey = paths.ServingCert, paths.ServingKey
			}
			if f.clientCA == "" {
				f.clientCA = paths.CAFile
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return err
			}
			opts := f.options(nil)
			if opts.BGP, err = f.bgpOptions(); err != nil {
				return err
			}
			return agent.Run(ctx, cfg, opts, log)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&server, "server", "", "API server URL to join (https://IP:6443), with --token")
	fs.StringVar(&token, "token", "", "join token, from the server's <data-dir>/token")
	fs.StringVar(&tokenFile, "token-file", "", "file holding the join token")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig to reach the API server instead of joining (default <data-dir>/node.kubeconfig)")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	addAgentFlags(fs, &f, "")
	return cmd
}

func controllerManagerCommand() *cobra.Command {
	var o controllermanager.Options
	var caFile string
	cmd := clientCommand("controller-manager", "Run the controllers alone (leader-elected on kube-system/kube-controller-manager)",
		layout.DefaultServer.Kubeconfig("controller-manager"), func(ctx context.Context, cfg *rest.Config, log *slog.Logger) error {
			o.RootCAFile = caFile
			return controllermanager.Run(ctx, cfg, o, log)
		})
	cmd.Flags().StringVar(&caFile, "root-ca-file", layout.DefaultServer.PKI().CA().Cert, "cluster CA published as kube-root-ca.crt")
	cmd.Flags().StringVar(&o.ClusterSigningCertFile, "cluster-signing-cert-file", layout.DefaultServer.PKI().CA().Cert, "CA certificate that signs approved node CSRs (empty: no signing)")
	cmd.Flags().StringVar(&o.ClusterSigningKeyFile, "cluster-signing-key-file", layout.DefaultServer.PKI().CA().Key, "CA key that signs approved node CSRs")
	addControllerManagerFlags(cmd.Flags(), &o)
	return cmd
}

func schedulerCommand() *cobra.Command {
	var o scheduler.Options
	cmd := clientCommand("scheduler", "Run the scheduler alone (leader-elected on kube-system/kube-scheduler)",
		layout.DefaultServer.Kubeconfig("scheduler"), func(ctx context.Context, cfg *rest.Config, log *slog.Logger) error {
			return scheduler.Run(ctx, cfg, o, log)
		})
	addSchedulerFlags(cmd.Flags(), &o)
	return cmd
}
