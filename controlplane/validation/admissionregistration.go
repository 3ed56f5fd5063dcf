package validation

import (
	"fmt"
	"net/url"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	sideEffects     = []string{string(admissionregistrationv1.SideEffectClassNone), string(admissionregistrationv1.SideEffectClassNoneOnDryRun)}
	failurePolicies = []string{string(admissionregistrationv1.Fail), string(admissionregistrationv1.Ignore)}
	reviewVersions  = sets.New("v1", "v1beta1")
)

// webhook is what validating and mutating webhooks share.
type webhook struct {
	name           string
	clientConfig   admissionregistrationv1.WebhookClientConfig
	sideEffects    *admissionregistrationv1.SideEffectClass
	failurePolicy  *admissionregistrationv1.FailurePolicyType
	timeout        *int32
	reviewVersions []string
	conditions     []admissionregistrationv1.MatchCondition
}

func webhooks(hooks []webhook, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, w := range hooks {
		wf := fld.Index(i)
		if seen.Has(w.name) {
			errs = append(errs, field.Duplicate(wf.Child("name"), w.name))
		}
		seen.Insert(w.name)
		for _, msg := range validation.IsFullyQualifiedName(field.NewPath("x"), w.name) {
			errs = append(errs, field.Invalid(wf.Child("name"), w.name, msg.Detail))
		}
		cc := wf.Child("clientConfig")
		switch {
		case w.clientConfig.URL == nil && w.clientConfig.Service == nil:
			errs = append(errs, field.Required(cc, "exactly one of url or service is required"))
		case w.clientConfig.URL != nil && w.clientConfig.Service != nil:
			errs = append(errs, field.Required(cc, "exactly one of url or service is required"))
		case w.clientConfig.URL != nil:
			u, err := url.Parse(*w.clientConfig.URL)
			switch {
			case err != nil:
				errs = append(errs, field.Invalid(cc.Child("url"), *w.clientConfig.URL, fmt.Sprintf("url must be a valid URL: %v", err)))
			case u.Scheme != "https":
				errs = append(errs, field.Invalid(cc.Child("url"), u.Scheme, `'https' is the only allowed URL scheme`))
			case u.Host == "":
				errs = append(errs, field.Invalid(cc.Child("url"), u.Host, "host must be specified"))
			}
		default:
			if w.clientConfig.Service.Name == "" {
				errs = append(errs, field.Required(cc.Child("service", "name"), "service name is required"))
			}
			if w.clientConfig.Service.Namespace == "" {
				errs = append(errs, field.Required(cc.Child("service", "namespace"), "service namespace is required"))
			}
		}
		if w.sideEffects == nil {
			errs = append(errs, field.Required(wf.Child("sideEffects"), fmt.Sprintf("must specify one of %v", sideEffects)))
		} else if !contains(sideEffects, string(*w.sideEffects)) {
			errs = append(errs, field.NotSupported(wf.Child("sideEffects"), *w.sideEffects, sideEffects))
		}
		if w.failurePolicy != nil && !contains(failurePolicies, string(*w.failurePolicy)) {
			errs = append(errs, field.NotSupported(wf.Child("failurePolicy"), *w.failurePolicy, failurePolicies))
		}
		if w.timeout != nil && (*w.timeout < 1 || *w.timeout > 30) {
			errs = append(errs, field.Invalid(wf.Child("timeoutSeconds"), *w.timeout, "the timeout value must be between 1 and 30 seconds"))
		}
		if len(w.reviewVersions) == 0 {
			errs = append(errs, field.Required(wf.Child("admissionReviewVersions"), fmt.Sprintf("must specify one of %v", sets.List(reviewVersions))))
		}
		ok := false
		for _, v := range w.reviewVersions {
			ok = ok || reviewVersions.Has(v)
		}
		if len(w.reviewVersions) > 0 && !ok {
			errs = append(errs, field.Invalid(wf.Child("admissionReviewVersions"), w.reviewVersions, fmt.Sprintf("must include at least one of %v", sets.List(reviewVersions))))
		}
		errs = append(errs, matchConditions(w.conditions, wf.Child("matchConditions"), false)...)
	}
	return errs
}

// ValidatingWebhookConfiguration validates a ValidatingWebhookConfiguration.
func ValidatingWebhookConfiguration(c *admissionregistrationv1.ValidatingWebhookConfiguration) field.ErrorList {
	errs := ObjectMeta(&c.ObjectMeta, false, DNSSubdomain)
	var hooks []webhook
	for _, w := range c.Webhooks {
		hooks = append(hooks, webhook{w.Name, w.ClientConfig, w.SideEffects, w.FailurePolicy, w.TimeoutSeconds, w.AdmissionReviewVersions, w.MatchConditions})
	}
	return append(errs, webhooks(hooks, field.NewPath("webhooks"))...)
}

// MutatingWebhookConfiguration validates a MutatingWebhookConfiguration.
func MutatingWebhookConfiguration(c *admissionregistrationv1.MutatingWebhookConfiguration) field.ErrorList {
	errs := ObjectMeta(&c.ObjectMeta, false, DNSSubdomain)
	var hooks []webhook
	for _, w := range c.Webhooks {
		hooks = append(hooks, webhook{w.Name, w.ClientConfig, w.SideEffects, w.FailurePolicy, w.TimeoutSeconds, w.AdmissionReviewVersions, w.MatchConditions})
	}
	return append(errs, webhooks(hooks, field.NewPath("webhooks"))...)
}

// ValidatingAdmissionPolicy validates a policy's shape (its CEL is compiled by the plugin).
func ValidatingAdmissionPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	errs := ObjectMeta(&p.ObjectMeta, false, DNSSubdomain)
	if len(p.Spec.Validations) == 0 && len(p.Spec.AuditAnnotations) == 0 {
		errs = append(errs, field.Required(specPath.Child("validations"), "validations or auditAnnotations must contain at least one item"))
	}
	for i, v := range p.Spec.Validations {
		if v.Expression == "" {
			errs = append(errs, field.Required(specPath.Child("validations").Index(i).Child("expression"), "expression is not specified"))
		}
	}
	return append(errs, matchConditions(p.Spec.MatchConditions, specPath.Child("matchConditions"), p.Spec.ParamKind != nil)...)
}

// ValidatingAdmissionPolicyBinding validates a binding: it names its policy.
func ValidatingAdmissionPolicyBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) field.ErrorList {
	errs := ObjectMeta(&b.ObjectMeta, false, DNSSubdomain)
	if b.Spec.PolicyName == "" {
		errs = append(errs, field.Required(specPath.Child("policyName"), ""))
	}
	if len(b.Spec.ValidationActions) == 0 {
		errs = append(errs, field.Required(specPath.Child("validationActions"), "at least one validation action is required"))
	}
	return errs
}

// MutatingAdmissionPolicy validates a CEL mutating policy as upstream: what it matches, at
// least one mutation, each with its patch type's expression, and a reinvocation policy.
func MutatingAdmissionPolicy(p *admissionregistrationv1.MutatingAdmissionPolicy) field.ErrorList {
	errs := ObjectMeta(&p.ObjectMeta, false, DNSSubdomain)
	if p.Spec.MatchConstraints == nil {
		errs = append(errs, field.Required(specPath.Child("matchConstraints"), "must be defined"))
	} else if len(p.Spec.MatchConstraints.ResourceRules) == 0 {
		errs = append(errs, field.Required(specPath.Child("matchConstraints", "resourceRules"), ""))
	}
	if len(p.Spec.Mutations) == 0 {
		errs = append(errs, field.Required(specPath.Child("mutations"), "mutations must contain at least one item"))
	}
	for i, m := range p.Spec.Mutations {
		path := specPath.Child("mutations").Index(i)
		switch m.PatchType {
		case admissionregistrationv1.PatchTypeApplyConfiguration:
			if m.ApplyConfiguration == nil || m.ApplyConfiguration.Expression == "" {
				errs = append(errs, field.Required(path.Child("applyConfiguration", "expression"), "expression is not specified"))
			}
			if m.JSONPatch != nil {
				errs = append(errs, field.Forbidden(path.Child("jsonPatch"), "must not be specified when patchType is ApplyConfiguration"))
			}
		case admissionregistrationv1.PatchTypeJSONPatch:
			if m.JSONPatch == nil || m.JSONPatch.Expression == "" {
				errs = append(errs, field.Required(path.Child("jsonPatch", "expression"), "expression is not specified"))
			}
			if m.ApplyConfiguration != nil {
				errs = append(errs, field.Forbidden(path.Child("applyConfiguration"), "must not be specified when patchType is JSONPatch"))
			}
		case "":
			errs = append(errs, field.Required(path.Child("patchType"), ""))
		default:
			errs = append(errs, field.NotSupported(path.Child("patchType"), m.PatchType,
				[]string{string(admissionregistrationv1.PatchTypeApplyConfiguration), string(admissionregistrationv1.PatchTypeJSONPatch)}))
		}
	}
	switch p.Spec.ReinvocationPolicy {
	case admissionregistrationv1.NeverReinvocationPolicy, admissionregistrationv1.IfNeededReinvocationPolicy:
	case "":
		errs = append(errs, field.Required(specPath.Child("reinvocationPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(specPath.Child("reinvocationPolicy"), p.Spec.ReinvocationPolicy,
			[]string{string(admissionregistrationv1.NeverReinvocationPolicy), string(admissionregistrationv1.IfNeededReinvocationPolicy)}))
	}
	return append(errs, matchConditions(p.Spec.MatchConditions, specPath.Child("matchConditions"), p.Spec.ParamKind != nil)...)
}

// MutatingAdmissionPolicyBinding validates a binding: it names its policy.
func MutatingAdmissionPolicyBinding(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) field.ErrorList {
	errs := ObjectMeta(&b.ObjectMeta, false, DNSSubdomain)
	if b.Spec.PolicyName == "" {
		errs = append(errs, field.Required(specPath.Child("policyName"), ""))
	}
	return errs
}
