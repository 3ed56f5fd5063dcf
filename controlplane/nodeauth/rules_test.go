package nodeauth

import rbacv1 "k8s.io/api/rbac/v1"

func rule(group string, resources []string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
}

// testNodeRules are the static rules of upstream's bootstrap policy for nodes (v1.37's
// default feature gates); skiff's own are bootstrappolicy.NodeRules.
func testNodeRules() []rbacv1.PolicyRule {
	read := []string{"get", "list", "watch"}
	rs := func(r ...string) []string { return r }
	return []rbacv1.PolicyRule{
		// API access checks (non-mutating creates).
		rule("authentication.k8s.io", rs("tokenreviews"), "create"),
		rule("authorization.k8s.io", rs("subjectaccessreviews", "localsubjectaccessreviews"), "create"),
		// Service environment variables.
		rule("", rs("services"), read...),
		// Registration and status (NodeRestriction keeps a node to its own).
		rule("", rs("nodes"), "create", "get", "list", "watch", "update", "patch"),
		rule("", rs("nodes/status"), "update", "patch"),
		rule("", rs("events"), "create", "update", "patch"),
		rule("events.k8s.io", rs("events"), "create", "update", "patch"),
		// Pods bound to the node, mirror pods, their status and evictions.
		rule("", rs("pods"), "get", "list", "watch", "create", "delete"),
		rule("", rs("pods/status"), "update", "patch"),
		rule("", rs("pods/eviction"), "create"),
		// What pods refer to.
		rule("", rs("secrets", "configmaps"), read...),
		rule("", rs("persistentvolumeclaims", "persistentvolumes"), "get"),
		rule("", rs("persistentvolumeclaims/status"), "get", "update", "patch"),
		rule("", rs("endpoints"), "get"),
		rule("", rs("serviceaccounts"), "get"),
		rule("", rs("serviceaccounts/token"), "create"),
		// Client certificate rotation.
		rule("certificates.k8s.io", rs("certificatesigningrequests"), "create", "get", "list", "watch"),
		rule("certificates.k8s.io", rs("clustertrustbundles"), read...),
		rule("certificates.k8s.io", rs("podcertificaterequests"), "get", "list", "watch", "create"),
		rule("coordination.k8s.io", rs("leases"), "get", "create", "update", "patch", "delete"),
		// CSI.
		rule("storage.k8s.io", rs("volumeattachments"), "get"),
		rule("storage.k8s.io", rs("csidrivers"), read...),
		rule("storage.k8s.io", rs("csinodes"), "get", "create", "update", "patch", "delete"),
		rule("node.k8s.io", rs("runtimeclasses"), read...),
		// Dynamic resource allocation.
		rule("resource.k8s.io", rs("resourceclaims"), "get"),
		rule("resource.k8s.io", rs("resourceslices"), "deletecollection"),
	}
}
