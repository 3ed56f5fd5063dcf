package rbac

import (
	"context"
	"fmt"
	"strings"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
)

// Listers are the RBAC objects the authorizer reads, from informers.
type Listers struct {
	Roles               rbaclisters.RoleLister
	ClusterRoles        rbaclisters.ClusterRoleLister
	RoleBindings        rbaclisters.RoleBindingLister
	ClusterRoleBindings rbaclisters.ClusterRoleBindingLister
}

// Authorizer decides requests from the cluster's roles and bindings.
type Authorizer struct {
	l Listers

	// With caching on (Cached), the rules resolved for a user in a namespace are kept until
	// any role or binding changes: a request then costs a map lookup, not a walk over
	// every binding in its namespace.
	mu      sync.Mutex
	caching bool
	gen     uint64 // counts flushes
	cache   map[string]resolved
}

type resolved struct {
	rules []sourcedRule
	errs  []error
}

type sourcedRule struct {
	source string
	rule   *rbacv1.PolicyRule
}

// maxCached bounds the cache; past it the cache starts over.
const maxCached = 10000

var (
	_ authorizer.Authorizer   = &Authorizer{}
	_ authorizer.RuleResolver = &Authorizer{}
)

// New returns an authorizer reading l.
func New(l Listers) *Authorizer { return &Authorizer{l: l} }

// Authorize allows a request that a rule bound to its user covers. Otherwise it has no
// opinion (a later authorizer may still allow), as upstream's RBAC authorizer: the reason
// names only errors met while resolving roles (a binding to a missing role).
func (a *Authorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	u := attrs.GetUser()
	if u == nil {
		return authorizer.DecisionNoOpinion, "", nil
	}
	var allowed string
	var errs []error
	if a.caching {
		r := a.resolve(u, attrs.GetNamespace())
		for _, sr := range r.rules {
			if RuleAllows(attrs, sr.rule) {
				allowed = sr.source
				break
			}
		}
		errs = r.errs
	} else {
		errs = a.visit(u, attrs.GetNamespace(), func(source string, rule *rbacv1.PolicyRule) bool {
			if RuleAllows(attrs, rule) {
				allowed = source
				return false
			}
			return true
		})
	}
	if allowed != "" {
		return authorizer.DecisionAllow, "RBAC: allowed by " + allowed, nil
	}
	if len(errs) > 0 {
		return authorizer.DecisionNoOpinion, fmt.Sprintf("RBAC: %v", utilerrors.NewAggregate(errs)), nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// Cached turns on caching of resolved rules and returns the handler that must see every
// change to roles, cluster roles and both kinds of bindings (add it to their informers).
func (a *Authorizer) Cached() cache.ResourceEventHandler {
	a.mu.Lock()
	a.caching = true
	a.cache = map[string]resolved{}
	a.mu.Unlock()
	flush := func(any) {
		a.mu.Lock()
		a.cache = map[string]resolved{}
		a.gen++
		a.mu.Unlock()
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: flush, UpdateFunc: func(_, o any) { flush(o) }, DeleteFunc: flush}
}

// resolve returns the rules bound to u in namespace, from the cache when it has them.
func (a *Authorizer) resolve(u user.Info, namespace string) resolved {
	key := u.GetName() + "\x00" + strings.Join(u.GetGroups(), "\x01") + "\x00" + namespace
	a.mu.Lock()
	r, ok := a.cache[key]
	gen := a.gen
	a.mu.Unlock()
	if ok {
		return r
	}
	r.errs = a.visit(u, namespace, func(source string, rule *rbacv1.PolicyRule) bool {
		r.rules = append(r.rules, sourcedRule{source: source, rule: rule})
		return true
	})
	a.mu.Lock()
	// Store only if no flush came meanwhile: these rules may predate that change.
	if a.gen == gen {
		if len(a.cache) >= maxCached {
			a.cache = map[string]resolved{}
		}
		a.cache[key] = r
	}
	a.mu.Unlock()
	return r
}

// RulesFor returns every rule that applies to u in namespace (cluster-wide ones included);
// the error lists the bindings whose roles could not be read, the rules are what could.
func (a *Authorizer) RulesFor(ctx context.Context, u user.Info, namespace string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	rules, errs := a.Rules(u, namespace)
	var res []authorizer.ResourceRuleInfo
	var nonRes []authorizer.NonResourceRuleInfo
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			nonRes = append(nonRes, &authorizer.DefaultNonResourceRuleInfo{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
			continue
		}
		res = append(res, &authorizer.DefaultResourceRuleInfo{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
	}
	return res, nonRes, false, errs
}

// Rules returns the policy rules that apply to u in namespace.
func (a *Authorizer) Rules(u user.Info, namespace string) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	errs := a.visit(u, namespace, func(_ string, rule *rbacv1.PolicyRule) bool {
		rules = append(rules, *rule)
		return true
	})
	return rules, utilerrors.NewAggregate(errs)
}

// RoleRules returns the rules of the role ref names, for a binding in namespace.
func (a *Authorizer) RoleRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "ClusterRole":
		r, err := a.l.ClusterRoles.Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return r.Rules, nil
	case "Role":
		r, err := a.l.Roles.Roles(namespace).Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return r.Rules, nil
	}
	return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
}

// visit calls fn with each rule bound to u, cluster-wide bindings first, until fn returns
// false; it returns the errors of roles it could not read.
func (a *Authorizer) visit(u user.Info, namespace string, fn func(source string, rule *rbacv1.PolicyRule) bool) []error {
	var errs []error
	crbs, err := a.l.ClusterRoleBindings.List(labels.Everything())
	if err != nil {
		return []error{err}
	}
	for _, b := range crbs {
		subject, ok := boundSubject(u, b.Subjects, "")
		if !ok {
			continue
		}
		rules, err := a.RoleRules(b.RoleRef, "")
		if err != nil {
			errs = append(errs, missing(err, b.RoleRef, ""))
			continue
		}
		for i := range rules {
			if !fn(describe("ClusterRoleBinding", b.Name, "", b.RoleRef, subject), &rules[i]) {
				return nil
			}
		}
	}
	if namespace == "" {
		return errs
	}
	rbs, err := a.l.RoleBindings.RoleBindings(namespace).List(labels.Everything())
	if err != nil {
		return append(errs, err)
	}
	for _, b := range rbs {
		subject, ok := boundSubject(u, b.Subjects, namespace)
		if !ok {
			continue
		}
		rules, err := a.RoleRules(b.RoleRef, namespace)
		if err != nil {
			errs = append(errs, missing(err, b.RoleRef, namespace))
			continue
		}
		for i := range rules {
			if !fn(describe("RoleBinding", b.Name, namespace, b.RoleRef, subject), &rules[i]) {
				return nil
			}
		}
	}
	return errs
}

func boundSubject(u user.Info, subjects []rbacv1.Subject, namespace string) (*rbacv1.Subject, bool) {
	for i := range subjects {
		if AppliesTo(u, subjects[i], namespace) {
			return &subjects[i], true
		}
	}
	return nil, false
}

func missing(err error, ref rbacv1.RoleRef, namespace string) error {
	if apierrors.IsNotFound(err) {
		if ref.Kind == "Role" {
			return fmt.Errorf("role.rbac.authorization.k8s.io %q not found", ref.Name)
		}
		return fmt.Errorf("clusterrole.rbac.authorization.k8s.io %q not found", ref.Name)
	}
	return err
}

// describe words an allow as upstream: `RoleBinding "b/ns" of Role "r" to User "u"`.
func describe(kind, name, namespace string, ref rbacv1.RoleRef, s *rbacv1.Subject) string {
	if namespace != "" {
		name += "/" + namespace
	}
	who := s.Name
	if s.Kind == rbacv1.ServiceAccountKind && s.Namespace != "" {
		who = s.Namespace + "/" + s.Name
	}
	return fmt.Sprintf("%s %q of %s %q to %s %q", kind, name, ref.Kind, ref.Name, s.Kind, who)
}

// ConditionsAwareAuthorize implements authorizer.Authorizer; RBAC has no conditions.
func (a *Authorizer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attrs))
}

// EvaluateConditions implements authorizer.Authorizer: never called, RBAC decides outright.
func (a *Authorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}
