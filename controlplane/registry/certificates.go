package registry

import (
	"context"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/controlplane/printers"
	"github.com/skiff-sh/skiff/controlplane/validation"
)

// csrStrategy records who asked: spec.username, uid, groups and extra come from the
// authenticated requester, never from the body, so approvers can trust them.
type csrStrategy struct{ *strategy }

func (s csrStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	s.strategy.PrepareForCreate(ctx, obj)
	csr := obj.(*certificatesv1.CertificateSigningRequest)
	csr.Spec.Username, csr.Spec.UID, csr.Spec.Groups, csr.Spec.Extra = "", "", nil, nil
	if u, ok := genericapirequest.UserFrom(ctx); ok {
		csr.Spec.Username, csr.Spec.UID = u.GetName(), u.GetUID()
		csr.Spec.Groups = append([]string(nil), u.GetGroups()...)
		if extra := u.GetExtra(); len(extra) > 0 {
			csr.Spec.Extra = map[string]certificatesv1.ExtraValue{}
			for k, v := range extra {
				csr.Spec.Extra[k] = v
			}
		}
	}
	csr.Status = certificatesv1.CertificateSigningRequestStatus{}
}

// csrStatusStrategy serves /status (signers): the certificate and conditions other than
// Approved and Denied change here; approval is kept as it was.
type csrStatusStrategy struct{ statusStrategy }

func (s csrStatusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	s.statusStrategy.PrepareForUpdate(ctx, obj, old)
	n, o := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	n.Status.Conditions = mergeConditions(o.Status.Conditions, n.Status.Conditions, isApproval)
}

func (s csrStatusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	n, o := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	errs := validation.CSRStatus(n)
	if len(o.Status.Certificate) > 0 && !apiequality.Semantic.DeepEqual(n.Status.Certificate, o.Status.Certificate) {
		errs = append(errs, field.Forbidden(field.NewPath("status", "certificate"), "updates may not modify existing certificate content"))
	}
	return errs
}

// csrApprovalStrategy serves /approval (`kubectl certificate approve|deny`): the conditions
// change (all of them, as upstream: the approver may add its own types beside Approved or
// Denied) and nothing else; a decision, once made, stays.
type csrApprovalStrategy struct{ statusStrategy }

func (s csrApprovalStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	s.statusStrategy.PrepareForUpdate(ctx, obj, old)
	n, o := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	n.Status.Certificate = o.Status.Certificate
}

func (s csrApprovalStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	n, o := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	errs := validation.CSRStatus(n)
	for _, oc := range o.Status.Conditions {
		if !isApproval(oc) {
			continue
		}
		found := false
		for _, nc := range n.Status.Conditions {
			found = found || nc.Type == oc.Type
		}
		if !found {
			errs = append(errs, field.Forbidden(field.NewPath("status", "conditions"), "updates may not remove the "+string(oc.Type)+" condition"))
		}
	}
	return errs
}

func isApproval(c certificatesv1.CertificateSigningRequestCondition) bool {
	return c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied
}

// mergeConditions keeps old's conditions that keep(c) selects and takes the rest from updated.
func mergeConditions(old, updated []certificatesv1.CertificateSigningRequestCondition, keep func(certificatesv1.CertificateSigningRequestCondition) bool) []certificatesv1.CertificateSigningRequestCondition {
	var out []certificatesv1.CertificateSigningRequestCondition
	for _, c := range old {
		if keep(c) {
			out = append(out, c)
		}
	}
	for _, c := range updated {
		if !keep(c) {
			out = append(out, c)
		}
	}
	return out
}

func certificateSigningRequests(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return only(serveKind(opts, kind[*certificatesv1.CertificateSigningRequest]{
		resource: resource{gr: certificatesv1.Resource("certificatesigningrequests"), singular: "certificatesigningrequest",
			newObj:  func() runtime.Object { return &certificatesv1.CertificateSigningRequest{} },
			newList: func() runtime.Object { return &certificatesv1.CertificateSigningRequestList{} },
			printer: printers.CertificateSigningRequests, shortNames: []string{"csr"},
			fields: func(obj runtime.Object) fields.Set {
				return fields.Set{"spec.signerName": obj.(*certificatesv1.CertificateSigningRequest).Spec.SignerName}
			}},
		status: true,
		// The spec never changes after create, as upstream: an update carries only metadata.
		prepareForUpdate: func(n, o *certificatesv1.CertificateSigningRequest) { n.Spec = o.Spec },
		validate:         validation.CertificateSigningRequest,
		validateUpdate:   validation.CSRUpdate,
		adjust:           func(main *REST, s *strategy) { main.Store.CreateStrategy = csrStrategy{s} },
		subresources: func(main *REST, s *strategy) map[string]rest.Storage {
			status := statusStrategy{strategy: s}
			return map[string]rest.Storage{
				"certificatesigningrequests/status":   newStatusREST(main, csrStatusStrategy{status}),
				"certificatesigningrequests/approval": newStatusREST(main, csrApprovalStrategy{status}),
			}
		},
	}))
}

// clusterTrustBundles serves ClusterTrustBundles: cluster-scoped sets of CA certificates
// that pods mount (projected clusterTrustBundle volumes), selectable by spec.signerName as the
// agent lists a signer's bundles. Who may link a bundle to a signer is admission's check
// (ClusterTrustBundleAttest), not the strategy's.
func clusterTrustBundles(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return only(serveKind(opts, kind[*certificatesv1.ClusterTrustBundle]{
		resource: resource{gr: certificatesv1.Resource("clustertrustbundles"), singular: "clustertrustbundle",
			newObj:  func() runtime.Object { return &certificatesv1.ClusterTrustBundle{} },
			newList: func() runtime.Object { return &certificatesv1.ClusterTrustBundleList{} },
			printer: printers.ClusterTrustBundles,
			fields: func(obj runtime.Object) fields.Set {
				return fields.Set{"spec.signerName": obj.(*certificatesv1.ClusterTrustBundle).Spec.SignerName}
			}},
		validate: validation.ClusterTrustBundle,
		adjust:   func(main *REST, s *strategy) { main.Store.UpdateStrategy = ctbStrategy{s} },
	}))
}

// ctbStrategy validates an update on its own terms: an unchanged bundle is not parsed again.
type ctbStrategy struct{ *strategy }

func (ctbStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ClusterTrustBundleUpdate(obj.(*certificatesv1.ClusterTrustBundle), old.(*certificatesv1.ClusterTrustBundle))
}

// podCertificateRequests serves PodCertificateRequests: a node's agent asks a signer for a
// pod's certificate (NodeRestriction checks the pod, node and service account it names), and
// the signer answers through /status (admission checks it may "sign" for the signer). The
// spec never changes after create; the status once, to Issued, Denied or Failed.
func podCertificateRequests(opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	return only(serveKind(opts, kind[*certificatesv1.PodCertificateRequest]{
		resource: resource{gr: certificatesv1.Resource("podcertificaterequests"), singular: "podcertificaterequest",
			newObj:  func() runtime.Object { return &certificatesv1.PodCertificateRequest{} },
			newList: func() runtime.Object { return &certificatesv1.PodCertificateRequestList{} },
			printer: printers.PodCertificateRequests,
			fields: func(obj runtime.Object) fields.Set {
				r := obj.(*certificatesv1.PodCertificateRequest)
				return fields.Set{"spec.signerName": r.Spec.SignerName, "spec.podName": r.Spec.PodName, "spec.nodeName": string(r.Spec.NodeName)}
			}},
		namespaced: true, status: true,
		validate: validation.PodCertificateRequest,
		validateStatus: func(n, o *certificatesv1.PodCertificateRequest) field.ErrorList {
			return validation.PodCertificateRequestStatus(n, o, time.Now())
		},
		adjust: func(main *REST, s *strategy) { main.Store.UpdateStrategy = pcrStrategy{s} },
	}))
}

// pcrStrategy validates an update of the main resource on its own terms: metadata only.
type pcrStrategy struct{ *strategy }

func (pcrStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.PodCertificateRequestUpdate(obj.(*certificatesv1.PodCertificateRequest), old.(*certificatesv1.PodCertificateRequest))
}
