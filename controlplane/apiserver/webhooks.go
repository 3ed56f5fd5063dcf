package apiserver

import (
	"fmt"

	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	mutatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	validatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	webhookinit "k8s.io/apiserver/pkg/admission/plugin/webhook/initializer"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/component-base/compatibility"
)

// extensionAdmission is what k8s.io/apiserver's extensible admission plugins give the chain,
// in upstream's order: CEL mutating policies, mutating webhooks, then CEL validating
// policies, then validating webhooks.
type extensionAdmission struct {
	mutatingPolicies, mutatingWebhooks, policies, validatingWebhooks admission.Interface
}

// newExtensionAdmission builds MutatingAdmissionPolicy, MutatingAdmissionWebhook, ValidatingAdmissionPolicy and
// ValidatingAdmissionWebhook, initialized as kube-apiserver initializes them: the loopback
// client and informers (configurations, policies, namespaces for selectors), a dynamic
// client and REST mapper (policy parameters and matching), and webhooks' Services reached
// at a ready endpoint.
func newExtensionAdmission(loopback *restclient.Config, client kubernetes.Interface, factory informers.SharedInformerFactory, authz authorizer.Authorizer,
	version compatibility.EffectiveVersion, services webhook.ServiceResolver, stop <-chan struct{}) (extensionAdmission, error) {
	var out extensionAdmission
	dyn, err := dynamic.NewForConfig(loopback)
	if err != nil {
		return out, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))
	m, err := mutating.NewMutatingWebhook(nil)
	if err != nil {
		return out, err
	}
	v, err := validating.NewValidatingAdmissionWebhook(nil)
	if err != nil {
		return out, err
	}
	p, err := validatingpolicy.NewPlugin(nil)
	if err != nil {
		return out, err
	}
	mp, err := mutatingpolicy.NewPlugin(nil)
	if err != nil {
		return out, err
	}
	inits := admission.PluginInitializers{
		initializer.New(client, dyn, factory, authz, utilfeature.DefaultFeatureGate, version, stop, mapper),
		webhookinit.NewPluginInitializer(nil, services),
	}
	for name, plugin := range map[string]admission.Interface{"MutatingAdmissionPolicy": mp, "MutatingAdmissionWebhook": m,
		"ValidatingAdmissionWebhook": v, "ValidatingAdmissionPolicy": p} {
		inits.Initialize(plugin)
		if err := admission.ValidateInitialization(plugin); err != nil {
			return out, fmt.Errorf("%s: %w", name, err)
		}
	}
	return extensionAdmission{mutatingPolicies: mp, mutatingWebhooks: m, policies: p, validatingWebhooks: v}, nil
}
