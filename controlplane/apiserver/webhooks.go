package apiserver

import (
	"fmt"

	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	webhookinit "k8s.io/apiserver/pkg/admission/plugin/webhook/initializer"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/component-base/compatibility"
)

// newWebhookAdmission builds k8s.io/apiserver's MutatingAdmissionWebhook and
// ValidatingAdmissionWebhook plugins, initialized as kube-apiserver initializes them: the
// loopback client and informers (webhook configurations, namespaces for their selectors),
// and webhooks' Services reached at a ready endpoint.
func newWebhookAdmission(loopback *restclient.Config, client kubernetes.Interface, factory informers.SharedInformerFactory, authz authorizer.Authorizer,
	version compatibility.EffectiveVersion, services webhook.ServiceResolver, stop <-chan struct{}) (mutatingPlugin, validatingPlugin admission.Interface, err error) {
	dyn, err := dynamic.NewForConfig(loopback)
	if err != nil {
		return nil, nil, err
	}
	m, err := mutating.NewMutatingWebhook(nil)
	if err != nil {
		return nil, nil, err
	}
	v, err := validating.NewValidatingAdmissionWebhook(nil)
	if err != nil {
		return nil, nil, err
	}
	inits := admission.PluginInitializers{
		initializer.New(client, dyn, factory, authz, utilfeature.DefaultFeatureGate, version, stop, nil),
		webhookinit.NewPluginInitializer(nil, services),
	}
	for name, p := range map[string]admission.Interface{"MutatingAdmissionWebhook": m, "ValidatingAdmissionWebhook": v} {
		inits.Initialize(p)
		if err := admission.ValidateInitialization(p); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return m, v, nil
}
