package system

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/skiff-sh/skiff/agent"
	"github.com/skiff-sh/skiff/controlplane/allocator"
	"github.com/skiff-sh/skiff/controlplane/apiserver"
	"github.com/skiff-sh/skiff/controlplane/controllermanager"
	"github.com/skiff-sh/skiff/controlplane/etcd"
	"github.com/skiff-sh/skiff/controlplane/scheduler"
	"github.com/skiff-sh/skiff/internal/gctune"
	"github.com/skiff-sh/skiff/internal/hostaddr"
	sharedinformers "github.com/skiff-sh/skiff/internal/informers"
	"github.com/skiff-sh/skiff/internal/layout"
	"github.com/skiff-sh/skiff/internal/sdnotify"
	"github.com/skiff-sh/skiff/internal/supervisor"
	"github.com/skiff-sh/skiff/system/bootstrap"
)

// Server is the configuration of `skiff server` (the API server, and unless disabled the
// scheduler, the controllers and a node agent) and `skiff apiserver` (the API server alone).
type Server struct {
	DataDir, BindAddress, AdvertiseAddress string
	TLSSANs                                []string
	Token                                  string
	// AgentToken (k3s's --agent-token) joins agents only; without it agents join with Token.
	AgentToken                                 string
	SecurePort                                 int
	ServiceCIDR, NodePortRange                 string
	EtcdServers                                []string
	EtcdCA, EtcdCert, EtcdKey                  string
	EtcdClientPort, EtcdPeerPort, EtcdMetrics  int
	Compaction                                 time.Duration
	MetricResolution                           time.Duration
	DisableAgent                               bool
	DisableScheduler, DisableControllerManager bool
	ControllerManager                          controllermanager.Options
	Scheduler                                  scheduler.Options
	Agent                                      Agent
	// Audit is upstream's --audit-* options (policy file, log backend, webhook backend).
	Audit *genericoptions.AuditOptions
	// SecretsEncryption (k3s's flag) encrypts Secrets at rest with a generated key, in
	// <data-dir>/cred/encryption-config.json; EncryptionProviderConfig is upstream's flag
	// for a configuration of the operator's own.
	SecretsEncryption        bool
	EncryptionProviderConfig string
	// IdleGCPercent is the garbage collector's target while the server is idle (see
	// internal/gctune; 0: Go's default always).
	IdleGCPercent int
	// ClusterInit (k3s's flag) starts a cluster that further servers join: the embedded
	// member listens for peers on the advertised address. JoinServer (--server) is a running
	// server of the cluster to join, with Token its join token.
	ClusterInit bool
	JoinServer  string
	// Snapshots of the embedded etcd are taken on SnapshotCron (k3s's
	// --etcd-snapshot-schedule-cron) into SnapshotDir (<data-dir>/db/snapshots when empty),
	// keeping the newest SnapshotRetention; DisableSnapshots turns them off.
	SnapshotCron      string
	SnapshotRetention int
	SnapshotDir       string
	DisableSnapshots  bool
	// CertificateLifetime is how long the leaf certificates and kubeconfigs the server issues
	// last (a year when zero); each is renewed within 90 days of expiry, or in the last quarter
	// of a shorter lifetime, at start and while the server runs.
	CertificateLifetime time.Duration
}

// ControlPlaneTaint keeps ordinary pods off the server's own node, as kubeadm's.
var ControlPlaneTaint = corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}

// Plan is the server's bootstrap step and its API server's options; withNode names the
// server's own node (the agent beside it), whose address goes into its serving certificate.
func (s Server) Plan(withNode bool) (bootstrap.Server, apiserver.Options, error) {
	o := apiserver.Options{
		DataDir: s.DataDir, SecurePort: s.SecurePort,
		ServiceCIDR: s.ServiceCIDR, NodePortRange: s.NodePortRange,
		EtcdServers: s.EtcdServers, EtcdCAFile: s.EtcdCA, EtcdCertFile: s.EtcdCert, EtcdKeyFile: s.EtcdKey,
		EtcdClientPort: s.EtcdClientPort, EtcdPeerPort: s.EtcdPeerPort, EtcdMetricsPort: s.EtcdMetrics,
		CompactionInterval: s.Compaction, Audit: s.Audit, EncryptionProviderConfig: s.EncryptionProviderConfig,
		MetricResolution: s.MetricResolution,
	}
	b := bootstrap.Server{Dirs: layout.Server{Dir: s.DataDir}, Token: s.Token, AgentToken: s.AgentToken, EmbeddedEtcd: len(s.EtcdServers) == 0,
		SecretsEncryption: s.SecretsEncryption && s.EncryptionProviderConfig == "", CertificateLifetime: s.CertificateLifetime}
	if s.JoinServer != "" && s.ClusterInit {
		return b, o, errors.New("--cluster-init starts a new cluster and --server joins one: give one of them")
	}
	if s.JoinServer != "" {
		if u, err := url.Parse(s.JoinServer); err != nil || u.Scheme != "https" || u.Host == "" {
			return b, o, fmt.Errorf("--server %q: want https://<address>:<port> of a running server", s.JoinServer)
		}
	}
	var err error
	if o.BindAddress, err = ParseIP("--bind-address", s.BindAddress); err != nil {
		return b, o, err
	}
	ipRanges, err := allocator.ParseServiceCIDRs(s.ServiceCIDR)
	if err != nil {
		return b, o, fmt.Errorf("--service-cidr: %w", err)
	}
	// The kubernetes Service is of the primary (first) Service range's family, and its one
	// endpoint is the advertised address, so both are of one family, as kube-apiserver
	// requires: by default this machine's first address of that family.
	primaryV6 := ipRanges[0].Prefix().Addr().Is6()
	o.AdvertiseAddress = hostaddr.FirstOf(primaryV6)
	if s.AdvertiseAddress != "" {
		if o.AdvertiseAddress, err = ParseIP("--advertise-address", s.AdvertiseAddress); err != nil {
			return b, o, err
		}
		if (o.AdvertiseAddress.To4() == nil) != primaryV6 {
			return b, o, fmt.Errorf("--advertise-address %s and the first --service-cidr %s are of different IP families: the kubernetes Service takes the first range's family, and its endpoint is the advertised address",
				s.AdvertiseAddress, ipRanges[0].Prefix())
		}
	}
	b.ServiceIP = net.ParseIP(ipRanges[0].First()) // the kubernetes Service's address, in the primary family
	// The embedded member is named after the server's node; with peers, it meets them on the
	// advertised address, which its peer certificate then names.
	o.EtcdCluster = apiserver.EtcdCluster{Clustered: s.clustered(), PeerHost: o.AdvertiseAddress.String(), Name: s.Agent.NodeName}
	if o.EtcdCluster.Clustered {
		b.EtcdPeerIPs = []net.IP{o.AdvertiseAddress}
	}
	b.APIServerIPs = []net.IP{o.AdvertiseAddress}
	for _, san := range s.TLSSANs {
		if ip := net.ParseIP(san); ip != nil {
			b.APIServerIPs = append(b.APIServerIPs, ip)
		} else {
			b.APIServerNames = append(b.APIServerNames, san)
		}
	}
	// The control plane's kubeconfigs reach the API server on loopback, unless it binds one
	// address only.
	host := "127.0.0.1"
	if !o.BindAddress.IsUnspecified() {
		host = o.BindAddress.String()
	}
	b.APIServerURL = "https://" + net.JoinHostPort(host, strconv.Itoa(s.SecurePort))
	if withNode {
		o.NodeName, b.NodeName = s.Agent.NodeName, s.Agent.NodeName
		b.NodeIPs = nodeNetIPs(s.Agent.NodeIP)
	}
	return b, o, nil
}

// clusterDNS is the cluster DNS Service's address: --cluster-dns-address, unless it is left
// at its default (10.96.0.10) and the primary --service-cidr does not hold it (an IPv6-only
// or IPv6-first cluster); then the tenth address of that range, as kubeadm derives it
// (fd00:10:96::a), rather than an address the API server would refuse.
func (s Server) clusterDNS() string {
	dns := s.ControllerManager.ClusterDNS
	if dns != DefaultClusterDNS {
		return dns
	}
	ranges, err := allocator.ParseServiceCIDRs(s.ServiceCIDR)
	if err != nil || ranges[0].Prefix().Contains(netip.MustParseAddr(dns)) {
		return dns
	}
	return ranges[0].Value(9)
}

// ParseIP parses a flag's IP address.
func ParseIP(flag, s string) (net.IP, error) {
	ip := net.ParseIP(s)
	if ip == nil {
		return nil, fmt.Errorf("%s: %q is not an IP address", flag, s)
	}
	return ip, nil
}

// RunServer runs the API server and, with all set (`skiff server`), the rest of the control
// plane, under one supervisor until ctx ends. The API server and the server's agent are
// required — one failing stops the process with its error, for systemd to restart. The
// scheduler and the controllers restart on their own when they fail or lose their lease (etcd
// without quorum for a while): they campaign again, and the API server, which waits for etcd
// by itself, stays up. Each waits for the API server's /readyz before it starts.
func RunServer(ctx context.Context, s Server, all bool, log *slog.Logger) error {
	plan, o, err := s.Plan(all && !s.DisableAgent)
	if err != nil {
		return err
	}
	var agentOpts agent.Options
	if all && !s.DisableAgent {
		if agentOpts, err = s.serverAgent(); err != nil {
			return err
		}
	}
	tuner, err := gctune.New(s.IdleGCPercent, log)
	if err != nil {
		return err
	}
	snap, err := s.snapshotter(log)
	if err != nil {
		return err
	}
	// A server joining a cluster first receives the files every server shares.
	if s.JoinServer != "" {
		if err := s.joinCluster(ctx, &o, log); err != nil {
			return err
		}
		plan.Token = s.Token
	}
	// Every file first: nothing runs until the PKI, kubeconfigs and token are there.
	plan.Issued = func(cert, reason string) { log.Info("certificate issued", "cert", cert, "why", reason) }
	files, err := bootstrap.PrepareServer(plan, time.Now())
	if err != nil {
		return err
	}
	if o.EtcdCluster.Clustered {
		if err := recordPeerURL(plan.Dirs, o.EtcdCluster.PeerURL(o.EtcdPeerPort)); err != nil {
			return err
		}
	}
	o.JoinToken, o.AgentToken = files.Join.Token, files.AgentJoin.Token
	if files.EncryptionConfig != "" {
		o.EncryptionProviderConfig = files.EncryptionConfig
	}
	// client-go's clients look this often whether the client pairs they were given changed
	// (5 minutes by default: too long for a certificate of minutes). Set before any part runs.
	renewEvery := renewalInterval(s.CertificateLifetime)
	transport.CertCallbackRefreshDuration = min(transport.CertCallbackRefreshDuration, renewEvery)
	sup := supervisor.New(ctx, log)
	if tuner != nil {
		sup.Go(supervisor.Part{Name: "gc-tuner", Policy: supervisor.Restart, Run: tuner.Run})
	}
	sup.Go(supervisor.Part{Name: "apiserver", Policy: supervisor.Fatal, Run: func(ctx context.Context) error {
		return apiserver.Run(ctx, o, log)
	}})
	if snap != nil {
		sup.Go(supervisor.Part{Name: "etcd-snapshots", Policy: supervisor.Restart, Run: snap.Run})
	}
	sup.Go(certRenewal(plan, renewEvery, log))
	if len(s.EtcdServers) == 0 {
		sup.Go(s.sharedFilesKeeper(o, files.Join.Token, log))
	}
	if all {
		s.controlPlane(sup, agentOpts, log)
	}
	// systemd (Type=notify) learns the server is up once its API server is ready.
	go notifyReady(sup.Context(), func(ctx context.Context) error {
		return apiserver.WaitReady(ctx, plan.Dirs.Kubeconfig("admin"))
	}, log)
	return sup.Wait()
}

// notifyReady tells systemd the service is ready once ready returns (internal/sdnotify; a
// no-op outside a unit of Type=notify).
func notifyReady(ctx context.Context, ready func(context.Context) error, log *slog.Logger) {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return
	}
	if err := ready(ctx); err != nil {
		return
	}
	if _, err := sdnotify.Ready(); err != nil {
		log.Warn("telling systemd the service is ready", "err", err)
	}
}

// snapshotter is the schedule of the embedded etcd's snapshots (nil: none).
func (s Server) snapshotter(log *slog.Logger) (*etcd.Snapshotter, error) {
	if len(s.EtcdServers) > 0 || s.DisableSnapshots {
		return nil, nil
	}
	schedule, err := etcd.ParseSchedule(s.SnapshotCron)
	if err != nil {
		return nil, fmt.Errorf("--etcd-snapshot-schedule-cron: %w", err)
	}
	if s.SnapshotRetention < 1 {
		return nil, fmt.Errorf("--etcd-snapshot-retention %d: keep at least one (or --etcd-disable-snapshots)", s.SnapshotRetention)
	}
	dirs := layout.Server{Dir: s.DataDir}
	dir := s.SnapshotDir
	if dir == "" {
		dir = dirs.Snapshots()
	}
	clientURL := fmt.Sprintf("https://127.0.0.1:%d", s.EtcdClientPort)
	return &etcd.Snapshotter{Schedule: schedule, Dir: dir, Node: s.Agent.NodeName, Retention: s.SnapshotRetention,
		Log: log.With("component", "etcd-snapshots"),
		Save: func(ctx context.Context, path string) error {
			_, err := etcd.Save(ctx, clientURL, dirs.PKI(), path)
			return err
		}}, nil
}

// serverAgent is the server's own node agent: it runs only what tolerates the control plane
// and serves with the server's agent certificate.
func (s Server) serverAgent() (agent.Options, error) {
	pki := layout.Server{Dir: s.DataDir}.PKI()
	a := s.Agent
	a.ServingCert, a.ServingKey, a.ClientCA = pki.AgentServing().Cert, pki.AgentServing().Key, pki.CA().Cert
	// Its role label is set by the API server once the node registers (NodeRestriction
	// refuses a node labelling itself with a node-role).
	return a.Options([]corev1.Taint{ControlPlaneTaint})
}

// controlPlane adds the controller manager, the scheduler and the server's agent, each with
// its own kubeconfig.
func (s Server) controlPlane(sup *supervisor.Supervisor, agentOpts agent.Options, log *slog.Logger) {
	dirs := layout.Server{Dir: s.DataDir}
	cm := s.ControllerManager
	cm.ClusterDNS = s.clusterDNS()
	cm.RootCAFile = dirs.PKI().CA().Cert
	cm.ClusterSigningCertFile, cm.ClusterSigningKeyFile = cm.RootCAFile, dirs.PKI().CA().Key
	shared := sharedControlPlaneInformers(sup.Context(), dirs.Kubeconfig("controller-manager"))
	if !s.DisableControllerManager {
		sup.Go(supervisor.Part{Name: "controller-manager", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
			return whenReady(ctx, dirs.Kubeconfig("controller-manager"), func(cfg *rest.Config) error {
				o := cm
				var err error
				if o.Informers, err = shared(); err != nil {
					return err
				}
				return controllermanager.Run(ctx, cfg, o, log.With("component", "controller-manager"))
			})
		}})
	}
	if !s.DisableScheduler {
		sup.Go(supervisor.Part{Name: "scheduler", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
			return whenReady(ctx, dirs.Kubeconfig("scheduler"), func(cfg *rest.Config) error {
				o := s.Scheduler
				var err error
				if o.Informers, err = shared(); err != nil {
					return err
				}
				return scheduler.Run(ctx, cfg, o, log.With("component", "scheduler"))
			})
		}})
	}
	if !s.DisableAgent {
		sup.Go(supervisor.Part{Name: "agent", Policy: supervisor.Fatal, Run: func(ctx context.Context) error {
			return whenReady(ctx, dirs.Kubeconfig("node"), func(cfg *rest.Config) error {
				return agent.Run(ctx, cfg, agentOpts, log.With("component", "agent"))
			})
		}})
	}
}

// sharedControlPlaneInformers is the one informer factory of the scheduler and the
// controller manager, made on first use (once the API server is ready) with the controller
// manager's identity, which may list and watch everything; it lives as long as ctx (the
// server). Upstream's scheduler and controller manager are two processes with a cache of
// every pod each; here they are one process, and each pod is decoded and held once for both.
func sharedControlPlaneInformers(ctx context.Context, kubeconfig string) func() (*sharedinformers.Shared, error) {
	var once sync.Once
	var shared *sharedinformers.Shared
	var err error
	return func() (*sharedinformers.Shared, error) {
		once.Do(func() {
			var cfg *rest.Config
			if cfg, err = clientConfig(kubeconfig); err != nil {
				return
			}
			cfg.QPS, cfg.Burst = 100, 200 // lists at start, then watches
			cfg.UserAgent = "skiff-control-plane-informers"
			var client kubernetes.Interface
			if client, err = kubernetes.NewForConfig(cfg); err != nil {
				return
			}
			shared = sharedinformers.Own(ctx, sharedinformers.NewFactory(client))
		})
		if err != nil {
			return nil, fmt.Errorf("the control plane's shared informers: %w", err)
		}
		return shared, nil
	}
}

// whenReady waits for the API server a kubeconfig names, then runs f with its client config
// (clientConfig).
func whenReady(ctx context.Context, kubeconfig string, f func(*rest.Config) error) error {
	if err := apiserver.WaitReady(ctx, kubeconfig); err != nil {
		return err
	}
	cfg, err := clientConfig(kubeconfig)
	if err != nil {
		return err
	}
	return f(cfg)
}
