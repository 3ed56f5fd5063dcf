package validation

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestRBACValidation(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "system:controller:x", Namespace: "ns"}
	cmeta := metav1.ObjectMeta{Name: "system:controller:x"}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}
	for _, tc := range []struct {
		name string
		errs field.ErrorList
		want string // "" = valid
	}{
		{"role", Role(&rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}), ""},
		{"role name with a slash", Role(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "a/b", Namespace: "ns"}}), "metadata.name: Invalid value"},
		{"no verbs", Role(&rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}}}}), "rules[0].verbs: Required value: verbs must contain at least one value"},
		{"no api group", Role(&rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, Resources: []string{"pods"}}}}), "resource rules must supply at least one api group"},
		{"no resources", Role(&rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}}}}), "resource rules must supply at least one resource"},
		{"namespaced non-resource URL", Role(&rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}}), "namespaced rules cannot apply to non-resource URLs"},
		{"cluster non-resource URL", ClusterRole(&rbacv1.ClusterRole{ObjectMeta: cmeta, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}}), ""},
		{"both kinds in one rule", ClusterRole(&rbacv1.ClusterRole{ObjectMeta: cmeta, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/x"}, Resources: []string{"pods"}}}}), "rules cannot apply to both regular resources and non-resource URLs"},
		{"empty aggregation", ClusterRole(&rbacv1.ClusterRole{ObjectMeta: cmeta, AggregationRule: &rbacv1.AggregationRule{}}), "at least one clusterRoleSelector required"},
		{"binding", RoleBinding(&rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default"}}}), ""},
		{"binding to a Role", RoleBinding(&rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "r"}}), ""},
		{"cluster binding to a Role", ClusterRoleBinding(&rbacv1.ClusterRoleBinding{ObjectMeta: cmeta, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "r"}}), `roleRef.kind: Unsupported value: "Role"`},
		{"roleRef group", RoleBinding(&rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: rbacv1.RoleRef{APIGroup: "apps", Kind: "ClusterRole", Name: "view"}}), `roleRef.apiGroup: Unsupported value: "apps"`},
		{"roleRef without name", RoleBinding(&rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole"}}), "roleRef.name: Required value"},
		{"cluster binding service account needs a namespace", ClusterRoleBinding(&rbacv1.ClusterRoleBinding{ObjectMeta: cmeta, RoleRef: ref, Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default"}}}), "subjects[0].namespace: Required value"},
		{"user subject group", RoleBinding(&rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}}}), `subjects[0].apiGroup: Unsupported value: ""`},
		{"unknown subject kind", RoleBinding(&rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: []rbacv1.Subject{{Kind: "Robot", Name: "r"}}}), `subjects[0].kind: Unsupported value: "Robot"`},
		{"subject without name", RoleBinding(&rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: rbacv1.GroupName}}}), "subjects[0].name: Required value"},
		{"roleRef changed", RoleRefUpdate(ref, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}), "roleRef: Invalid value"},
		{"roleRef kept", RoleRefUpdate(ref, ref), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.errs.ToAggregate()
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("unexpected errors: %v", got)
			case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
				t.Fatalf("errors %v, want %q", got, tc.want)
			}
		})
	}
}
