package printers

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ValidatingWebhookConfigurations prints NAME WEBHOOKS AGE.
var ValidatingWebhookConfigurations = New(func(o runtime.Object) []any {
	c := o.(*admissionregistrationv1.ValidatingWebhookConfiguration)
	return []any{int64(len(c.Webhooks)), Age(c.CreationTimestamp)}
}, Column{Name: "Webhooks", Type: "integer"}, AgeColumn)

// MutatingWebhookConfigurations prints NAME WEBHOOKS AGE.
var MutatingWebhookConfigurations = New(func(o runtime.Object) []any {
	c := o.(*admissionregistrationv1.MutatingWebhookConfiguration)
	return []any{int64(len(c.Webhooks)), Age(c.CreationTimestamp)}
}, Column{Name: "Webhooks", Type: "integer"}, AgeColumn)

// ValidatingAdmissionPolicies prints NAME VALIDATIONS PARAMKIND AGE.
var ValidatingAdmissionPolicies = New(func(o runtime.Object) []any {
	p := o.(*admissionregistrationv1.ValidatingAdmissionPolicy)
	param := "<unset>"
	if k := p.Spec.ParamKind; k != nil {
		param = k.APIVersion + "/" + k.Kind
	}
	return []any{int64(len(p.Spec.Validations)), param, Age(p.CreationTimestamp)}
}, Column{Name: "Validations", Type: "integer"}, Column{Name: "ParamKind"}, AgeColumn)

// ValidatingAdmissionPolicyBindings prints NAME POLICYNAME PARAMREF AGE.
var ValidatingAdmissionPolicyBindings = New(func(o runtime.Object) []any {
	b := o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
	ref := "<unset>"
	if r := b.Spec.ParamRef; r != nil && r.Name != "" {
		ref = r.Namespace + "/" + r.Name
	}
	return []any{b.Spec.PolicyName, ref, Age(b.CreationTimestamp)}
}, Column{Name: "PolicyName"}, Column{Name: "ParamRef"}, AgeColumn)

// MutatingAdmissionPolicies prints NAME MUTATIONS PARAMKIND AGE.
var MutatingAdmissionPolicies = New(func(o runtime.Object) []any {
	p := o.(*admissionregistrationv1.MutatingAdmissionPolicy)
	param := "<unset>"
	if k := p.Spec.ParamKind; k != nil {
		param = k.APIVersion + "/" + k.Kind
	}
	return []any{int64(len(p.Spec.Mutations)), param, Age(p.CreationTimestamp)}
}, Column{Name: "Mutations", Type: "integer"}, Column{Name: "ParamKind"}, AgeColumn)

// MutatingAdmissionPolicyBindings prints NAME POLICYNAME PARAMREF AGE.
var MutatingAdmissionPolicyBindings = New(func(o runtime.Object) []any {
	b := o.(*admissionregistrationv1.MutatingAdmissionPolicyBinding)
	ref := "<unset>"
	if r := b.Spec.ParamRef; r != nil && r.Name != "" {
		ref = r.Namespace + "/" + r.Name
	}
	return []any{b.Spec.PolicyName, ref, Age(b.CreationTimestamp)}
}, Column{Name: "PolicyName"}, Column{Name: "ParamRef"}, AgeColumn)
