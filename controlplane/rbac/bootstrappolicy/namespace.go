package bootstrappolicy

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authuser "k8s.io/apiserver/pkg/authentication/user"
)

// NamespaceRoles is upstream's default Roles, by namespace (kube-system and kube-public).
func NamespaceRoles() map[string][]rbacv1.Role {
	const system, public = metav1.NamespaceSystem, metav1.NamespacePublic
	return map[string][]rbacv1.Role{
		system: {
			// Read the ConfigMap where the API server publishes its client-CA and
			// request-header configuration, for servers that delegate authentication.
			role(system, "extension-apiserver-authentication-reader",
				rule(read...).groups(core).resources("configmaps").names("extension-apiserver-authentication"),
			),
			// Leader election of the controller manager and of the scheduler.
			role(system, "system::leader-locking-kube-controller-manager",
				rule("create", "get", "list", "update", "watch").groups("coordination.k8s.io").resources("leases"),
				rule("create", "get", "list", "update", "watch").groups("coordination.k8s.io").resources("leasecandidates"),
			),
			role(system, "system::leader-locking-kube-scheduler",
				rule("create", "get", "list", "update", "watch").groups("coordination.k8s.io").resources("leases"),
				rule("create", "get", "list", "update", "watch").groups("coordination.k8s.io").resources("leasecandidates"),
			),
			// The bootstrap signer reads the bootstrap-token Secrets to sign cluster-info.
			role(system, controllerPrefix+"bootstrap-signer",
				rule(read...).groups(core).resources("secrets"),
			),
			// Deprecated since 1.10 upstream, still created.
			role(system, controllerPrefix+"cloud-provider",
				rule("create", "get", "list", "watch").groups(core).resources("configmaps"),
			),
			// The token cleaner deletes expired bootstrap-token Secrets.
			role(system, controllerPrefix+"token-cleaner",
				rule("delete", "get", "list", "watch").groups(core).resources("secrets"),
				recordEvents(),
			),
		},
		public: {
			// The bootstrap signer writes its signatures into ConfigMap kube-public/cluster-info.
			role(public, controllerPrefix+"bootstrap-signer",
				rule(read...).groups(core).resources("configmaps"),
				rule("update").groups(core).resources("configmaps").names("cluster-info"),
				recordEvents(),
			),
		},
	}
}

// NamespaceRoleBindings is upstream's default RoleBindings, by namespace.
func NamespaceRoleBindings() map[string][]rbacv1.RoleBinding {
	const system, public = metav1.NamespaceSystem, metav1.NamespacePublic
	same := func(namespace, name string, subjects ...rbacv1.Subject) rbacv1.RoleBinding {
		return roleBinding(namespace, name, name, subjects...)
	}
	return map[string][]rbacv1.RoleBinding{
		system: {
			roleBinding(system, "system::extension-apiserver-authentication-reader", "extension-apiserver-authentication-reader",
				user(authuser.KubeControllerManager), user(authuser.KubeScheduler)),
			same(system, "system::leader-locking-kube-controller-manager",
				user(authuser.KubeControllerManager),
				serviceAccount(system, "kube-controller-manager"),
				serviceAccount(system, "leader-election-controller")),
			same(system, "system::leader-locking-kube-scheduler",
				user(authuser.KubeScheduler), serviceAccount(system, "kube-scheduler")),
			same(system, controllerPrefix+"bootstrap-signer", serviceAccount(system, "bootstrap-signer")),
			same(system, controllerPrefix+"cloud-provider", serviceAccount(system, "cloud-provider")),
			same(system, controllerPrefix+"token-cleaner", serviceAccount(system, "token-cleaner")),
		},
		public: {
			same(public, controllerPrefix+"bootstrap-signer", serviceAccount(system, "bootstrap-signer")),
		},
	}
}
