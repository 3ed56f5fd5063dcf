package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"

	restful "github.com/emicklei/go-restful/v3"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	apiextensionsopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509auth "k8s.io/apiserver/pkg/authentication/request/x509"
	tokenunion "k8s.io/apiserver/pkg/authentication/token/union"
	discoveryendpoint "k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/apiserver/pkg/server/options"
	encryptionconfigcontroller "k8s.io/apiserver/pkg/server/options/encryptionconfig/controller"
	"k8s.io/apiserver/pkg/server/routes"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	aggregatorapiserver "k8s.io/kube-aggregator/pkg/apiserver"
	builder2 "k8s.io/kube-openapi/pkg/builder"
	openapicommon "k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"
	openapihandler "k8s.io/kube-openapi/pkg/handler"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/skiff-sh/skiff/controlplane/allocator"
	"github.com/skiff-sh/skiff/controlplane/apiserver/admission"
	"github.com/skiff-sh/skiff/controlplane/apiserver/openapiv2"
	"github.com/skiff-sh/skiff/controlplane/apiserver/openapiv3"
	"github.com/skiff-sh/skiff/controlplane/apiserver/restfultrim"
	"github.com/skiff-sh/skiff/controlplane/etcd"
	"github.com/skiff-sh/skiff/controlplane/metrics"
	"github.com/skiff-sh/skiff/controlplane/openapi"
	"github.com/skiff-sh/skiff/controlplane/pki"
	"github.com/skiff-sh/skiff/controlplane/registry"
	"github.com/skiff-sh/skiff/controlplane/scheme"
	"github.com/skiff-sh/skiff/controlplane/serverjoin"
	"github.com/skiff-sh/skiff/controlplane/serviceaccount"
	"github.com/skiff-sh/skiff/controlplane/storage"
	"github.com/skiff-sh/skiff/internal/bootstraptoken"
	"github.com/skiff-sh/skiff/internal/certfile"
	sharedinformers "github.com/skiff-sh/skiff/internal/informers"
	"github.com/skiff-sh/skiff/internal/layout"
)

// Options configure the API server.
type Options struct {
	// DataDir holds pki/, etcd/ and admin.kubeconfig.
	DataDir string
	// BindAddress and SecurePort are where HTTPS is served (0.0.0.0:6443).
	BindAddress net.IP
	SecurePort  int
	// AdvertiseAddress is the address other components reach the API server at; it backs
	// the `kubernetes` Service's endpoints (system: the first non-loopback address by default).
	AdvertiseAddress net.IP
	// ServiceCIDR is where ClusterIPs come from (10.96.0.0/12): one CIDR, or one per family
	// comma-separated for a dual-stack cluster, the primary family first.
	ServiceCIDR string
	// NodePortRange is where NodePorts come from (30000-32767).
	NodePortRange string
	// EtcdServers, if set, point at an external etcd cluster instead of the embedded one.
	EtcdServers []string
	// EtcdCAFile, EtcdCertFile and EtcdKeyFile authenticate to an external etcd; they
	// default to the PKI's etcd CA and apiserver-etcd-client pair.
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
	// EtcdClientPort, EtcdPeerPort and EtcdMetricsPort are the embedded member's ports.
	EtcdClientPort, EtcdPeerPort, EtcdMetricsPort int
	// EtcdCluster is the embedded member's place in a cluster of servers (HA with embedded
	// etcd); its zero value is a server alone, its peers on loopback.
	EtcdCluster EtcdCluster
	// CompactionInterval is how often the API server compacts etcd (5m as upstream).
	CompactionInterval time.Duration
	// ServiceAccountIssuer is the iss claim of service-account tokens.
	ServiceAccountIssuer string
	// JoinToken is the node-join bootstrap token (written by system/bootstrap), kept as its
	// kube-system Secret.
	JoinToken bootstraptoken.Token
	// AgentToken is the agent-only join token (zero without --agent-token): its Secret admits
	// nodes; the server-join endpoint never takes it.
	AgentToken bootstraptoken.Token
	// NodeName, if set, is the agent that `skiff server` runs beside the control plane: its
	// Node gets the control-plane role.
	NodeName string
	// Audit, if set, is upstream's audit logging (--audit-policy-file, --audit-log-path, ...).
	Audit *options.AuditOptions
	// EncryptionProviderConfig, if set, is upstream's --encryption-provider-config: how
	// resources are encrypted at rest. It is reloaded when it changes (secrets-encrypt
	// rotate-keys rewrites it).
	EncryptionProviderConfig string
	// MetricResolution is how often node agents are scraped for metrics.k8s.io
	// (metrics-server's --metric-resolution; 15s when zero).
	MetricResolution time.Duration
}

// EtcdCluster is how the embedded member takes part in a cluster of servers.
type EtcdCluster struct {
	// Clustered (--cluster-init, or joined with --server) listens for peers on PeerHost
	// (the advertised address), answers joining servers and runs the member controller.
	Clustered bool
	PeerHost  string
	// Name is the member's name, the server's node name.
	Name string
	// InitialCluster and Join start a member that a running server has just added
	// (serverjoin); ForceNewCluster is --cluster-reset.
	InitialCluster  string
	Join            bool
	ForceNewCluster bool
}

// PeerURL is the member's peer URL for its peer port.
func (c EtcdCluster) PeerURL(port int) string {
	host := "127.0.0.1"
	if c.Clustered && c.PeerHost != "" {
		host = c.PeerHost
	}
	return "https://" + net.JoinHostPort(host, strconv.Itoa(port))
}

// EtcdTransport is how the API server reaches etcd: the given servers and files, or the
// embedded member on loopback with the server's own etcd client pair. Parts of the same
// process that pass it to storage.Client share the API server's connection.
func (o Options) EtcdTransport() storagebackend.TransportConfig {
	certs := layout.Server{Dir: o.DataDir}.PKI()
	t := storagebackend.TransportConfig{ServerList: o.EtcdServers,
		TrustedCAFile: o.EtcdCAFile, CertFile: o.EtcdCertFile, KeyFile: o.EtcdKeyFile}
	if len(t.ServerList) == 0 {
		t.ServerList = []string{fmt.Sprintf("https://127.0.0.1:%d", o.EtcdClientPort)}
	}
	if t.TrustedCAFile == "" {
		t.TrustedCAFile = certs.EtcdCA().Cert
	}
	if t.CertFile == "" {
		t.CertFile, t.KeyFile = certs.APIServerEtcdClient().Cert, certs.APIServerEtcdClient().Key
	}
	return t
}

// Run starts etcd (if embedded) and the API server, and serves until ctx ends.
func Run(ctx context.Context, o Options, log *slog.Logger) error {
	dirs := layout.Server{Dir: o.DataDir}
	ipRanges, err := allocator.ParseServiceCIDRs(o.ServiceCIDR)
	if err != nil {
		return err
	}
	portRange, err := allocator.ParsePortRange(o.NodePortRange)
	if err != nil {
		return err
	}
	serviceIP := net.ParseIP(ipRanges[0].First()) // the kubernetes Service's, in the primary family
	// The files were written by the bootstrap step (system/bootstrap); the API server reads them.
	certs := dirs.PKI()
	server := "https://" + net.JoinHostPort(o.BindAddress.String(), strconv.Itoa(o.SecurePort))

	etcdTLS := o.EtcdTransport()
	// An embedded etcd that fails ends the server with its error: serving on without the
	// store would only answer 500s.
	var etcdErr <-chan error
	embedded := len(o.EtcdServers) == 0
	if embedded {
		e, err := etcd.Start(ctx, etcd.Options{
			DataDir:    dirs.Etcd(),
			LogFile:    dirs.EtcdLog(),
			Name:       o.EtcdCluster.Name,
			ClientURL:  fmt.Sprintf("https://127.0.0.1:%d", o.EtcdClientPort),
			PeerURL:    o.EtcdCluster.PeerURL(o.EtcdPeerPort),
			MetricsURL: fmt.Sprintf("http://127.0.0.1:%d", o.EtcdMetricsPort),
			PKI:        certs,

			InitialCluster: o.EtcdCluster.InitialCluster, Join: o.EtcdCluster.Join,
			ForceNewCluster: o.EtcdCluster.ForceNewCluster,
		}, log)
		if err != nil {
			return err
		}
		defer e.Close()
		etcdErr = e.Err()
	}
	// skiff's own keys go through the client the stores share (controlplane/storage).
	etcdClient, releaseEtcdClient, err := storage.Client(etcdTLS)
	if err != nil {
		return err
	}
	defer releaseEtcdClient()
	joins := serverjoin.Handler{Token: o.JoinToken, Dirs: dirs, ServiceCIDR: o.ServiceCIDR,
		SecretsEncryption: o.EncryptionProviderConfig != "" && o.EncryptionProviderConfig == dirs.EncryptionConfig()}
	if embedded {
		if !o.EtcdCluster.Clustered {
			joins.Refuse = "this server's embedded etcd runs alone: restart it with --cluster-init to let servers join"
		} else {
			joins.Members = etcdClient.Cluster
			// A server that ran alone advertised its peers on loopback: now they are reachable.
			if updated, err := etcd.AdvertisePeerURL(ctx, etcdClient.Cluster, o.EtcdCluster.Name, o.EtcdCluster.PeerURL(o.EtcdPeerPort)); err != nil {
				return err
			} else if updated {
				log.Info("etcd member now advertises its peer URL on the cluster's network", "peer", o.EtcdCluster.PeerURL(o.EtcdPeerPort))
			}
		}
	}

	agg, az, scraper, err := newServer(o, log, certs, etcdTLS, etcdClient, ipRanges, portRange, joins)
	if err != nil {
		return err
	}
	// The server runs until ctx ends or one of its parts fails (the embedded etcd, the member
	// controller), with that part's error.
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// Hooks go on the outermost server, the aggregator: it runs its delegates' hooks as they
	// were when it was built, and only its own after that.
	srv := agg.GenericAPIServer
	srv.AddPostStartHookOrDie("rbac/bootstrap-roles", az.postStartHook(ctx, log))
	clientCA, err := os.ReadFile(certs.CA().Cert)
	if err != nil {
		return err
	}
	frontProxyCA, err := os.ReadFile(certs.FrontProxyCA().Cert)
	if err != nil {
		return err
	}
	// Every API server on this etcd announces itself; the kubernetes Service lists them all
	// (upstream's lease endpoint reconciler). A clean stop withdraws the announcement.
	peers := &peerLeases{client: etcdClient, own: o.AdvertiseAddress.String()}
	srv.AddPreShutdownHookOrDie("skiff-peer-lease", func() error {
		if err := peers.Remove(context.Background()); err != nil {
			log.Warn("withdrawing this API server from the kubernetes Service", "err", err)
		}
		return nil
	})
	srv.AddPostStartHookOrDie("skiff-bootstrap", func(hc genericapiserver.PostStartHookContext) error {
		// The kubernetes Service's Endpoints are kept on purpose: no deprecation warning in the log.
		loopback := restclient.CopyConfig(hc.LoopbackClientConfig)
		loopback.WarningHandler = restclient.NoWarnings{}
		client, err := kubernetes.NewForConfig(loopback)
		if err != nil {
			return err
		}
		b := bootstrap{client: client, advertise: o.AdvertiseAddress, port: o.SecurePort, serviceIP: serviceIP.String(), serviceCIDR: o.ServiceCIDR,
			joinToken: o.JoinToken, agentToken: o.AgentToken, peers: peers, clientCA: clientCA, frontProxyCA: frontProxyCA, log: log}
		// The first reconcile finishes before the hook returns, so /readyz passes only once the
		// built-in namespaces and the kubernetes Service exist.
		if err := wait.PollUntilContextTimeout(hc, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			return b.reconcile(ctx) == nil, nil
		}); err != nil {
			return fmt.Errorf("bootstrap objects: %w", err)
		}
		go b.run(ctx) // hc ends when the hooks have run; the loop lives as long as the server
		if joins.Members != nil {
			members := etcd.MemberController{Members: joins.Members, Self: o.EtcdCluster.Name, Log: log.With("component", "etcd-members")}
			go func() {
				if err := members.Run(ctx, client); err != nil {
					cancel(fmt.Errorf("etcd member controller: %w", err))
				}
			}()
		}
		if o.NodeName != "" {
			go b.markControlPlane(ctx, o.NodeName)
		}
		return nil
	})
	prepared, err := agg.PrepareRun()
	if err != nil {
		return err
	}
	log.Info("API server starting", "address", server, "etcd", etcdTLS.ServerList, "kubeconfig", dirs.Kubeconfig("admin"))
	if etcdErr != nil {
		go func() {
			select {
			case err, ok := <-etcdErr:
				if !ok || err == nil {
					err = errors.New("stopped")
				}
				cancel(fmt.Errorf("embedded etcd: %w", err))
			case <-runCtx.Done():
			}
		}()
	}
	// The metrics scraper only ends with the server; a node it cannot read is logged and
	// missing from metrics.k8s.io.
	go func() { _ = scraper.Run(runCtx) }()
	if err := prepared.Run(runCtx); err != nil {
		return err
	}
	if cause := context.Cause(runCtx); cause != nil && ctx.Err() == nil {
		return cause
	}
	return nil
}

// newServer builds the generic API server and installs skiff's API groups.
func newServer(o Options, log *slog.Logger, layout pki.Layout, etcdTLS storagebackend.TransportConfig, etcdClient *clientv3.Client,
	ipRanges []*allocator.IPRange, portRange allocator.PortRange, joins http.Handler) (*aggregatorapiserver.APIAggregator, *authz, *metrics.Scraper, error) {
	cfg := genericapiserver.NewConfig(scheme.Codecs)
	cfg.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	if errs := o.Audit.Validate(); len(errs) > 0 {
		return nil, nil, nil, fmt.Errorf("audit: %v", errs)
	}
	if err := o.Audit.ApplyTo(cfg); err != nil {
		return nil, nil, nil, fmt.Errorf("audit: %w", err)
	}
	caPEM, err := os.ReadFile(layout.CA().Cert)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg.BuildHandlerChainFunc = func(api http.Handler, c *genericapiserver.Config) http.Handler {
		return withServerJoin(withCACerts(genericapiserver.DefaultBuildHandlerChain(withDiscoveryV2beta1(api), c), caPEM), joins)
	}
	// As kube-apiserver: watches, proxying and the streams to the node agent (attach, exec,
	// logs, port-forward) are long-running — no request timeout, no in-flight slot — where the
	// default names only watch (and a WebSocket log stream came back empty through the timeout
	// filter's writer).
	cfg.LongRunningFunc = genericfilters.BasicLongRunningRequestCheck(sets.NewString("watch", "proxy"),
		sets.NewString("attach", "exec", "proxy", "log", "portforward"))
	cfg.PublicAddress = o.AdvertiseAddress
	cfg.ExternalAddress = net.JoinHostPort(o.AdvertiseAddress.String(), strconv.Itoa(o.SecurePort))

	serving := options.NewSecureServingOptions()
	serving.BindAddress = o.BindAddress
	serving.BindPort = o.SecurePort
	serving.ServerCert.CertKey = options.CertKey{CertFile: layout.APIServer().Cert, KeyFile: layout.APIServer().Key}
	serving.MinTLSVersion = "VersionTLS12"
	if err := serving.WithLoopback().ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		return nil, nil, nil, fmt.Errorf("serving: %w", err)
	}
	// The loopback client talks to this process: no gzip, which costs CPU and a
	// decompressor for each of its informers' watches.
	cfg.LoopbackClientConfig.DisableCompression = true

	// Storage: etcd with upstream's key layout, protobuf values and a watch cache.
	backend := storagebackend.NewDefaultConfig("/registry", nil)
	backend.Transport = etcdTLS
	if o.CompactionInterval > 0 {
		backend.CompactionInterval = o.CompactionInterval
	}
	etcdOpts := options.NewEtcdOptions(backend)
	etcdOpts.DefaultStorageMediaType = "application/vnd.kubernetes.protobuf"
	if o.EncryptionProviderConfig != "" {
		etcdOpts.EncryptionProviderConfigFilepath = o.EncryptionProviderConfig
		etcdOpts.EncryptionProviderConfigAutomaticReload = true
		// Upstream looks for changes every minute; a rotation should not wait that long.
		encryptionconfigcontroller.EncryptionConfigFileChangePollDuration = 2 * time.Second
	}
	factory := storage.NewFactory(*backend, scheme.Scheme, scheme.Codecs)
	if err := etcdOpts.ApplyWithStorageFactoryTo(factory, cfg); err != nil {
		return nil, nil, nil, fmt.Errorf("storage: %w", err)
	}
	cfg.RESTOptionsGetter = storage.ResumableOptions{RESTOptionsGetter: cfg.RESTOptionsGetter}

	// The service-account lookup needs the serviceaccounts store, which exists only once the
	// registry is built; the authenticator reads it through this indirection.
	var accounts, secrets rest.Getter
	lookup := func(ctx context.Context, ns, name string) (string, error) {
		if accounts == nil {
			return "", errors.New("service accounts not served yet")
		}
		obj, err := accounts.Get(genericapirequest.WithNamespace(ctx, ns), name, &metav1.GetOptions{ResourceVersion: "0"})
		if apierrors.IsNotFound(err) {
			obj, err = accounts.Get(genericapirequest.WithNamespace(ctx, ns), name, &metav1.GetOptions{})
		}
		if err != nil {
			return "", err
		}
		return string(obj.(*corev1.ServiceAccount).UID), nil
	}
	issuerName := o.ServiceAccountIssuer
	if issuerName == "" {
		issuerName = serviceaccount.DefaultIssuer
	}
	bootstrapSecret := func(ctx context.Context, name string) (*corev1.Secret, error) {
		if secrets == nil {
			return nil, errors.New("secrets not served yet")
		}
		obj, err := secrets.Get(genericapirequest.WithNamespace(ctx, bootstraptoken.SecretNamespace), name, &metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return obj.(*corev1.Secret), nil
	}
	authn, tokenAuthn, clientCA, err := newAuthenticator(layout, issuerName, lookup, bootstrapSecret)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg.Authentication.Authenticator = authn
	cfg.Authentication.APIAudiences = authenticator.Audiences{issuerName}
	if err := cfg.Authentication.ApplyClientCert(clientCA, cfg.SecureServing); err != nil {
		return nil, nil, nil, err
	}
	az, err := newAuthz(cfg.LoopbackClientConfig)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg.Authorization.Authorizer = az.authorizer

	// The documents cover skiff's types and apiextensions' (CustomResourceDefinitions).
	namer := openapinamer.NewDefinitionNamer(scheme.Scheme, apiextensionsapiserver.Scheme)
	definitions := func(ref openapicommon.ReferenceCallback) map[string]openapicommon.OpenAPIDefinition {
		out := openapi.GetOpenAPIDefinitions(ref)
		maps.Copy(out, apiextensionsopenapi.GetOpenAPIDefinitions(ref))
		return out
	}
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(definitions, namer)
	cfg.OpenAPIConfig.Info.Title = "Kubernetes"
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(definitions, namer)
	cfg.OpenAPIV3Config.Info.Title = "Kubernetes"
	cfg.OpenAPIConfig.GetOperationIDAndTagsFromRoute = operationIDAndTags
	cfg.OpenAPIV3Config.GetOperationIDAndTagsFromRoute = operationIDAndTags

	issuer, err := serviceaccount.NewIssuer(layout.SAKey(), issuerName)
	if err != nil {
		return nil, nil, nil, err
	}
	allocs := registry.Allocators{
		IPRanges:  ipRanges,
		LegacyIPs: allocator.EtcdStore{Client: etcdClient},
		NodePorts: allocator.New(portRange, allocator.EtcdStore{Client: etcdClient}, "/registry/skiff/ranges/servicenodeports/"),
	}
	nodeTLS, err := kubeletClientTLS(layout)
	if err != nil {
		return nil, nil, nil, err
	}
	reviews := &registry.Reviews{Authorizer: az.authorizer, Rules: az.resolver, Tokens: tokenAuthn, Audiences: cfg.Authentication.APIAudiences}
	stores, err := registry.Storage(registry.Options{RESTOptions: cfg.RESTOptionsGetter, Allocators: allocs, Tokens: issuer, NodeTLS: nodeTLS,
		RBAC: az.guard(), Reviews: reviews})
	if err != nil {
		return nil, nil, nil, err
	}
	coreStores := stores[corev1.SchemeGroupVersion]
	// metrics.k8s.io: served from the scraper's store (see Run), where clusters usually add
	// metrics-server.
	nodeConn := &registry.NodeConnection{TLS: nodeTLS, Nodes: coreStores["nodes"].(*registry.REST).Store}
	usage := metrics.NewStore()
	stores[metricsv1beta1.SchemeGroupVersion] = metrics.Storage(usage, coreStores["nodes"].(rest.Lister), coreStores["pods"].(rest.Lister))
	scraper := &metrics.Scraper{Store: usage, Resolution: o.MetricResolution, Log: log, Targets: func(ctx context.Context) ([]metrics.Target, error) {
		obj, err := coreStores["nodes"].(rest.Lister).List(ctx, &metainternalversion.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return nil, err
		}
		var out []metrics.Target
		for _, n := range obj.(*corev1.NodeList).Items {
			u, tr, err := nodeConn.LocationOf(&n)
			if err != nil {
				continue // no address yet
			}
			out = append(out, metrics.Target{Node: n.Name, URL: u, Transport: tr})
		}
		return out, nil
	}}
	accounts = coreStores["serviceaccounts"].(rest.Getter)
	secrets = coreStores["secrets"].(rest.Getter)
	get := func(resource string) func(ctx context.Context, ns, name string) (runtime.Object, error) {
		g := coreStores[resource].(rest.Getter)
		return func(ctx context.Context, ns, name string) (runtime.Object, error) {
			if ns != "" {
				ctx = genericapirequest.WithNamespace(ctx, ns)
			}
			obj, err := g.Get(ctx, name, &metav1.GetOptions{ResourceVersion: "0"})
			if apierrors.IsNotFound(err) {
				// The watch cache may lag an object created a moment ago.
				obj, err = g.Get(ctx, name, &metav1.GetOptions{})
			}
			return obj, err
		}
	}
	getNamespace, getPod, getNode, getAccount := get("namespaces"), get("pods"), get("nodes"), get("serviceaccounts")
	// ResourceQuota admission is k8s.io/apiserver's plugin, with skiff's evaluators; it reads
	// quotas through the API server's own loopback client.
	stopQuota := make(chan struct{})
	loopback, err := kubernetes.NewForConfig(cfg.LoopbackClientConfig)
	if err != nil {
		return nil, nil, nil, err
	}
	quotaInformers := sharedinformers.NewFactory(loopback)
	quotaAdmission, err := newQuotaAdmission(loopback, quotaInformers, stopQuota)
	if err != nil {
		return nil, nil, nil, err
	}
	// API Priority and Fairness, with upstream's bootstrap FlowSchemas and priority levels
	// (see bootstrap.ensureFlowControl), over the same concurrency kube-apiserver has by
	// default (--max-requests-inflight 400 + --max-mutating-requests-inflight 200).
	cfg.FlowControl = utilflowcontrol.New(quotaInformers, loopback.FlowcontrolV1(), 600)
	resolver := endpointResolver{services: coreStores["services"].(rest.Getter),
		slices: stores[discoveryv1.SchemeGroupVersion]["endpointslices"].(rest.Lister)}
	extensions, err := newExtensionAdmission(cfg.LoopbackClientConfig, loopback, quotaInformers, az.authorizer,
		cfg.EffectiveVersion, resolver, stopQuota)
	if err != nil {
		return nil, nil, nil, err
	}
	namespaceOf := func(ctx context.Context, name string) (*corev1.Namespace, error) {
		obj, err := getNamespace(ctx, "", name)
		if err != nil {
			return nil, err
		}
		return obj.(*corev1.Namespace), nil
	}
	podSecurity, err := admission.NewPodSecurity(namespaceOf, podsIn(coreStores["pods"].(rest.Lister)))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pod security admission: %w", err)
	}
	nodeOf := func(ctx context.Context, name string) (*corev1.Node, error) {
		obj, err := getNode(ctx, "", name)
		if err != nil {
			return nil, err
		}
		return obj.(*corev1.Node), nil
	}
	cfg.AdmissionControl = admission.Chain(namespaceOf, &admission.NodeRestriction{
		Pods: func(ctx context.Context, ns, name string) (*corev1.Pod, error) {
			obj, err := getPod(ctx, ns, name)
			if err != nil {
				return nil, err
			}
			return obj.(*corev1.Pod), nil
		},
		Nodes: nodeOf,
		ServiceAccounts: func(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error) {
			obj, err := getAccount(ctx, ns, name)
			if err != nil {
				return nil, err
			}
			return obj.(*corev1.ServiceAccount), nil
		},
		Authorizer: az.authorizer,
	}, admission.ServiceAccount{Accounts: func(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error) {
		obj, err := getAccount(ctx, ns, name)
		if err != nil {
			return nil, err
		}
		return obj.(*corev1.ServiceAccount), nil
	}}, admissionClasses(stores), admission.LimitRanger{List: limitRanges(coreStores["limitranges"].(rest.Lister))},
		// Upstream's order: CEL policies, then webhooks, mutate after the built-in plugins;
		// CEL policies, then webhooks, validate last but quota.
		podSecurity, admission.PodResizeValidator{Nodes: nodeOf}, admission.Signers{Authorizer: az.authorizer}, extensions.mutatingPolicies, extensions.mutatingWebhooks, extensions.policies, extensions.validatingWebhooks, quotaAdmission)

	// CustomResourceDefinitions: apiextensions-apiserver behind the main server, sharing its
	// aggregated discovery.
	discovery := discoveryendpoint.NewResourceManager("apis")
	cfg.AggregatedDiscoveryGroupManager = discovery
	crds, err := newCRDServer(cfg, etcdOpts, quotaInformers, discovery, resolver)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("custom resources: %w", err)
	}
	// The OpenAPI documents are installed below, once every group is (see installOpenAPI).
	cfg.SkipOpenAPIInstallation = true
	srv, err := cfg.Complete(nil).New("skiff-apiserver", crds.GenericAPIServer)
	if err != nil {
		return nil, nil, nil, err
	}
	runCRDOpenAPI(srv, crds)
	installBuiltinCRDs(srv)
	repair := &ipRepair{services: stores[corev1.SchemeGroupVersion]["services"].(rest.Lister),
		addrs:  stores[networkingv1.SchemeGroupVersion]["ipaddresses"].(rest.Lister),
		writer: stores[networkingv1.SchemeGroupVersion]["ipaddresses"].(ipAddressWriter),
		legacy: allocator.EtcdStore{Client: etcdClient}, ranges: rangesOf(ipRanges), log: log.With("component", "clusterip-repair")}
	srv.AddPostStartHookOrDie("skiff-clusterip-repair", func(hc genericapiserver.PostStartHookContext) error {
		go repair.run(hc) // hc lives as long as the server (the quota informers' hook starts them on it too)
		return nil
	})
	srv.AddPostStartHookOrDie("skiff-quota-informers", func(hc genericapiserver.PostStartHookContext) error {
		quotaInformers.Start(hc.Done())
		return nil
	})
	srv.AddPreShutdownHookOrDie("skiff-quota-evaluator", func() error {
		close(stopQuota)
		return nil
	})
	// Watches are long-running: without a short shutdown timeout, SIGTERM would wait the
	// full request timeout (60 s) for every open watch to end on its own.
	srv.ShutdownTimeout = 2 * time.Second
	oidcConfig, jwks, err := serviceaccount.Discovery(issuerName, "https://"+cfg.ExternalAddress+serviceaccount.JWKSPath, layout.SAPub())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("service account issuer discovery: %w", err)
	}
	srv.Handler.NonGoRestfulMux.Handle(serviceaccount.OpenIDConfigurationPath, staticJSON(oidcConfig, "application/json"))
	srv.Handler.NonGoRestfulMux.Handle(serviceaccount.JWKSPath, staticJSON(jwks, "application/jwk-set+json"))
	// scheme.APIs is the table of what is served; a row without stores, or stores without a
	// row, is a registration left half done.
	for gv := range stores {
		if !slices.Contains(scheme.Served, gv) {
			return nil, nil, nil, fmt.Errorf("registry.Storage serves %v, which scheme.APIs does not list", gv)
		}
	}
	for _, versions := range scheme.GroupVersions() {
		group := versions[0].Group
		for _, gv := range versions {
			if len(stores[gv]) == 0 {
				return nil, nil, nil, fmt.Errorf("scheme.APIs lists %v, but registry.Storage has no resource of it", gv)
			}
		}
		info := genericapiserver.NewDefaultAPIGroupInfo(group, scheme.Scheme, scheme.ParameterCodec, scheme.Codecs)
		info.PrioritizedVersions = versions
		for _, gv := range versions {
			info.VersionedResourcesStorageMap[gv.Version] = stores[gv]
		}
		if group == "" {
			err = srv.InstallLegacyAPIGroup(genericapiserver.DefaultLegacyAPIPrefix, &info)
		} else {
			err = srv.InstallAPIGroup(&info)
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("install %v: %w", versions, err)
		}
		// The models server-side apply needs are compiled into the installed handlers; the
		// OpenAPI definitions they came from are not needed again.
		info.StaticOpenAPISpec = nil
	}
	openAPIv2, err := installOpenAPI(srv, cfg, crds.Informers.Apiextensions().V1().CustomResourceDefinitions().Lister(), log)
	if err != nil {
		return nil, nil, nil, err
	}
	// The aggregation layer goes in front of it all, once every group is installed (it
	// registers an APIService for each).
	agg, err := newAggregator(cfg, etcdOpts, quotaInformers, resolver, layout, srv, crds.Informers.Apiextensions().V1().CustomResourceDefinitions(), openAPIv2)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("aggregation layer: %w", err)
	}
	// Every group is installed and every built-in OpenAPI document built. The definitions
	// upstream's DefaultOpenAPIV3Config computed up front for that (~4 MB) are dropped: a later
	// build (none is expected) computes them again from GetDefinitions.
	cfg.OpenAPIV3Config.Definitions = nil
	// Nor are the built-in routes' documentation and the path expressions go-restful compiled
	// for routers the server does not use (~9 MB of live heap).
	trimmed, err := restfultrim.Release(srv.Handler.GoRestfulContainer)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("releasing unused route data: %w", err)
	}
	log.Debug("route data released", "routes", trimmed.Routes, "expressions", trimmed.Expressions)
	return agg, az, scraper, nil
}

// newAuthenticator accepts client certificates of the cluster CA (user = CN, groups = O),
// bootstrap tokens and service-account tokens. A request with no credentials is
// system:anonymous (group system:unauthenticated), as upstream with --anonymous-auth: RBAC
// lets it read /healthz, /livez, /readyz and /version only. Credentials that fail are 401.
// The token authenticator alone is returned too, for TokenReview.
func newAuthenticator(layout pki.Layout, issuer string, lookup serviceaccount.Lookup, bootstrapSecret bootstraptoken.SecretGetter) (authenticator.Request, authenticator.Token, dynamiccertificates.CAContentProvider, error) {
	ca, err := dynamiccertificates.NewDynamicCAContentFromFile("client-ca", layout.CA().Cert)
	if err != nil {
		return nil, nil, nil, err
	}
	tokens, err := serviceaccount.NewAuthenticator(layout.SAPub(), issuer, []string{issuer}, lookup)
	if err != nil {
		return nil, nil, nil, err
	}
	certs := newCachedCertAuthenticator(x509auth.NewDynamic(ca.VerifyOptions, x509auth.CommonNameUserConversion), 10*time.Second)
	// Bootstrap tokens are checked first: their shape ("abcdef.0123456789abcdef") never
	// parses as a JWT, and a JWT never matches theirs, so the order costs nothing.
	bearer := tokenunion.New(bootstraptoken.Authenticator{Get: bootstrapSecret}, tokens)
	authenticated := group.NewAuthenticatedGroupAdder(union.New(certs, bearertoken.New(bearer)))
	return union.NewFailOnError(authenticated, anonymous.NewAuthenticator(nil)), bearer, ca, nil
}

// staticJSON serves a fixed document, cacheable for an hour as upstream's discovery is.
func staticJSON(body []byte, contentType string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", "public, max-age=3600")
		_, _ = w.Write(body)
	})
}

// withCACerts serves the CA bundle at /cacerts without authentication, as k3s does: a joining
// agent reads it over unverified TLS and trusts it only if it matches its token's pinned hash.
func withCACerts(next http.Handler, caPEM []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cacerts" {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/x-pem-file")
		_, _ = w.Write(caPEM)
	})
}

// withServerJoin answers joining servers at serverjoin.Path, before authentication: the join
// token the request carries is its credential (see controlplane/serverjoin).
func withServerJoin(next, joins http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == serverjoin.Path {
			joins.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// kubeletClientTLS is the API server's client side towards node agents: the
// apiserver-kubelet-client pair, verifying agents against the cluster CA. The pair is renewed
// in place while the server runs; each connection presents the current one.
func kubeletClientTLS(l pki.Layout) (*tls.Config, error) {
	pair, err := certfile.NewPair(l.APIServerKubeletClient().Cert, l.APIServerKubeletClient().Key)
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(l.CA().Cert)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &tls.Config{GetClientCertificate: pair.GetClientCertificate, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// operationIDAndTags names a route's operation as upstream's configuration does
// (GetOperationIDAndTags). Set explicitly because kube-openapi's builders, finding it unset,
// set it on the shared configuration as a closure over their own state (the whole document being
// built and every definition), which would keep the first document built alive for as long as
// the server runs (~10 MB).
func operationIDAndTags(r openapicommon.Route) (string, []string, error) {
	route, ok := r.(*restfuladapter.RouteAdapter)
	if !ok {
		return "", nil, fmt.Errorf("route %s %s is not a go-restful route", r.Method(), r.Path())
	}
	return openapinamer.GetOperationIDAndTags(route.Route)
}

// installOpenAPI does what upstream's PrepareRun does for the main server's OpenAPI documents,
// but keeps the parts that never change while the server runs only as compressed JSON: v2's
// built-in document (controlplane/apiserver/openapiv2, which merges CRDs in itself) and v3's
// built-in group-versions (controlplane/apiserver/openapiv3). v2 is built as upstream's InstallV2
// builds it, and returned for the aggregator to serve: where kube-aggregator looks for it, on
// this server, is a placeholder (see openapiv2). Each v3 document is built with upstream's InstallV3 on a throwaway container holding
// its web service alone (as InstallV3 builds each from its own), read back, and dropped before
// the next.
func installOpenAPI(srv *genericapiserver.GenericAPIServer, cfg *genericapiserver.Config,
	crds apiextensionslisters.CustomResourceDefinitionLister, log *slog.Logger) (*openapiv2.Service, error) {
	static, err := builder2.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices(srv.Handler.GoRestfulContainer.RegisteredWebServices()), cfg.OpenAPIConfig)
	if err != nil {
		return nil, fmt.Errorf("OpenAPI v2 document: %w", err)
	}
	static.Definitions = openapihandler.PruneDefaults(static.Definitions)
	v2, err := openapiv2.New(static, crds)
	if err != nil {
		return nil, err
	}
	srv.Handler.NonGoRestfulMux.Handle(openapiv2.Path, openapiv2.Placeholder(static.Info))
	v3 := openapiv3.New()
	for _, ws := range srv.Handler.GoRestfulContainer.RegisteredWebServices() {
		one := restful.NewContainer()
		one.Add(ws)
		build := mux.NewPathRecorderMux("skiff-openapi-v3-build")
		routes.OpenAPI{V3Config: cfg.OpenAPIV3Config}.InstallV3(one, build)
		if err := v3.Add(build); err != nil {
			return nil, fmt.Errorf("OpenAPI v3 document of %s: %w", ws.RootPath(), err)
		}
	}
	v3.Install(srv.Handler.NonGoRestfulMux)
	srv.OpenAPIV3VersionedService = v3.Dynamic
	log.Info("OpenAPI documents built", "v2CompressedBytes", v2.CompressedBytes(),
		"v3GroupVersions", len(v3.GroupVersions()), "v3CompressedBytes", v3.CompressedBytes())
	return v2, nil
}

// rangesOf is the service CIDRs as allocator Ranges.
func rangesOf(ipRanges []*allocator.IPRange) []allocator.Range {
	out := make([]allocator.Range, len(ipRanges))
	for i, r := range ipRanges {
		out[i] = r
	}
	return out
}
