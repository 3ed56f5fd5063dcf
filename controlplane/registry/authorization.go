package registry

import (
	"context"
	"fmt"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Reviews are what the authorization.k8s.io reviews and TokenReview ask.
type Reviews struct {
	// Authorizer is the API server's whole authorizer chain.
	Authorizer authorizer.Authorizer
	// Rules lists a user's rules for SelfSubjectRulesReview.
	Rules authorizer.RuleResolver
	// Tokens authenticates bearer tokens for TokenReview.
	Tokens authenticator.Token
	// Audiences are the API server's own, used when a TokenReview names none.
	Audiences authenticator.Audiences
}

func reviewResources(r *Reviews) (authz, authn map[string]rest.Storage) {
	authz = map[string]rest.Storage{
		"subjectaccessreviews":      &reviewREST{kind: "SubjectAccessReview", singular: "subjectaccessreview", newObj: func() runtime.Object { return &authorizationv1.SubjectAccessReview{} }, create: r.subjectAccessReview},
		"selfsubjectaccessreviews":  &reviewREST{kind: "SelfSubjectAccessReview", singular: "selfsubjectaccessreview", newObj: func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} }, create: r.selfSubjectAccessReview},
		"localsubjectaccessreviews": &reviewREST{kind: "LocalSubjectAccessReview", singular: "localsubjectaccessreview", namespaced: true, newObj: func() runtime.Object { return &authorizationv1.LocalSubjectAccessReview{} }, create: r.localSubjectAccessReview},
		"selfsubjectrulesreviews":   &reviewREST{kind: "SelfSubjectRulesReview", singular: "selfsubjectrulesreview", newObj: func() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} }, create: r.selfSubjectRulesReview},
	}
	authn = map[string]rest.Storage{
		"tokenreviews": &reviewREST{kind: "TokenReview", singular: "tokenreview", newObj: func() runtime.Object { return &authenticationv1.TokenReview{} }, create: r.tokenReview},
	}
	return authz, authn
}

// reviewREST serves a create-only review resource: nothing is stored, the answer is the
// object with its status filled in.
type reviewREST struct {
	kind, singular string
	namespaced     bool
	newObj         func() runtime.Object
	create         func(ctx context.Context, obj runtime.Object) (runtime.Object, error)
}

var (
	_ rest.Creater              = &reviewREST{}
	_ rest.Scoper               = &reviewREST{}
	_ rest.SingularNameProvider = &reviewREST{}
)

func (r *reviewREST) New() runtime.Object     { return r.newObj() }
func (r *reviewREST) Destroy()                {}
func (r *reviewREST) NamespaceScoped() bool   { return r.namespaced }
func (r *reviewREST) GetSingularName() string { return r.singular }
func (r *reviewREST) Create(ctx context.Context, obj runtime.Object, validate rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	if validate != nil {
		if err := validate(ctx, obj); err != nil {
			return nil, err
		}
	}
	return r.create(ctx, obj)
}

func (r *Reviews) subjectAccessReview(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	sar := obj.(*authorizationv1.SubjectAccessReview)
	errs := accessSpec(sar.Spec.ResourceAttributes, sar.Spec.NonResourceAttributes)
	if sar.Spec.User == "" && len(sar.Spec.Groups) == 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "user"), sar.Spec.User, "at least one of user or group must be specified"))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview").GroupKind(), "", errs)
	}
	extra := map[string][]string{}
	for k, v := range sar.Spec.Extra {
		extra[k] = v
	}
	u := &user.DefaultInfo{Name: sar.Spec.User, UID: sar.Spec.UID, Groups: sar.Spec.Groups, Extra: extra}
	sar.Status = r.decide(ctx, attributes(u, sar.Spec.ResourceAttributes, sar.Spec.NonResourceAttributes))
	return sar, nil
}

func (r *Reviews) selfSubjectAccessReview(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	ssar := obj.(*authorizationv1.SelfSubjectAccessReview)
	if errs := accessSpec(ssar.Spec.ResourceAttributes, ssar.Spec.NonResourceAttributes); len(errs) > 0 {
		return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview").GroupKind(), "", errs)
	}
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	ssar.Status = r.decide(ctx, attributes(u, ssar.Spec.ResourceAttributes, ssar.Spec.NonResourceAttributes))
	return ssar, nil
}

func (r *Reviews) localSubjectAccessReview(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	lsar := obj.(*authorizationv1.LocalSubjectAccessReview)
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	errs := accessSpec(lsar.Spec.ResourceAttributes, lsar.Spec.NonResourceAttributes)
	if lsar.Spec.NonResourceAttributes != nil {
		errs = append(errs, field.Invalid(field.NewPath("spec", "nonResourceAttributes"), lsar.Spec.NonResourceAttributes, "disallowed on this kind of request"))
	}
	if lsar.Spec.User == "" && len(lsar.Spec.Groups) == 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "user"), lsar.Spec.User, "at least one of user or group must be specified"))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind("LocalSubjectAccessReview").GroupKind(), "", errs)
	}
	if lsar.Spec.ResourceAttributes.Namespace != ns {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.resourceAttributes.namespace must match namespace: %v", ns))
	}
	extra := map[string][]string{}
	for k, v := range lsar.Spec.Extra {
		extra[k] = v
	}
	u := &user.DefaultInfo{Name: lsar.Spec.User, UID: lsar.Spec.UID, Groups: lsar.Spec.Groups, Extra: extra}
	lsar.Status = r.decide(ctx, attributes(u, lsar.Spec.ResourceAttributes, nil))
	return lsar, nil
}

func (r *Reviews) selfSubjectRulesReview(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	ssrr := obj.(*authorizationv1.SelfSubjectRulesReview)
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	if ssrr.Spec.Namespace == "" {
		return nil, apierrors.NewBadRequest("no namespace on request")
	}
	res, nonRes, incomplete, err := r.Rules.RulesFor(ctx, u, ssrr.Spec.Namespace)
	ssrr.Status = authorizationv1.SubjectRulesReviewStatus{Incomplete: incomplete,
		ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}
	if err != nil {
		ssrr.Status.EvaluationError = err.Error()
	}
	for _, rule := range res {
		ssrr.Status.ResourceRules = append(ssrr.Status.ResourceRules, authorizationv1.ResourceRule{Verbs: rule.GetVerbs(),
			APIGroups: rule.GetAPIGroups(), Resources: rule.GetResources(), ResourceNames: rule.GetResourceNames()})
	}
	for _, rule := range nonRes {
		ssrr.Status.NonResourceRules = append(ssrr.Status.NonResourceRules, authorizationv1.NonResourceRule{Verbs: rule.GetVerbs(), NonResourceURLs: rule.GetNonResourceURLs()})
	}
	return ssrr, nil
}

func (r *Reviews) tokenReview(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	tr := obj.(*authenticationv1.TokenReview)
	if tr.Spec.Token == "" {
		return nil, apierrors.NewBadRequest("token is required for TokenReview in authentication")
	}
	wanted := authenticator.Audiences(tr.Spec.Audiences)
	if len(wanted) == 0 {
		wanted = r.Audiences
	}
	resp, ok, err := r.Tokens.AuthenticateToken(authenticator.WithAudiences(ctx, wanted), tr.Spec.Token)
	tr.Status = authenticationv1.TokenReviewStatus{}
	switch {
	case err != nil:
		tr.Status.Error = err.Error()
	case !ok || resp == nil:
		tr.Status.Error = "token is not recognized"
	default:
		auds := wanted.Intersect(resp.Audiences)
		if len(resp.Audiences) == 0 {
			auds = wanted // a token without audiences (bootstrap) is valid for the server's own
		}
		if len(auds) == 0 {
			tr.Status.Error = "token audiences do not match the requested audiences"
			break
		}
		extra := map[string]authenticationv1.ExtraValue{}
		for k, v := range resp.User.GetExtra() {
			extra[k] = v
		}
		// As the API server's own authentication says it: every authenticated user is in
		// system:authenticated.
		groups := resp.User.GetGroups()
		if !slices.Contains(groups, user.AllAuthenticated) {
			groups = append(slices.Clone(groups), user.AllAuthenticated)
		}
		tr.Status.Authenticated = true
		tr.Status.Audiences = auds
		tr.Status.User = authenticationv1.UserInfo{Username: resp.User.GetName(), UID: resp.User.GetUID(), Groups: groups, Extra: extra}
	}
	return tr, nil
}

// accessSpec checks that a review asks exactly one question.
func accessSpec(res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes) field.ErrorList {
	if (res == nil) == (nonRes == nil) {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "resourceAttributes"), res, "exactly one of nonResourceAttributes or resourceAttributes must be specified")}
	}
	return nil
}

func attributes(u user.Info, res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes) authorizer.AttributesRecord {
	if res != nil {
		return authorizer.AttributesRecord{User: u, Verb: res.Verb, Namespace: res.Namespace, APIGroup: res.Group, APIVersion: res.Version,
			Resource: res.Resource, Subresource: res.Subresource, Name: res.Name, ResourceRequest: true}
	}
	return authorizer.AttributesRecord{User: u, Verb: nonRes.Verb, Path: nonRes.Path}
}

func (r *Reviews) decide(ctx context.Context, a authorizer.AttributesRecord) authorizationv1.SubjectAccessReviewStatus {
	d, reason, err := r.Authorizer.Authorize(ctx, a)
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: d == authorizer.DecisionAllow, Denied: d == authorizer.DecisionDeny, Reason: reason}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	return st
}
