// Package clusterroleaggregation keeps the rules of every ClusterRole with an
// aggregationRule equal to the union of the rules of the ClusterRoles its selectors match,
// as upstream's clusterrole-aggregation-controller: `admin`, `edit` and `view` gain what a
// CRD's `aggregate-to-*` roles add, and lose it when those go.
package clusterroleaggregation

import (
	"context"
	"log/slog"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	rbacinformers "k8s.io/client-go/informers/rbac/v1"
	"k8s.io/client-go/kubernetes"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's).
const Name = "clusterrole-aggregation-controller"

// Controller aggregates ClusterRoles.
type Controller struct {
	client kubernetes.Interface
	roles  rbaclisters.ClusterRoleLister
	synced cache.InformerSynced
	loop   *loop.Loop
}

// New wires the controller.
func New(client kubernetes.Interface, roles rbacinformers.ClusterRoleInformer, log *slog.Logger) *Controller {
	c := &Controller{client: client, roles: roles.Lister(), synced: roles.Informer().HasSynced}
	c.loop = loop.New(Name, c.sync, log)
	// Any ClusterRole may be matched by any aggregation rule: a change to one re-checks
	// every aggregated role, as upstream does (there are few of them).
	enqueueAll := func(any) {
		all, _ := c.roles.List(labels.Everything())
		for _, r := range all {
			if r.AggregationRule != nil {
				c.loop.Add(r.Name)
			}
		}
	}
	_, _ = roles.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueueAll, UpdateFunc: func(_, o any) { enqueueAll(o) }, DeleteFunc: enqueueAll,
	})
	return c
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	c.loop.Run(ctx, 1)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	role, err := c.roles.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if role.AggregationRule == nil {
		return nil
	}
	all, err := c.roles.List(labels.Everything())
	if err != nil {
		return err
	}
	rules, err := Aggregate(role, all)
	if err != nil {
		return err
	}
	if apiequality.Semantic.DeepEqual(rules, role.Rules) {
		return nil
	}
	role = role.DeepCopy()
	role.Rules = rules
	_, err = c.client.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{FieldManager: Name})
	if apierrors.IsConflict(err) {
		c.loop.Add(name)
		return nil
	}
	return err
}

// Aggregate returns the rules role's aggregation rule selects from all: the rules of every
// other matching ClusterRole, in name order, each rule once.
func Aggregate(role *rbacv1.ClusterRole, all []*rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	var selectors []labels.Selector
	for i := range role.AggregationRule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&role.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			return nil, err
		}
		selectors = append(selectors, s)
	}
	sorted := append([]*rbacv1.ClusterRole(nil), all...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	rules := []rbacv1.PolicyRule{}
	for _, other := range sorted {
		if other.Name == role.Name {
			continue
		}
		for _, s := range selectors {
			if !s.Matches(labels.Set(other.Labels)) {
				continue
			}
			for _, r := range other.Rules {
				if !containsRule(rules, r) {
					rules = append(rules, r)
				}
			}
			break
		}
	}
	return rules, nil
}

func containsRule(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
	for _, x := range rules {
		if apiequality.Semantic.DeepEqual(x, r) {
			return true
		}
	}
	return false
}
