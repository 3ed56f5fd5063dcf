package bootstrappolicy

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	authuser "k8s.io/apiserver/pkg/authentication/user"
)

// ClusterRoles is upstream's default ClusterRoles, but for the controllers' (ControllerRoles).
func ClusterRoles() []rbacv1.ClusterRole {
	return []rbacv1.ClusterRole{
		// admin, edit and view are aggregated: the aggregation controller fills their rules from
		// the ClusterRoles labelled aggregate-to-<name>. admin is a namespace's administrator
		// (edit plus granting), edit its user-level writer (view plus writes), view its reader.
		aggregated("admin", "admin"),
		// cluster-admin can do anything; system:masters has it.
		clusterRole("cluster-admin",
			rule("*").groups("*").resources("*"),
			rule("*").urls("*"),
		),
		partOf("admin", aggregated("edit", "edit")),
		// system:aggregate-to-admin is what admin has beyond edit: granting permissions in the namespace.
		partOf("admin", clusterRole("system:aggregate-to-admin",
			rule("create").groups("authorization.k8s.io").resources("localsubjectaccessreviews"),
			rule(readWrite...).groups("rbac.authorization.k8s.io").resources("rolebindings", "roles"),
		)),
		// system:aggregate-to-edit is every user-level write in a namespace, but not the system's
		// resources (the /status subresources, quotas, limits).
		partOf("edit", clusterRole("system:aggregate-to-edit",
			rule(read...).groups(core).resources(
				"pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"),
			rule("impersonate").groups(core).resources("serviceaccounts"),
			rule(write...).groups(core).resources("pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"),
			rule("create").groups(core).resources("pods/eviction"),
			rule(write...).groups(core).resources(
				"configmaps", "persistentvolumeclaims", "replicationcontrollers",
				"replicationcontrollers/scale", "secrets", "serviceaccounts", "services", "services/proxy"),
			rule("create").groups(core).resources("serviceaccounts/token"),
			rule(write...).groups(core, "events.k8s.io").resources("events"),
			rule(write...).groups("apps").resources(
				"daemonsets", "deployments", "deployments/rollback", "deployments/scale", "replicasets",
				"replicasets/scale", "statefulsets", "statefulsets/scale"),
			rule(write...).groups("autoscaling").resources("horizontalpodautoscalers"),
			rule(write...).groups("batch").resources("cronjobs", "jobs"),
			rule(write...).groups("extensions").resources(
				"daemonsets", "deployments", "deployments/rollback", "deployments/scale", "ingresses",
				"networkpolicies", "replicasets", "replicasets/scale", "replicationcontrollers/scale"),
			rule(write...).groups("policy").resources("poddisruptionbudgets"),
			rule(write...).groups("networking.k8s.io").resources("ingresses", "networkpolicies"),
			rule(readWrite...).groups("coordination.k8s.io").resources("leases"),
			rule(write...).groups("resource.k8s.io").resources("resourceclaims", "resourceclaimtemplates"),
		)),
		// system:aggregate-to-view is reading what is not escalating (no secrets, no exec or proxy).
		partOf("view", clusterRole("system:aggregate-to-view",
			rule(read...).groups(core).resources(
				"configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "pods",
				"replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services",
				"services/status"),
			rule(read...).groups(core).resources(
				"bindings", "limitranges", "namespaces/status", "pods/log", "pods/status",
				"replicationcontrollers/status", "resourcequotas", "resourcequotas/status"),
			rule(read...).groups(core).resources("namespaces"),
			rule(read...).groups(core, "events.k8s.io").resources("events"),
			rule(read...).groups("discovery.k8s.io").resources("endpointslices"),
			rule(read...).groups("apps").resources(
				"controllerrevisions", "daemonsets", "daemonsets/status", "deployments", "deployments/scale",
				"deployments/status", "replicasets", "replicasets/scale", "replicasets/status", "statefulsets",
				"statefulsets/scale", "statefulsets/status"),
			rule(read...).groups("autoscaling").resources("horizontalpodautoscalers", "horizontalpodautoscalers/status"),
			rule(read...).groups("batch").resources("cronjobs", "cronjobs/status", "jobs", "jobs/status"),
			rule(read...).groups("extensions").resources(
				"daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status",
				"ingresses", "ingresses/status", "networkpolicies", "replicasets", "replicasets/scale",
				"replicasets/status", "replicationcontrollers/scale"),
			rule(read...).groups("policy").resources("poddisruptionbudgets", "poddisruptionbudgets/status"),
			rule(read...).groups("networking.k8s.io").resources("ingresses", "ingresses/status", "networkpolicies"),
			rule(read...).groups("resource.k8s.io").resources(
				"resourceclaims", "resourceclaims/status", "resourceclaimtemplates"),
		)),
		// system:auth-delegator lets a server delegate authentication and authorization to the API server.
		clusterRole("system:auth-delegator",
			rule("create").groups("authentication.k8s.io").resources("tokenreviews"),
			rule("create").groups("authorization.k8s.io").resources("subjectaccessreviews"),
		),
		// system:basic-user lets every user learn who they are and what they may do.
		clusterRole("system:basic-user",
			rule("create").groups("authorization.k8s.io").resources("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
			rule("create").groups("authentication.k8s.io").resources("selfsubjectreviews"),
		),
		// The CSR approver approves a node client certificate for a requester with :nodeclient
		// (a joining node's bootstrap token), and a node's renewal of its own with :selfnodeclient.
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:nodeclient",
			rule("create").groups("certificates.k8s.io").resources("certificatesigningrequests/nodeclient"),
		),
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
			rule("create").groups("certificates.k8s.io").resources("certificatesigningrequests/selfnodeclient"),
		),
		// The *-approver roles approve CSRs for one built-in signer each; unbound.
		clusterRole("system:certificates.k8s.io:kube-apiserver-client-approver",
			rule("approve").groups("certificates.k8s.io").resources("signers").names("kubernetes.io/kube-apiserver-client"),
		),
		clusterRole("system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
			rule("approve").groups("certificates.k8s.io").resources("signers").names("kubernetes.io/kube-apiserver-client-kubelet"),
		),
		clusterRole("system:certificates.k8s.io:kubelet-serving-approver",
			rule("approve").groups("certificates.k8s.io").resources("signers").names("kubernetes.io/kubelet-serving"),
		),
		clusterRole("system:certificates.k8s.io:legacy-unknown-approver",
			rule("approve").groups("certificates.k8s.io").resources("signers").names("kubernetes.io/legacy-unknown"),
		),
		// system:cluster-trust-bundle-discovery reads ClusterTrustBundles; every ServiceAccount has it.
		clusterRole("system:cluster-trust-bundle-discovery",
			rule(read...).groups("certificates.k8s.io").resources("clustertrustbundles"),
		),
		// system:discovery is what a client needs to negotiate: health, version, API discovery and OpenAPI.
		clusterRole("system:discovery",
			rule("get").urls("/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez",
				"/openapi", "/openapi/*", "/readyz", "/version", "/version/"),
		),
		// system:heapster is the old metrics collector's read access; unbound.
		clusterRole("system:heapster",
			rule(read...).groups(core).resources("events", "namespaces", "nodes", "pods"),
			rule(read...).groups("extensions").resources("deployments"),
		),
		// system:kube-aggregator sees the services APIServices point to.
		clusterRole("system:kube-aggregator",
			rule(read...).groups(core).resources("endpoints", "services"),
		),
		// system:kube-controller-manager is the controller manager's own identity: it builds the
		// shared informers (list/watch everything) and the controllers' ServiceAccount credentials.
		clusterRole("system:kube-controller-manager",
			recordEvents(),
			rule("create").groups("coordination.k8s.io").resources("leases"),
			rule("get", "update").groups("coordination.k8s.io").resources("leases").names("kube-controller-manager"),
			rule("create").groups(core).resources("secrets", "serviceaccounts"),
			rule("delete").groups(core).resources("secrets"),
			rule("get").groups(core).resources("configmaps", "namespaces", "secrets", "serviceaccounts"),
			rule("update").groups(core).resources("secrets", "serviceaccounts"),
			rule("create").groups("authentication.k8s.io").resources("tokenreviews"),
			rule("create").groups("authorization.k8s.io").resources("subjectaccessreviews"),
			rule("list", "watch").groups("*").resources("*"),
			rule("create").groups(core).resources("serviceaccounts/token"),
		),
		// system:kube-dns watches what DNS serves.
		clusterRole("system:kube-dns",
			rule("list", "watch").groups(core).resources("endpoints", "services"),
		),
		// system:kube-scheduler is everything scheduling reads and the binding it writes.
		clusterRole("system:kube-scheduler",
			recordEvents(),
			rule("create").groups("coordination.k8s.io").resources("leases"),
			rule("get", "list", "update", "watch").groups("coordination.k8s.io").resources("leases").names("kube-scheduler"),
			rule(readWrite...).groups("coordination.k8s.io").resources("leasecandidates"),
			rule(read...).groups(core).resources("nodes"),
			rule("delete", "get", "list", "watch").groups(core).resources("pods"),
			rule("create").groups(core).resources("bindings", "pods/binding"),
			rule("patch", "update").groups(core).resources("pods/status"),
			rule(read...).groups(core).resources("replicationcontrollers", "services"),
			rule(read...).groups("apps", "extensions").resources("replicasets"),
			rule(read...).groups("apps").resources("statefulsets"),
			rule(read...).groups("policy").resources("poddisruptionbudgets"),
			rule(read...).groups(core).resources("persistentvolumeclaims", "persistentvolumes"),
			rule("create").groups("authentication.k8s.io").resources("tokenreviews"),
			rule("create").groups("authorization.k8s.io").resources("subjectaccessreviews"),
			rule(read...).groups("storage.k8s.io").resources("csinodes"),
			rule(read...).groups("storage.k8s.io").resources("volumeattachments"),
			rule(read...).groups(core).resources("namespaces"),
			rule(read...).groups("storage.k8s.io").resources("csidrivers"),
			rule(read...).groups("storage.k8s.io").resources("csistoragecapacities"),
			rule(read...).groups("resource.k8s.io").resources("deviceclasses"),
			rule(readUpdate...).groups("resource.k8s.io").resources("resourceclaims"),
			rule(readUpdate...).groups("resource.k8s.io").resources("resourceclaims/status"),
			rule("update").groups(core).resources("pods/finalizers"),
			rule(read...).groups("resource.k8s.io").resources("resourceslices"),
			rule("create", "delete").groups("resource.k8s.io").resources("resourceclaims"),
			rule(read...).groups("resource.k8s.io").resources("devicetaintrules"),
			rule("patch", "update").groups("resource.k8s.io").resources("resourceclaims/binding"),
		),
		// system:kubelet-api-admin is full access to the kubelet's API.
		clusterRole("system:kubelet-api-admin",
			rule(read...).groups(core).resources("nodes"),
			rule("proxy").groups(core).resources("nodes"),
			rule("*").groups(core).resources("nodes/log", "nodes/metrics", "nodes/proxy", "nodes/stats"),
			rule("*").groups(core).resources("nodes/configz", "nodes/healthz", "nodes/pods"),
		),
		// system:monitoring reads the metrics and health endpoints, the individual health checks included.
		clusterRole("system:monitoring",
			rule("get").urls("/flagz", "/healthz", "/healthz/*", "/livez", "/livez/*",
				"/metrics", "/metrics/slis", "/readyz", "/readyz/*", "/statusz"),
			rule("get").groups(core).resources("nodes/metrics"),
		),
		// system:node is NodeRules; since the Node authorizer it is bound to no one (its binding has no subjects).
		{ObjectMeta: bootstrapMeta("", "system:node"), Rules: NodeRules()},
		// system:node-bootstrapper is what a joining node needs: to request its client certificate.
		clusterRole("system:node-bootstrapper",
			rule("create", "get", "list", "watch").groups("certificates.k8s.io").resources("certificatesigningrequests"),
		),
		// system:node-problem-detector reports node conditions; unbound.
		clusterRole("system:node-problem-detector",
			rule("get").groups(core).resources("nodes"),
			rule("patch").groups(core).resources("nodes/status"),
			recordEvents(),
		),
		// system:node-proxier is the service proxy's (kube-proxy's) view of services and endpoints.
		clusterRole("system:node-proxier",
			rule("list", "watch").groups(core).resources("endpoints", "services"),
			rule(read...).groups(core).resources("nodes"),
			recordEvents(),
			rule("list", "watch").groups("networking.k8s.io").resources("servicecidrs"),
			rule("list", "watch").groups("discovery.k8s.io").resources("endpointslices"),
		),
		// system:persistent-volume-provisioner is an external volume provisioner's; unbound.
		clusterRole("system:persistent-volume-provisioner",
			rule("create", "delete", "get", "list", "watch").groups(core).resources("persistentvolumes"),
			rule("get", "list", "update", "watch").groups(core).resources("persistentvolumeclaims"),
			rule(read...).groups("storage.k8s.io").resources("storageclasses"),
			rule("watch").groups(core).resources("events"),
			recordEvents(),
		),
		// system:public-info-viewer is what even an anonymous client may read: health and version.
		clusterRole("system:public-info-viewer",
			rule("get").urls("/healthz", "/livez", "/readyz", "/version", "/version/"),
		),
		// system:service-account-issuer-discovery serves the ServiceAccount issuer's OIDC discovery documents
		// (with and without a trailing slash, for clients generated from old OpenAPI).
		clusterRole("system:service-account-issuer-discovery",
			rule("get").urls("/.well-known/openid-configuration", "/.well-known/openid-configuration/",
				"/openid/v1/jwks", "/openid/v1/jwks/"),
		),
		// system:volume-scheduler binds volumes for the scheduler.
		clusterRole("system:volume-scheduler",
			rule(readUpdate...).groups(core).resources("persistentvolumes"),
			rule(read...).groups("storage.k8s.io").resources("storageclasses"),
			rule(readUpdate...).groups(core).resources("persistentvolumeclaims"),
		),
		partOf("edit", aggregated("view", "view")),
	}
}

// NodeRules is what a kubelet may do: the rules of ClusterRole system:node, which the Node
// authorizer grants each node, restricted to the objects related to that node (and the
// NodeRestriction admission plugin to its own Node and pods).
func NodeRules() []rbacv1.PolicyRule {
	return rules(
		rule("create").groups("authentication.k8s.io").resources("tokenreviews"),
		rule("create").groups("authorization.k8s.io").resources("localsubjectaccessreviews", "subjectaccessreviews"),
		rule(read...).groups(core).resources("services"),
		rule("create", "get", "list", "watch").groups(core).resources("nodes"),
		rule("patch", "update").groups(core).resources("nodes/status"),
		rule("patch", "update").groups(core).resources("nodes"),
		recordEvents(),
		rule(read...).groups(core).resources("pods"),
		rule("create", "delete").groups(core).resources("pods"),
		rule("patch", "update").groups(core).resources("pods/status"),
		rule("create").groups(core).resources("pods/eviction"),
		rule(read...).groups(core).resources("configmaps", "secrets"),
		rule("get").groups(core).resources("persistentvolumeclaims", "persistentvolumes"),
		rule("get").groups(core).resources("endpoints"),
		rule("create", "get", "list", "watch").groups("certificates.k8s.io").resources("certificatesigningrequests"),
		rule("create", "delete", "get", "patch", "update").groups("coordination.k8s.io").resources("leases"),
		rule("get").groups("storage.k8s.io").resources("volumeattachments"),
		rule("create").groups(core).resources("serviceaccounts/token"),
		rule("get", "patch", "update").groups(core).resources("persistentvolumeclaims/status"),
		rule(read...).groups("storage.k8s.io").resources("csidrivers"),
		rule("create", "delete", "get", "patch", "update").groups("storage.k8s.io").resources("csinodes"),
		rule(read...).groups("node.k8s.io").resources("runtimeclasses"),
		rule("get").groups("resource.k8s.io").resources("resourceclaims"),
		rule("deletecollection").groups("resource.k8s.io").resources("resourceslices"),
		rule(read...).groups("certificates.k8s.io").resources("clustertrustbundles"),
		rule("get").groups(core).resources("serviceaccounts"),
		rule("create", "get", "list", "watch").groups("certificates.k8s.io").resources("podcertificaterequests"),
	)
}

// ClusterRoleBindings is upstream's default ClusterRoleBindings, but for the controllers'
// (ControllerRoleBindings).
func ClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	return []rbacv1.ClusterRoleBinding{
		clusterRoleBinding("cluster-admin", group(authuser.SystemPrivilegedGroup)),
		clusterRoleBinding("system:basic-user", group(authuser.AllAuthenticated)),
		clusterRoleBinding("system:cluster-trust-bundle-discovery", group(serviceaccount.AllServiceAccountsGroup)),
		clusterRoleBinding("system:discovery", group(authuser.AllAuthenticated)),
		clusterRoleBinding("system:kube-controller-manager", user(authuser.KubeControllerManager)),
		clusterRoleBinding("system:kube-dns", serviceAccount("kube-system", "kube-dns")),
		clusterRoleBinding("system:kube-scheduler", user(authuser.KubeScheduler)),
		clusterRoleBinding("system:monitoring", group(authuser.MonitoringGroup)),
		// Kept with no subjects since the Node authorizer took over (1.8), so that nodes
		// are authorized by it alone; a cluster that had the subject keeps it.
		clusterRoleBinding("system:node"),
		clusterRoleBinding("system:node-proxier", user(authuser.KubeProxy)),
		clusterRoleBinding("system:public-info-viewer", group(authuser.AllAuthenticated), group(authuser.AllUnauthenticated)),
		// Every workload may read the OIDC discovery of the issuer of its own token.
		clusterRoleBinding("system:service-account-issuer-discovery", group(serviceaccount.AllServiceAccountsGroup)),
		clusterRoleBinding("system:volume-scheduler", user(authuser.KubeScheduler)),
	}
}
