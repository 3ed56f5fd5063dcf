package registry

import (
	"crypto/tls"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/controlplane/allocator"
)

// Options are what the registry's stores need.
type Options struct {
	// RESTOptions supplies each resource's storage (etcd + watch cache) and key prefix.
	RESTOptions generic.RESTOptionsGetter
	// Allocators reserve Service ClusterIPs and NodePorts.
	Allocators Allocators
	// Tokens signs TokenRequests; without it serviceaccounts/token is not served.
	Tokens TokenIssuer
	// NodeTLS is the API server's client TLS towards node agents (pods/log).
	NodeTLS *tls.Config
	// Reviews answers SubjectAccessReviews and TokenReviews; nil serves neither.
	Reviews *Reviews
	// RBAC refuses role and binding writes that escalate; nil leaves them unchecked.
	RBAC RBACGuard
}

// Storage returns every served resource's storage, keyed by group version and then by
// resource path ("pods", "pods/status").
func Storage(o Options) (map[schema.GroupVersion]map[string]rest.Storage, error) {
	out := map[schema.GroupVersion]map[string]rest.Storage{}
	add := func(gv schema.GroupVersion, m map[string]rest.Storage, err error) error {
		if err != nil {
			return err
		}
		if out[gv] == nil {
			out[gv] = map[string]rest.Storage{}
		}
		for k, v := range m {
			out[gv][k] = v
		}
		return nil
	}
	core := corev1.SchemeGroupVersion
	opts := o.RESTOptions
	for _, step := range []func() error{
		func() error { m, err := namespaces(opts); return add(core, m, err) },
		func() error { m, err := nodes(opts); return add(core, m, err) },
		func() error {
			nc := &NodeConnection{TLS: o.NodeTLS}
			if o.NodeTLS == nil {
				nc = nil
			}
			m, err := pods(opts, nc)
			if err == nil && nc != nil {
				nc.Nodes = out[core]["nodes"].(*REST).Store
				m["nodes/proxy"] = &NodeProxyREST{nodes: nc}
			}
			return add(core, m, err)
		},
		func() error {
			// IPAddresses first: they are the ClusterIP allocator's reservations.
			ips, err := ipAddresses(opts)
			if err != nil {
				return err
			}
			alloc := o.Allocators
			if alloc.IPs == nil {
				if len(alloc.IPRanges) == 0 {
					return fmt.Errorf("the Service registry needs ClusterIP allocators or ranges")
				}
				store := &ipAddressStore{store: ips["ipaddresses"].(*REST).Store, legacy: alloc.LegacyIPs}
				alloc.IPs = map[corev1.IPFamily]*allocator.Allocator{}
				for i, r := range alloc.IPRanges {
					alloc.IPs[alloc.Cluster()[i]] = allocator.New(r, store, "")
				}
			}
			if err := add(networkingv1.SchemeGroupVersion, ips, nil); err != nil {
				return err
			}
			m, err := services(opts, alloc)
			return add(core, m, err)
		},
		func() error { m, err := endpointsAndEvents(opts); return add(core, m, err) },
		func() error {
			return add(core, map[string]rest.Storage{"services/proxy": &ServiceProxyREST{
				services: out[core]["services"].(*REST).Store, endpoints: out[core]["endpoints"].(*REST).Store}}, nil)
		},
		func() error {
			m, err := configMapsSecretsAccounts(opts, o.Tokens)
			if t, ok := m["serviceaccounts/token"].(*TokenREST); ok && err == nil {
				t.pods, t.nodes = out[core]["pods"].(*REST).Store, out[core]["nodes"].(*REST).Store
			}
			return add(core, m, err)
		},
		func() error { m, err := replicationControllers(opts); return add(core, m, err) },
		func() error { m, err := volumes(opts); return add(core, m, err) },
		func() error { m, err := quotas(opts); return add(core, m, err) },
		func() error { m, err := apps(opts); return add(appsv1.SchemeGroupVersion, m, err) },
		func() error { m, err := storageAPIs(opts); return add(storagev1.SchemeGroupVersion, m, err) },
		func() error { m, err := runtimeClasses(opts); return add(nodev1.SchemeGroupVersion, m, err) },
		func() error { m, err := priorityClasses(opts); return add(schedulingv1.SchemeGroupVersion, m, err) },
		func() error { m, err := ingresses(opts); return add(networkingv1.SchemeGroupVersion, m, err) },
		func() error { m, err := dynamicResources(opts); return add(resourcev1.SchemeGroupVersion, m, err) },
		func() error {
			m, err := autoscalers(opts)
			if err != nil {
				return err
			}
			// autoscaling/v1 serves the same objects, converted (see scheme.HPAToV1).
			if err := add(autoscalingv1.SchemeGroupVersion, m, nil); err != nil {
				return err
			}
			return add(autoscalingv2.SchemeGroupVersion, m, nil)
		},
		func() error { m, err := flowControl(opts); return add(flowcontrolv1.SchemeGroupVersion, m, err) },
		func() error {
			m, err := storageMigrations(opts)
			return add(storagemigrationv1.SchemeGroupVersion, m, err)
		},
		func() error {
			m, err := admissionRegistration(opts)
			return add(admissionregistrationv1.SchemeGroupVersion, m, err)
		},
		func() error { m, err := batch(opts); return add(batchv1.SchemeGroupVersion, m, err) },
		func() error { m, err := endpointSlices(opts); return add(discoveryv1.SchemeGroupVersion, m, err) },
		func() error { m, err := leases(opts); return add(coordinationv1.SchemeGroupVersion, m, err) },
		func() error { m, err := networkPolicies(opts); return add(networkingv1.SchemeGroupVersion, m, err) },
		func() error {
			m, err := podDisruptionBudgets(opts)
			if err != nil {
				return err
			}
			if err := add(policyv1.SchemeGroupVersion, m, nil); err != nil {
				return err
			}
			return add(core, map[string]rest.Storage{"pods/eviction": &EvictionREST{pods: out[core]["pods"].(*REST).Store, podStatus: out[core]["pods/status"].(*StatusREST),
				pdbs: m["poddisruptionbudgets"].(*REST).Store, pdbStatus: m["poddisruptionbudgets/status"].(*StatusREST)}}, nil)
		},
		func() error { m, err := serviceCIDRs(opts); return add(networkingv1.SchemeGroupVersion, m, err) },
		func() error {
			m, err := certificateSigningRequests(opts)
			return add(certificatesv1.SchemeGroupVersion, m, err)
		},
		func() error {
			m, err := clusterTrustBundles(opts)
			return add(certificatesv1.SchemeGroupVersion, m, err)
		},
		func() error {
			m, err := podCertificateRequests(opts)
			return add(certificatesv1.SchemeGroupVersion, m, err)
		},
		func() error {
			return add(eventsv1.SchemeGroupVersion, map[string]rest.Storage{"events": &EventsV1REST{core: out[core]["events"].(*REST)}}, nil)
		},
		func() error {
			return add(authenticationv1.SchemeGroupVersion, map[string]rest.Storage{"selfsubjectreviews": SelfSubjectReviewREST{}}, nil)
		},
		func() error {
			if o.Reviews == nil {
				return nil
			}
			authz, authn := reviewResources(o.Reviews)
			if err := add(authorizationv1.SchemeGroupVersion, authz, nil); err != nil {
				return err
			}
			return add(authenticationv1.SchemeGroupVersion, authn, nil)
		},
		func() error { m, err := rbacResources(opts, o.RBAC); return add(rbacv1.SchemeGroupVersion, m, err) },
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
