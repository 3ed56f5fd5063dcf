package admission

import (
	"context"
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/warning"
	psadmission "k8s.io/pod-security-admission/admission"
	psapiload "k8s.io/pod-security-admission/admission/api/load"
	psapi "k8s.io/pod-security-admission/api"
	psmetrics "k8s.io/pod-security-admission/metrics"
	"k8s.io/pod-security-admission/policy"
)

// PodSecurity is upstream's PodSecurity admission, k8s.io/pod-security-admission's
// evaluator behind the pod-security.kubernetes.io/{enforce,audit,warn} labels of each
// namespace: a pod (or a workload's template) that breaks the enforced level is refused
// with the library's message, the warn level answers with warnings, the audit level with
// audit annotations. Namespaces without labels are privileged, as upstream's default.
type PodSecurity struct {
	delegate *psadmission.Admission
}

// NewPodSecurity builds the plugin; namespaces and pods read through the API server's stores.
func NewPodSecurity(namespaces NamespaceGetter, pods func(ctx context.Context, namespace string) ([]*corev1.Pod, error)) (*PodSecurity, error) {
	cfg, err := psapiload.LoadFromData(nil) // upstream's defaults: privileged everywhere
	if err != nil {
		return nil, err
	}
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return nil, err
	}
	a := &psadmission.Admission{Configuration: cfg, Evaluator: ev, Metrics: noMetrics{},
		PodSpecExtractor: psadmission.DefaultPodSpecExtractor{},
		NamespaceGetter:  namespaceGetter(namespaces), PodLister: podLister(pods)}
	if err := a.CompleteConfiguration(); err != nil {
		return nil, err
	}
	if err := a.ValidateConfiguration(); err != nil {
		return nil, err
	}
	return &PodSecurity{delegate: a}, nil
}

// Handles implements admission.Interface.
func (*PodSecurity) Handles(op admission.Operation) bool {
	return op == admission.Create || op == admission.Update
}

// Validate implements admission.ValidationInterface.
func (p *PodSecurity) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	gr := a.GetResource().GroupResource()
	if gr != corev1.Resource("pods") && gr != corev1.Resource("namespaces") && !(psadmission.DefaultPodSpecExtractor{}).HasPodSpec(gr) {
		return nil
	}
	user := ""
	if a.GetUserInfo() != nil {
		user = a.GetUserInfo().GetName()
	}
	rec := &psapi.AttributesRecord{Name: a.GetName(), Namespace: a.GetNamespace(), Kind: a.GetKind(), Resource: a.GetResource(),
		Subresource: a.GetSubresource(), Operation: admissionv1.Operation(a.GetOperation()), Object: a.GetObject(), OldObject: a.GetOldObject(),
		Username: user}
	resp := p.delegate.Validate(ctx, rec)
	for _, w := range resp.Warnings {
		warning.AddWarning(ctx, "", w)
	}
	for k, v := range resp.AuditAnnotations {
		audit.AddAuditAnnotation(ctx, "pod-security.kubernetes.io/"+k, v)
	}
	if resp.Allowed {
		return nil
	}
	err := admission.NewForbidden(a, errors.New("Not allowed by PodSecurity")).(*apierrors.StatusError)
	if r := resp.Result; r != nil {
		if r.Message != "" {
			err.ErrStatus.Message = r.Message
		}
		if r.Reason != "" {
			err.ErrStatus.Reason = r.Reason
		}
		if r.Code != 0 {
			err.ErrStatus.Code = r.Code
		}
	}
	return err
}

type namespaceGetter NamespaceGetter

func (g namespaceGetter) GetNamespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	if g == nil {
		return nil, fmt.Errorf("no namespaces")
	}
	return g(ctx, name)
}

type podLister func(ctx context.Context, namespace string) ([]*corev1.Pod, error)

func (l podLister) ListPods(ctx context.Context, namespace string) ([]*corev1.Pod, error) {
	if l == nil {
		return nil, nil
	}
	return l(ctx, namespace)
}

// noMetrics drops the library's metrics (skiff exports none of them yet).
type noMetrics struct{}

func (noMetrics) RecordEvaluation(psmetrics.Decision, psapi.LevelVersion, psmetrics.Mode, psapi.Attributes) {
}
func (noMetrics) RecordExemption(psapi.Attributes)   {}
func (noMetrics) RecordError(bool, psapi.Attributes) {}
