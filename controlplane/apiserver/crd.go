package apiserver

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsoptions "k8s.io/apiextensions-apiserver/pkg/cmd/server/options"
	openapiv3controller "k8s.io/apiextensions-apiserver/pkg/controller/openapiv3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	discoveryendpoint "k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/informers"

	"github.com/skiff-sh/skiff/controlplane/apiserver/builtincrds"
	"github.com/skiff-sh/skiff/controlplane/storage"
)

// newCRDServer builds the CustomResourceDefinition server of k8s.io/apiextensions-apiserver,
// as kube-apiserver does: a copy of the main server's configuration (its authentication,
// authorization, admission and etcd) with apiextensions' own codecs and storage, to which
// the main server delegates every path it does not serve. Both share one aggregated
// discovery document, so the groups CRDs define appear in /apis beside the built-in ones.
func newCRDServer(cfg *genericapiserver.Config, etcdOpts *options.EtcdOptions, loopbackInformers informers.SharedInformerFactory,
	discovery discoveryendpoint.ResourceManager, services webhook.ServiceResolver) (*apiextensionsapiserver.CustomResourceDefinitions, error) {
	crdCfg := *cfg
	crdCfg.PostStartHooks = map[string]genericapiserver.PostStartHookConfigEntry{}
	crdCfg.RESTOptionsGetter = nil
	crdCfg.AggregatedDiscoveryGroupManager = discovery
	// Requests reach this server through the main one, whose filters (API Priority and
	// Fairness among them) have run: it runs none of its own.
	crdCfg.FlowControl = nil
	// The OpenAPI configuration stays: apiextensions builds server-side apply's models from it.
	// The documents users read are the main server's (see runCRDOpenAPI).
	crdEtcd := *etcdOpts
	crdEtcd.StorageConfig.Codec = apiextensionsapiserver.Codecs.LegacyCodec(apiextensionsv1beta1.SchemeGroupVersion, apiextensionsv1.SchemeGroupVersion)
	// Upstream stores CRDs in their more compact v1beta1 form.
	crdEtcd.StorageConfig.EncodeVersioner = runtime.NewMultiGroupVersioner(apiextensionsv1beta1.SchemeGroupVersion,
		schema.GroupKind{Group: apiextensionsv1beta1.GroupName})
	crdEtcd.SkipHealthEndpoints = true
	if err := crdEtcd.ApplyTo(&crdCfg); err != nil {
		return nil, err
	}
	crdCfg.MergedResourceConfig = apiextensionsapiserver.DefaultAPIResourceConfigSource()
	c := &apiextensionsapiserver.Config{
		GenericConfig: &genericapiserver.RecommendedConfig{Config: crdCfg, SharedInformerFactory: loopbackInformers},
		ExtraConfig: apiextensionsapiserver.ExtraConfig{
			// Custom resources are stored as the built-in ones are: on the shared etcd client
			// (upstream's factory would dial etcd once per CRD) with resumable watches.
			CRDRESTOptionsGetter: storage.ResumableOptions{RESTOptionsGetter: apiextensionsoptions.NewCRDRESTOptionsGetter(crdEtcd,
				crdCfg.ResourceTransformers, crdCfg.StorageObjectCountTracker)},
			MasterCount: 1,
			// Conversion webhooks are reached at a ready endpoint of their Service.
			ServiceResolver: services,
		},
	}
	return c.Complete().New(genericapiserver.NewEmptyDelegate())
}

// installBuiltinCRDs creates the CRDs skiff serves out of the box (builtincrds) once the
// server listens; /readyz waits for them, so a client that sees the server ready finds
// ClusterNetworkPolicy served.
func installBuiltinCRDs(srv *genericapiserver.GenericAPIServer) {
	srv.AddPostStartHookOrDie("skiff-builtin-crds", func(hc genericapiserver.PostStartHookContext) error {
		client, err := apiextensionsclient.NewForConfig(hc.LoopbackClientConfig)
		if err != nil {
			return err
		}
		var last error
		if err := wait.PollUntilContextTimeout(hc, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			last = builtincrds.Ensure(ctx, client)
			return last == nil, nil
		}); err != nil {
			return fmt.Errorf("built-in CRDs: %w (last: %v)", err, last)
		}
		return nil
	})
}

// runCRDOpenAPI keeps the main server's OpenAPI v3 documents up to date with every CRD's schema
// (`kubectl explain` on a custom resource), as kube-apiserver's aggregator does for its own. The
// v2 document merges CRDs in itself, on the first request after one changed (see
// installOpenAPI).
func runCRDOpenAPI(srv *genericapiserver.GenericAPIServer, crds *apiextensionsapiserver.CustomResourceDefinitions) {
	srv.AddPostStartHookOrDie("skiff-crd-openapi", func(hc genericapiserver.PostStartHookContext) error {
		informer := crds.Informers.Apiextensions().V1().CustomResourceDefinitions()
		if srv.OpenAPIV3VersionedService != nil {
			go openapiv3controller.NewController(informer).Run(srv.OpenAPIV3VersionedService, hc.Done())
		}
		return nil
	})
}
