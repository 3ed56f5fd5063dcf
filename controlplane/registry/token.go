package registry

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/controlplane/serviceaccount"
)

// TokenIssuer signs service-account tokens.
type TokenIssuer interface {
	Issue(r serviceaccount.Request) (string, time.Time, error)
}

// TokenREST serves serviceaccounts/<name>/token (TokenRequest).
type TokenREST struct {
	accounts *genericregistry.Store
	issuer   TokenIssuer
	// pods and nodes, when set, name the node of a pod a token is bound to (its claims and
	// the node-name extra upstream's authenticator gives).
	pods, nodes *genericregistry.Store
}

var (
	_ rest.NamedCreater             = &TokenREST{}
	_ rest.GroupVersionKindProvider = &TokenREST{}
)

// New implements rest.Storage.
func (r *TokenREST) New() runtime.Object { return &authenticationv1.TokenRequest{} }

// Destroy implements rest.Storage.
func (r *TokenREST) Destroy() {}

// GroupVersionKind implements rest.GroupVersionKindProvider: the subresource speaks
// authentication.k8s.io/v1 TokenRequest.
func (r *TokenREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")
}

// Create issues a token for the service account named in the URL.
func (r *TokenREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	req, ok := obj.(*authenticationv1.TokenRequest)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a TokenRequest: %T", obj))
	}
	gk := authenticationv1.SchemeGroupVersion.WithKind("TokenRequest").GroupKind()
	exp := int64(3600)
	if req.Spec.ExpirationSeconds != nil {
		exp = *req.Spec.ExpirationSeconds
	}
	if exp < 600 {
		return nil, apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("spec", "expirationSeconds"), exp, "may not specify a duration less than 10 minutes")})
	}
	if exp > 1<<32 {
		return nil, apierrors.NewInvalid(gk, name, field.ErrorList{field.TooLong(field.NewPath("spec", "expirationSeconds"), exp, 1<<32)})
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	saObj, err := r.accounts.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	sa := saObj.(*corev1.ServiceAccount)
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	tr := serviceaccount.Request{Namespace: ns, Name: sa.Name, UID: string(sa.UID), Audiences: req.Spec.Audiences,
		Expiration: time.Duration(exp) * time.Second}
	if ref := req.Spec.BoundObjectRef; ref != nil {
		if ref.Kind != "Pod" {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token to object of kind %q: only Pod is supported", ref.Kind))
		}
		tr.Pod = &serviceaccount.Ref{Name: ref.Name, UID: string(ref.UID)}
		if r.pods != nil && r.nodes != nil {
			// From the watch cache: a token is requested for every projected volume's refresh,
			// and the pod's node does not change once bound.
			cached := &metav1.GetOptions{ResourceVersion: "0"}
			if obj, err := r.pods.Get(ctx, ref.Name, cached); err == nil && obj.(*corev1.Pod).Spec.NodeName != "" {
				node := obj.(*corev1.Pod).Spec.NodeName
				nctx := genericapirequest.WithNamespace(ctx, "")
				if nobj, err := r.nodes.Get(nctx, node, cached); err == nil {
					tr.Node = &serviceaccount.Ref{Name: node, UID: string(nobj.(*corev1.Node).UID)}
				}
			}
		}
	}
	token, expiry, err := r.issuer.Issue(tr)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out := req.DeepCopy()
	out.Name, out.Namespace = name, ns
	out.Spec.ExpirationSeconds = &exp
	out.Status = authenticationv1.TokenRequestStatus{Token: token, ExpirationTimestamp: metav1.NewTime(expiry)}
	return out, nil
}
