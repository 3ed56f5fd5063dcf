package registry

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// SelfSubjectReviewREST answers `kubectl auth whoami`.
type SelfSubjectReviewREST struct{}

var (
	_ rest.Creater              = SelfSubjectReviewREST{}
	_ rest.Scoper               = SelfSubjectReviewREST{}
	_ rest.SingularNameProvider = SelfSubjectReviewREST{}
)

// New implements rest.Storage.
func (SelfSubjectReviewREST) New() runtime.Object { return &authenticationv1.SelfSubjectReview{} }

// Destroy implements rest.Storage.
func (SelfSubjectReviewREST) Destroy() {}

// NamespaceScoped implements rest.Scoper.
func (SelfSubjectReviewREST) NamespaceScoped() bool { return false }

// GetSingularName implements rest.SingularNameProvider.
func (SelfSubjectReviewREST) GetSingularName() string { return "selfsubjectreview" }

// Create returns the requester's identity.
func (SelfSubjectReviewREST) Create(ctx context.Context, obj runtime.Object, _ rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewUnauthorized("no user")
	}
	extra := map[string]authenticationv1.ExtraValue{}
	for k, v := range u.GetExtra() {
		extra[k] = v
	}
	return &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
		UserInfo: authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: extra},
	}}, nil
}
