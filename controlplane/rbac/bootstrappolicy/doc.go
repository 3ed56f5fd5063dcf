// Package bootstrappolicy is the default RBAC policy: the roles and bindings every
// Kubernetes cluster has (cluster-admin, admin/edit/view and their aggregate-to-* parts,
// system:node, system:kube-scheduler, the system:controller:* roles of the controller
// manager's controllers, the leader-locking Roles in kube-system, ...), exactly as
// kube-apiserver v1.37 creates them with its default feature gates, plus skiff's own
// (skiff.go) for what its agents and controllers do beyond upstream's components.
//
// The data is checked against upstream's fixtures (testdata/). Reconcile writes it the
// way kube-apiserver's rbac/bootstrap-roles post-start hook does, at every API server
// start: missing objects are created, missing rules and subjects added, nothing removed,
// and an object annotated rbac.authorization.kubernetes.io/autoupdate: "false" is left
// as its owner made it.
package bootstrappolicy
