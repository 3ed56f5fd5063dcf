package scheme

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// addAdmissionDefaults registers upstream's admissionregistration/v1 defaults: without
// them a webhook's nil selectors would match nothing.
func addAdmissionDefaults(s *runtime.Scheme) {
	s.AddTypeDefaultingFunc(&admissionregistrationv1.ValidatingWebhookConfiguration{}, func(o any) {
		for i := range o.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks {
			w := &o.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks[i]
			defaultWebhook(&w.FailurePolicy, &w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector, &w.TimeoutSeconds, w.Rules, &w.ClientConfig)
		}
	})
	s.AddTypeDefaultingFunc(&admissionregistrationv1.MutatingWebhookConfiguration{}, func(o any) {
		for i := range o.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks {
			w := &o.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks[i]
			defaultWebhook(&w.FailurePolicy, &w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector, &w.TimeoutSeconds, w.Rules, &w.ClientConfig)
			if w.ReinvocationPolicy == nil {
				w.ReinvocationPolicy = ptr.To(admissionregistrationv1.NeverReinvocationPolicy)
			}
		}
	})
	s.AddTypeDefaultingFunc(&admissionregistrationv1.ValidatingAdmissionPolicy{}, func(o any) {
		p := o.(*admissionregistrationv1.ValidatingAdmissionPolicy)
		if p.Spec.FailurePolicy == nil {
			p.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
		}
		if p.Spec.MatchConstraints != nil {
			defaultMatchResources(p.Spec.MatchConstraints)
		}
	})
	s.AddTypeDefaultingFunc(&admissionregistrationv1.MutatingAdmissionPolicy{}, func(o any) {
		p := o.(*admissionregistrationv1.MutatingAdmissionPolicy)
		if p.Spec.FailurePolicy == nil {
			p.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
		}
		if p.Spec.MatchConstraints != nil {
			defaultMatchResources(p.Spec.MatchConstraints)
		}
	})
	s.AddTypeDefaultingFunc(&admissionregistrationv1.MutatingAdmissionPolicyBinding{}, func(o any) {
		b := o.(*admissionregistrationv1.MutatingAdmissionPolicyBinding)
		if b.Spec.MatchResources != nil {
			defaultMatchResources(b.Spec.MatchResources)
		}
		if p := b.Spec.ParamRef; p != nil && p.ParameterNotFoundAction == nil {
			p.ParameterNotFoundAction = ptr.To(admissionregistrationv1.DenyAction)
		}
	})
	s.AddTypeDefaultingFunc(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, func(o any) {
		b := o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
		if b.Spec.MatchResources != nil {
			defaultMatchResources(b.Spec.MatchResources)
		}
		if p := b.Spec.ParamRef; p != nil && p.ParameterNotFoundAction == nil {
			p.ParameterNotFoundAction = ptr.To(admissionregistrationv1.DenyAction)
		}
	})
}

func defaultWebhook(failure **admissionregistrationv1.FailurePolicyType, match **admissionregistrationv1.MatchPolicyType,
	ns, obj **metav1.LabelSelector, timeout **int32, rules []admissionregistrationv1.RuleWithOperations, cc *admissionregistrationv1.WebhookClientConfig) {
	if *failure == nil {
		*failure = ptr.To(admissionregistrationv1.Fail)
	}
	if *match == nil {
		*match = ptr.To(admissionregistrationv1.Equivalent)
	}
	if *ns == nil {
		*ns = &metav1.LabelSelector{}
	}
	if *obj == nil {
		*obj = &metav1.LabelSelector{}
	}
	if *timeout == nil {
		*timeout = ptr.To[int32](10)
	}
	for i := range rules {
		if rules[i].Scope == nil {
			rules[i].Scope = ptr.To(admissionregistrationv1.AllScopes)
		}
	}
	if cc.Service != nil && cc.Service.Port == nil {
		cc.Service.Port = ptr.To[int32](443)
	}
}

func defaultMatchResources(m *admissionregistrationv1.MatchResources) {
	if m.MatchPolicy == nil {
		m.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for i := range m.ResourceRules {
		if m.ResourceRules[i].Scope == nil {
			m.ResourceRules[i].Scope = ptr.To(admissionregistrationv1.AllScopes)
		}
	}
}
