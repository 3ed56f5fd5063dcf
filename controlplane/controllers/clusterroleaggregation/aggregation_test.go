package clusterroleaggregation

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAggregate(t *testing.T) {
	get := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	list := rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{"apps"}, Resources: []string{"deployments"}}
	crd := rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}
	role := func(name string, lbl map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
		return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl}, Rules: rules}
	}
	agg := role("view", nil, crd) // stale rule: replaced by what is selected
	agg.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
		{MatchLabels: map[string]string{"aggregate-to-view": "true"}},
		{MatchLabels: map[string]string{"other": "x"}},
	}}
	all := []*rbacv1.ClusterRole{
		agg,
		role("z-second", map[string]string{"other": "x"}, list, get), // get appears once
		role("a-first", map[string]string{"aggregate-to-view": "true"}, get),
		role("unrelated", map[string]string{"aggregate-to-edit": "true"}, crd),
	}
	got, err := Aggregate(agg, all)
	if err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.PolicyRule{get, list}
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Fatalf("rules %v, want %v", got, want)
	}
	// Nothing selected: no rules (an empty list, not the stale ones).
	agg.AggregationRule.ClusterRoleSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"none": "y"}}}
	if got, _ := Aggregate(agg, all); len(got) != 0 {
		t.Fatalf("rules %v, want none", got)
	}
	// A bad selector is an error.
	agg.AggregationRule.ClusterRoleSelectors = []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}}
	if _, err := Aggregate(agg, all); err == nil {
		t.Fatal("bad selector accepted")
	}
}
