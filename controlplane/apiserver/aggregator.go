package apiserver

import (
	"fmt"
	"net/http"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	apiregistrationv1beta1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1beta1"
	aggregatorapiserver "k8s.io/kube-aggregator/pkg/apiserver"
	aggregatorscheme "k8s.io/kube-aggregator/pkg/apiserver/scheme"
	apiregistrationclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset/typed/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/controllers/autoregister"
	aggregatoropenapi "k8s.io/kube-aggregator/pkg/generated/openapi"

	"github.com/skiff-sh/skiff/controlplane/apiserver/openapiv2"
	"github.com/skiff-sh/skiff/controlplane/pki"
	"github.com/skiff-sh/skiff/controlplane/scheme"
)

// apiServicePriority orders a group version in discovery: groups by GroupPriorityMinimum
// (highest first), a group's versions by VersionPriority.
type apiServicePriority struct{ group, version int32 }

// builtinPriorities are the APIServices of the groups skiff serves itself, with upstream's
// priorities (scheme.APIs), and of apiextensions.k8s.io, which the CRD server behind the main
// one serves.
var builtinPriorities = func() map[schema.GroupVersion]apiServicePriority {
	out := map[schema.GroupVersion]apiServicePriority{
		{Group: "apiextensions.k8s.io", Version: "v1"}: {16700, 15},
	}
	for _, a := range scheme.APIs {
		out[a.GroupVersion] = apiServicePriority{a.GroupPriorityMinimum, a.VersionPriority}
	}
	return out
}()

// crdPriority is what upstream gives a CustomResourceDefinition's group versions.
var crdPriority = apiServicePriority{1000, 100}

func localAPIService(gv schema.GroupVersion, p apiServicePriority) *apiregistrationv1.APIService {
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: gv.Version + "." + gv.Group},
		Spec: apiregistrationv1.APIServiceSpec{Group: gv.Group, Version: gv.Version,
			GroupPriorityMinimum: p.group, VersionPriority: p.version},
	}
}

// newAggregator puts k8s.io/kube-aggregator in front of the main server (which delegates to
// the CustomResourceDefinition server), as kube-apiserver does: it serves
// apiregistration.k8s.io/v1 APIServices, proxies an APIService's group to the extension API
// server behind its Service (presenting the front-proxy client certificate), keeps their
// Available conditions, and lists every group in /apis. Each group skiff serves itself, and
// each CRD's, is registered as a local APIService, and /readyz waits until they are all
// available. /openapi/v2 and /openapi/v3 merge the delegates' documents with the extension
// servers'.
func newAggregator(cfg *genericapiserver.Config, etcdOpts *options.EtcdOptions, loopbackInformers informers.SharedInformerFactory,
	services webhook.ServiceResolver, layout pki.Layout, delegate *genericapiserver.GenericAPIServer,
	crds apiextensionsinformers.CustomResourceDefinitionInformer, openAPIv2 *openapiv2.Service) (*aggregatorapiserver.APIAggregator, error) {
	aggCfg := *cfg
	aggCfg.PostStartHooks = map[string]genericapiserver.PostStartHookConfigEntry{}
	aggCfg.RESTOptionsGetter = nil
	// The aggregator serves /openapi/v2 and /openapi/v3 merged from its delegates' and the
	// extension servers' documents (installed by its PrepareRun). Its own definitions are its
	// types only: a server holds its definitions' models for server-side apply, and a second
	// copy of every built-in type's would cost tens of MiB for nothing.
	aggCfg.SkipOpenAPIInstallation = true
	namer := openapinamer.NewDefinitionNamer(aggregatorscheme.Scheme)
	aggCfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(aggregatoropenapi.GetOpenAPIDefinitions, namer)
	aggCfg.OpenAPIConfig.Info.Title = "Kubernetes"
	aggCfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(aggregatoropenapi.GetOpenAPIDefinitions, namer)
	aggCfg.OpenAPIV3Config.Info.Title = "Kubernetes"
	aggCfg.OpenAPIConfig.GetOperationIDAndTagsFromRoute = operationIDAndTags
	aggCfg.OpenAPIV3Config.GetOperationIDAndTagsFromRoute = operationIDAndTags
	// /openapi/v2 is served by openAPIv2, which merges what kube-aggregator would serve there
	// into the built-in document: in front of the director, behind every filter.
	chain := aggCfg.BuildHandlerChainFunc
	aggCfg.BuildHandlerChainFunc = func(director http.Handler, c *genericapiserver.Config) http.Handler {
		return chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == openapiv2.Path {
				openAPIv2.ServeHTTP(w, r)
				return
			}
			director.ServeHTTP(w, r)
		}), c)
	}
	aggEtcd := *etcdOpts
	aggEtcd.StorageConfig.Codec = aggregatorscheme.Codecs.LegacyCodec(apiregistrationv1.SchemeGroupVersion, apiregistrationv1beta1.SchemeGroupVersion)
	aggEtcd.StorageConfig.EncodeVersioner = runtime.NewMultiGroupVersioner(apiregistrationv1.SchemeGroupVersion,
		schema.GroupKind{Group: apiregistrationv1beta1.GroupName})
	aggEtcd.SkipHealthEndpoints = true
	if err := aggEtcd.ApplyTo(&aggCfg); err != nil {
		return nil, err
	}
	aggCfg.MergedResourceConfig = aggregatorapiserver.DefaultAPIResourceConfigSource()
	c := &aggregatorapiserver.Config{
		GenericConfig: &genericapiserver.RecommendedConfig{Config: aggCfg, SharedInformerFactory: loopbackInformers},
		ExtraConfig: aggregatorapiserver.ExtraConfig{
			ProxyClientCertFile: layout.FrontProxyClient().Cert,
			ProxyClientKeyFile:  layout.FrontProxyClient().Key,
			ServiceResolver:     services,
		},
	}
	agg, err := c.Complete().NewWithDelegate(delegate)
	if err != nil {
		return nil, err
	}
	agg.GenericAPIServer.ShutdownTimeout = delegate.ShutdownTimeout
	openAPIv2.MergeFrom(agg.GenericAPIServer.Handler.NonGoRestfulMux)

	client, err := apiregistrationclient.NewForConfig(aggCfg.LoopbackClientConfig)
	if err != nil {
		return nil, err
	}
	apiServices := agg.APIRegistrationInformers.Apiregistration().V1().APIServices()
	auto := autoregister.NewAutoRegisterController(apiServices, client)
	var local []string
	for _, path := range delegate.ListedPaths() {
		gv, ok := groupVersionOfPath(path)
		if !ok {
			continue
		}
		p, ok := builtinPriorities[gv]
		if !ok {
			continue // apiextensions' own group is in the table; other paths are not groups
		}
		svc := localAPIService(gv, p)
		auto.AddAPIServiceToSyncOnStart(svc)
		local = append(local, svc.Name)
	}
	if discovery := aggCfg.AggregatedDiscoveryGroupManager; discovery != nil {
		for gv, p := range builtinPriorities {
			discovery.SetGroupVersionPriority(metav1.GroupVersion(gv), int(p.group), int(p.version))
		}
	}
	crdAPIServices := newCRDRegistration(crds, auto)
	agg.GenericAPIServer.AddPostStartHookOrDie("skiff-apiservice-autoregistration", func(hc genericapiserver.PostStartHookContext) error {
		go crdAPIServices.run(hc.Done())
		go auto.Run(5, hc.Done())
		return nil
	})
	if err := agg.GenericAPIServer.AddBootSequenceHealthChecks(localAPIServicesAvailable(local, apiServices.Lister().Get)); err != nil {
		return nil, err
	}
	return agg, nil
}

// groupVersionOfPath reads the group version a listed path serves: /api/v1 or /apis/G/V.
func groupVersionOfPath(path string) (schema.GroupVersion, bool) {
	if path == "/api/v1" {
		return schema.GroupVersion{Version: "v1"}, true
	}
	parts := strings.Split(strings.TrimPrefix(path, "/apis/"), "/")
	if !strings.HasPrefix(path, "/apis/") || len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return schema.GroupVersion{}, false
	}
	return schema.GroupVersion{Group: parts[0], Version: parts[1]}, true
}

// localAPIServicesAvailable is /readyz's autoregister-completion check, as kube-apiserver's:
// ready once every local APIService exists and is Available, so a client that saw /readyz
// pass finds every built-in group in discovery.
func localAPIServicesAvailable(names []string, get func(string) (*apiregistrationv1.APIService, error)) healthz.HealthChecker {
	return healthz.NamedCheck("autoregister-completion", func(*http.Request) error {
		var missing []string
		for _, n := range names {
			s, err := get(n)
			if err != nil || !apiregistrationv1helper.IsAPIServiceConditionTrue(s, apiregistrationv1.Available) {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("missing APIService: %v", missing)
		}
		return nil
	})
}

// crdRegistration keeps a local APIService for every group version a CRD serves (upstream's
// crdregistration controller): it appears in /apis beside the built-in groups, and goes when
// the last CRD serving it does.
type crdRegistration struct {
	informer cache.SharedIndexInformer
	auto     autoregister.AutoAPIServiceRegistration

	mu      sync.Mutex
	serving map[schema.GroupVersion]map[string]bool // group version → CRD names serving it
}

func newCRDRegistration(crds apiextensionsinformers.CustomResourceDefinitionInformer, auto autoregister.AutoAPIServiceRegistration) *crdRegistration {
	r := &crdRegistration{informer: crds.Informer(), auto: auto, serving: map[schema.GroupVersion]map[string]bool{}}
	_, _ = r.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.update(obj, false) },
		UpdateFunc: func(_, obj any) { r.update(obj, false) },
		DeleteFunc: func(obj any) { r.update(obj, true) },
	})
	return r
}

// run waits for the informer (started by the CRD server) until stop.
func (r *crdRegistration) run(stop <-chan struct{}) {
	cache.WaitForCacheSync(stop, r.informer.HasSynced)
}

func (r *crdRegistration) update(obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = t.Obj, true
	}
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	served := map[schema.GroupVersion]bool{}
	if !deleted {
		for _, v := range crd.Spec.Versions {
			if v.Served {
				served[schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}] = true
			}
		}
	}
	for gv := range served {
		if r.serving[gv] == nil {
			r.serving[gv] = map[string]bool{}
		}
		r.serving[gv][crd.Name] = true
		r.auto.AddAPIServiceToSync(localAPIService(gv, crdPriority))
	}
	for gv, names := range r.serving {
		if served[gv] || !names[crd.Name] {
			continue
		}
		delete(names, crd.Name)
		if len(names) == 0 {
			delete(r.serving, gv)
			r.auto.RemoveAPIServiceToSync(gv.Version + "." + gv.Group)
		}
	}
}
