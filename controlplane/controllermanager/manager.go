// Package controllermanager runs skiff's controllers in one process, as
// kube-controller-manager: only while holding the kube-system/kube-controller-manager Lease,
// each controller in its own loop with its own service-account identity, sharing informers,
// with health and metrics on https://127.0.0.1:10257.
package controllermanager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	sharedinformers "github.com/skiff-sh/skiff/internal/informers"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/record"

	"github.com/skiff-sh/skiff/controlplane/controllers/clusterdns"
	"github.com/skiff-sh/skiff/controlplane/controllers/clusterroleaggregation"
	"github.com/skiff-sh/skiff/controlplane/controllers/cronjob"
	"github.com/skiff-sh/skiff/controlplane/controllers/csrapproving"
	"github.com/skiff-sh/skiff/controlplane/controllers/csrsigning"
	"github.com/skiff-sh/skiff/controlplane/controllers/daemonset"
	"github.com/skiff-sh/skiff/controlplane/controllers/deployment"
	"github.com/skiff-sh/skiff/controlplane/controllers/disruption"
	"github.com/skiff-sh/skiff/controlplane/controllers/endpointslice"
	"github.com/skiff-sh/skiff/controlplane/controllers/endpointslicemirroring"
	"github.com/skiff-sh/skiff/controlplane/controllers/garbagecollector"
	"github.com/skiff-sh/skiff/controlplane/controllers/job"
	"github.com/skiff-sh/skiff/controlplane/controllers/lbipam"
	"github.com/skiff-sh/skiff/controlplane/controllers/namespace"
	"github.com/skiff-sh/skiff/controlplane/controllers/nodeipam"
	"github.com/skiff-sh/skiff/controlplane/controllers/nodelifecycle"
	"github.com/skiff-sh/skiff/controlplane/controllers/pcrcleaner"
	"github.com/skiff-sh/skiff/controlplane/controllers/persistentvolume"
	"github.com/skiff-sh/skiff/controlplane/controllers/podautoscaler"
	"github.com/skiff-sh/skiff/controlplane/controllers/podgc"
	"github.com/skiff-sh/skiff/controlplane/controllers/replicaset"
	"github.com/skiff-sh/skiff/controlplane/controllers/replicationcontroller"
	"github.com/skiff-sh/skiff/controlplane/controllers/resourcequota"
	"github.com/skiff-sh/skiff/controlplane/controllers/rootcacert"
	"github.com/skiff-sh/skiff/controlplane/controllers/serviceaccount"
	"github.com/skiff-sh/skiff/controlplane/controllers/statefulset"
	"github.com/skiff-sh/skiff/controlplane/controllers/storageprotection"
	"github.com/skiff-sh/skiff/controlplane/controllers/storageversionmigrator"
	"github.com/skiff-sh/skiff/controlplane/controllers/ttlafterfinished"
	"github.com/skiff-sh/skiff/controlplane/healthserver"
	"github.com/skiff-sh/skiff/controlplane/leader"
)

// Options configure the controller manager.
type Options struct {
	// ClusterCIDR drives node IPAM (10.244.0.0/16): one CIDR, or an IPv4 and an IPv6 one
	// comma-separated for a dual-stack cluster. Each node's block is NodeCIDRMaskSize bits
	// long in a single-stack cluster when set, else NodeCIDRMaskSizeIPv4 (24) or
	// NodeCIDRMaskSizeIPv6 (64) by family, as upstream's flags.
	ClusterCIDR          string
	NodeCIDRMaskSize     int
	NodeCIDRMaskSizeIPv4 int
	NodeCIDRMaskSizeIPv6 int
	// NodeMonitorGracePeriod is how long a node Lease may go unrenewed (40 s).
	NodeMonitorGracePeriod time.Duration
	// RootCAFile is published as kube-root-ca.crt in every namespace.
	RootCAFile string
	// ClusterSigningCertFile and ClusterSigningKeyFile are the CA that signs approved node
	// CSRs (the cluster CA, which the API server trusts for client certificates); without
	// them csrsigning does not run.
	ClusterSigningCertFile, ClusterSigningKeyFile string
	// ClusterSigningDuration is the longest validity of a signed certificate (1 year).
	ClusterSigningDuration time.Duration
	// SecureAddress serves health and metrics (127.0.0.1:10257).
	SecureAddress string
	// UseServiceAccountCredentials gives each controller its own service account.
	UseServiceAccountCredentials bool
	// ClusterDNS is the address of the cluster DNS Service, kube-system/kube-dns
	// (10.96.0.10); empty leaves the Service to the operator.
	ClusterDNS string
	// LoadBalancerCIDRs are pools LoadBalancer Services take addresses from, beside the
	// loadBalancerPools of kube-system/skiff-bgp.
	LoadBalancerCIDRs []string
	// Informers, if set, is the server's factory shared with the scheduler: one cache of
	// each pod and node between them. Nil: a factory of the manager's own.
	Informers *sharedinformers.Shared
}

// accounts are the service accounts of controllers that upstream runs under another's
// name, so upstream's bootstrap roles (system:controller:<account>) fit them: the CSR
// approver and signer are its certificate-controller, node IPAM is part of its
// node-controller.
var accounts = map[string]string{
	csrapproving.Name: "certificate-controller",
	csrsigning.Name:   "certificate-controller",
	nodeipam.Name:     "node-controller",
}

// Run serves health and campaigns for leadership; while leading, runs every controller.
func Run(ctx context.Context, cfg *rest.Config, o Options, log *slog.Logger) error {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 100, 200
	// The endpoints controller maintains v1 Endpoints on purpose; its deprecation warning
	// would fill the log.
	cfg.WarningHandler = rest.NoWarnings{}
	root, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(o.RootCAFile)
	if err != nil {
		return fmt.Errorf("root CA: %w", err)
	}
	var leading sync.WaitGroup
	go func() {
		if err := healthserver.Serve(ctx, o.SecureAddress, nil, log); err != nil {
			log.Error("controller-manager health server", "err", err)
		}
	}()
	return leader.Run(ctx, root, leader.Options{Namespace: "kube-system", Name: "kube-controller-manager"}, log, func(ctx context.Context) {
		leading.Add(1)
		defer leading.Done()
		if err := runControllers(ctx, cfg, root, o, caPEM, log); err != nil {
			log.Error("controllers", "err", err)
		}
	})
}

func runControllers(ctx context.Context, cfg *rest.Config, root kubernetes.Interface, o Options, caPEM []byte, log *slog.Logger) error {
	var factory informers.SharedInformerFactory = sharedinformers.NewFactory(root)
	if o.Informers != nil {
		scope := o.Informers.Scope()
		defer scope.Release() // this term's handlers go; the caches stay for the next
		factory = scope
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: root.CoreV1().Events("")})
	defer broadcaster.Shutdown()

	// clientFor gives a controller its own identity, or the manager's when that is off.
	clientFor := func(name string) (kubernetes.Interface, *rest.Config, error) {
		if !o.UseServiceAccountCredentials {
			return root, cfg, nil
		}
		c, err := serviceAccountConfig(ctx, root, cfg, name)
		if err != nil {
			return nil, nil, err
		}
		cs, err := kubernetes.NewForConfig(c)
		return cs, c, err
	}
	recorder := func(name string) record.EventRecorder {
		return broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: name})
	}
	core, apps, certs := factory.Core().V1(), factory.Apps().V1(), factory.Certificates().V1()
	type runner interface{ Run(ctx context.Context) }
	var controllers []runner
	add := func(name string, build func(c kubernetes.Interface, cfg *rest.Config) (runner, error)) error {
		account := name
		if a, ok := accounts[name]; ok {
			account = a
		}
		c, ccfg, err := clientFor(account)
		if err != nil {
			return err
		}
		r, err := build(c, ccfg)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		controllers = append(controllers, r)
		return nil
	}
	steps := []struct {
		name  string
		build func(c kubernetes.Interface, cfg *rest.Config) (runner, error)
	}{
		{serviceaccount.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return serviceaccount.New(c, core.Namespaces(), core.ServiceAccounts(), log), nil
		}},
		{rootcacert.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return rootcacert.New(c, core.Namespaces(), core.ConfigMaps(), caPEM, log), nil
		}},
		{namespace.Name, func(c kubernetes.Interface, ccfg *rest.Config) (runner, error) {
			md, err := metadata.NewForConfig(ccfg)
			if err != nil {
				return nil, err
			}
			return namespace.New(c, md, core.Namespaces(), log), nil
		}},
		{nodeipam.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			pools, err := NodeIPAMPools(o.ClusterCIDR, o.NodeCIDRMaskSize, o.NodeCIDRMaskSizeIPv4, o.NodeCIDRMaskSizeIPv6)
			if err != nil {
				return nil, err
			}
			return nodeipam.New(c, core.Nodes(), pools, log)
		}},
		{nodelifecycle.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return nodelifecycle.New(c, core.Nodes(), factory.Coordination().V1().Leases(), core.Pods(), recorder(nodelifecycle.Name),
				nodelifecycle.Options{GracePeriod: o.NodeMonitorGracePeriod}, log), nil
		}},
		{replicaset.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return replicaset.New(c, apps.ReplicaSets(), core.Pods(), recorder(replicaset.Name), log), nil
		}},
		{deployment.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return deployment.New(c, apps.Deployments(), apps.ReplicaSets(), core.Pods(), recorder(deployment.Name), log), nil
		}},
		{daemonset.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return daemonset.New(c, apps.DaemonSets(), core.Nodes(), core.Pods(), apps.ControllerRevisions(), recorder(daemonset.Name), log), nil
		}},
		{statefulset.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return statefulset.New(c, apps.StatefulSets(), core.Pods(), apps.ControllerRevisions(), core.PersistentVolumeClaims(), recorder(statefulset.Name), log), nil
		}},
		{persistentvolume.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return persistentvolume.New(c, core.PersistentVolumeClaims(), core.PersistentVolumes(), factory.Storage().V1().StorageClasses(), core.Nodes(),
				recorder(persistentvolume.Name), log), nil
		}},
		{storageprotection.PVCName, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return storageprotection.NewPVC(c, core.PersistentVolumeClaims(), core.Pods(), log), nil
		}},
		{storageprotection.PVName, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return storageprotection.NewPV(c, core.PersistentVolumes(), log), nil
		}},
		{podautoscaler.Name, func(c kubernetes.Interface, ccfg *rest.Config) (runner, error) {
			scales, mapping, err := podautoscaler.NewForConfig(ccfg, c)
			if err != nil {
				return nil, err
			}
			return podautoscaler.New(c, factory.Autoscaling().V2().HorizontalPodAutoscalers(), core.Pods(), scales, podautoscaler.ResourceMetrics(c), mapping,
				recorder(podautoscaler.Name), log), nil
		}},
		{resourcequota.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return resourcequota.New(c, core.ResourceQuotas(), factory, log)
		}},
		{pcrcleaner.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return pcrcleaner.New(c, log), nil
		}},
		{podgc.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return podgc.New(c, core.Pods(), core.Nodes(), log), nil
		}},
		{replicationcontroller.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return replicationcontroller.New(c, core.ReplicationControllers(), core.Pods(), recorder(replicationcontroller.Name), log), nil
		}},
		{job.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return job.New(c, factory.Batch().V1().Jobs(), core.Pods(), recorder(job.Name), log), nil
		}},
		{disruption.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return disruption.New(c, factory.Policy().V1().PodDisruptionBudgets(), core.Pods(), apps.ReplicaSets(), core.ReplicationControllers(), apps.Deployments(),
				recorder(disruption.Name), log), nil
		}},
		{cronjob.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return cronjob.New(c, factory.Batch().V1().CronJobs(), factory.Batch().V1().Jobs(), recorder(cronjob.Name), log), nil
		}},
		{storageversionmigrator.Name, func(c kubernetes.Interface, ccfg *rest.Config) (runner, error) {
			dyn, err := dynamic.NewForConfig(ccfg)
			if err != nil {
				return nil, err
			}
			mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Discovery()))
			return storageversionmigrator.New(c, dyn, mapper, factory.Storagemigration().V1().StorageVersionMigrations(), log), nil
		}},
		{ttlafterfinished.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return ttlafterfinished.New(c, factory.Batch().V1().Jobs(), log), nil
		}},
		{garbagecollector.Name, func(c kubernetes.Interface, ccfg *rest.Config) (runner, error) {
			md, err := metadata.NewForConfig(ccfg)
			if err != nil {
				return nil, err
			}
			return garbagecollector.New(md, c.Discovery(), startedInformers(factory), log), nil
		}},
		{csrapproving.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return csrapproving.New(c, certs.CertificateSigningRequests(), log), nil
		}},
		{endpointslice.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return endpointslice.New(c, core.Services(), core.Pods(), factory.Discovery().V1().EndpointSlices(), core.Endpoints(), log), nil
		}},
		{clusterroleaggregation.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return clusterroleaggregation.New(c, factory.Rbac().V1().ClusterRoles(), log), nil
		}},
		{endpointslicemirroring.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return endpointslicemirroring.New(c, core.Services(), core.Endpoints(), factory.Discovery().V1().EndpointSlices(), log), nil
		}},
	}
	type step = struct {
		name  string
		build func(c kubernetes.Interface, cfg *rest.Config) (runner, error)
	}
	steps = append(steps, step{lbipam.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
		return lbipam.New(c, core.Services(), core.ConfigMaps(), o.LoadBalancerCIDRs, recorder(lbipam.Name), log)
	}})
	if o.ClusterDNS != "" {
		steps = append(steps, step{clusterdns.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return clusterdns.New(c, core.Nodes(), core.Services(), factory.Discovery().V1().EndpointSlices(), o.ClusterDNS, log)
		}})
	}
	if o.ClusterSigningCertFile != "" && o.ClusterSigningKeyFile != "" {
		certPEM, err := os.ReadFile(o.ClusterSigningCertFile)
		if err != nil {
			return fmt.Errorf("cluster signing certificate: %w", err)
		}
		keyPEM, err := os.ReadFile(o.ClusterSigningKeyFile)
		if err != nil {
			return fmt.Errorf("cluster signing key: %w", err)
		}
		steps = append(steps, step{csrsigning.Name, func(c kubernetes.Interface, _ *rest.Config) (runner, error) {
			return csrsigning.New(c, certs.CertificateSigningRequests(), certPEM, keyPEM, csrsigning.Options{Duration: o.ClusterSigningDuration}, log)
		}})
	} else {
		log.Warn("no --cluster-signing-cert-file/--cluster-signing-key-file: approved CSRs are not signed")
	}
	for _, s := range steps {
		if err := add(s.name, s.build); err != nil {
			return err
		}
	}
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	for _, c := range controllers {
		wg.Add(1)
		go func() { defer wg.Done(); c.Run(ctx) }()
	}
	log.Info("controllers started", "count", len(controllers))
	wg.Wait()
	factory.Shutdown()
	return nil
}

// NodeIPAMPools turns --cluster-cidr and the mask size flags into node IPAM's pools, with
// upstream's rules: --node-cidr-mask-size only for a single-stack cluster, the per-family
// sizes otherwise.
func NodeIPAMPools(clusterCIDR string, maskSize, maskSizeIPv4, maskSizeIPv6 int) ([]nodeipam.Pool, error) {
	var pools []nodeipam.Pool
	for _, cidr := range strings.Split(clusterCIDR, ",") {
		cidr = strings.TrimSpace(cidr)
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			return nil, fmt.Errorf("--cluster-cidr %q: %w", clusterCIDR, err)
		}
		size := maskSizeIPv4
		if p.Addr().Is6() {
			size = maskSizeIPv6
		}
		pools = append(pools, nodeipam.Pool{CIDR: cidr, MaskSize: size})
	}
	if maskSize > 0 {
		if len(pools) > 1 {
			return nil, errors.New("usage of --node-cidr-mask-size is not allowed with dual-stack clusters")
		}
		pools[0].MaskSize = maskSize
	}
	return pools, nil
}
