package printers

import (
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

var createdAtColumn = Column{Name: "Created At", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}

// Roles prints NAME CREATED AT, as upstream prints Roles and ClusterRoles.
var Roles = New(func(o runtime.Object) []any {
	m := o.(metav1.Object)
	return []any{m.GetCreationTimestamp().UTC().Format(time.RFC3339)}
}, createdAtColumn)

var bindingColumns = []Column{
	{Name: "Role", Description: rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"]},
	AgeColumn,
	{Name: "Users", Wide: true, Description: "Users in the roleBinding"},
	{Name: "Groups", Wide: true, Description: "Groups in the roleBinding"},
	{Name: "ServiceAccounts", Wide: true, Description: "ServiceAccounts in the roleBinding"},
}

// RoleBindings prints NAME ROLE AGE, wide: USERS GROUPS SERVICEACCOUNTS.
var RoleBindings = New(func(o runtime.Object) []any {
	b := o.(*rbacv1.RoleBinding)
	return bindingRow(b.RoleRef, b.Subjects, b.CreationTimestamp)
}, bindingColumns...)

// ClusterRoleBindings prints what RoleBindings print.
var ClusterRoleBindings = New(func(o runtime.Object) []any {
	b := o.(*rbacv1.ClusterRoleBinding)
	return bindingRow(b.RoleRef, b.Subjects, b.CreationTimestamp)
}, bindingColumns...)

func bindingRow(ref rbacv1.RoleRef, subjects []rbacv1.Subject, created metav1.Time) []any {
	var users, groups, accounts []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		case rbacv1.ServiceAccountKind:
			accounts = append(accounts, s.Namespace+"/"+s.Name)
		}
	}
	return []any{ref.Kind + "/" + ref.Name, Age(created),
		strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(accounts, ", ")}
}
