// Package rbac is skiff's RBAC authorizer, with upstream's semantics: a request is allowed
// when some rule of a role bound to its user (by a ClusterRoleBinding anywhere, or a
// RoleBinding in the request's namespace) covers its verb, API group, resource, subresource
// and name, or its non-resource path. Roles and bindings come from informers; nothing here
// writes. The rule matching (rules.go) is pure and is what the Node authorizer, escalation
// checks and SelfSubjectRulesReview share.
package rbac
