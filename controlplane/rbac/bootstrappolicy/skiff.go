package bootstrappolicy

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authuser "k8s.io/apiserver/pkg/authentication/user"

	"github.com/skiff-sh/skiff/internal/bootstraptoken"
)

// Skiff's additions to the default policy, for what its components do that upstream's
// do not (or do under another identity). Reconcile writes them with the defaults, with
// the same label and autoupdate annotation.

const (
	// nodesGroup is every node's group (system:node:<name> is its user).
	nodesGroup = authuser.NodesGroup
	// skiffEndpointsRole is the EndpointSlice controller's role beyond upstream's.
	skiffEndpointsRole = "skiff:controller:endpointslice-controller"
	// skiffNodePolicyRole is what each agent's NetworkPolicy enforcement reads.
	skiffNodePolicyRole = "skiff:node-policy"
	// skiffClusterDNSRole is the cluster DNS controller's (kube-dns and its slices).
	skiffClusterDNSRole = "system:controller:cluster-dns-controller"
	// skiffLBIPAMRole is the LoadBalancer address allocator's.
	skiffLBIPAMRole = "system:controller:loadbalancer-ipam-controller"
	// skiffLocalPathNodeRole is what each agent's local-path cleanup reads.
	skiffLocalPathNodeRole = "skiff:local-path-node"
)

// SkiffClusterRoles is skiff's own ClusterRoles.
func SkiffClusterRoles() []rbacv1.ClusterRole {
	return []rbacv1.ClusterRole{
		// skiff's EndpointSlice controller also keeps the v1 Endpoints of each service,
		// the job of upstream's endpoint-controller, whose role it does not have.
		clusterRole(skiffEndpointsRole,
			rule("create", "update", "delete", "get", "list", "watch").groups(core).resources("endpoints"),
		),
		// Each agent enforces NetworkPolicy and ClusterNetworkPolicy for its pods (Calico's
		// and Cilium's agents read the same): every policy, every namespace's labels and every pod's labels and
		// addresses, since a peer may be any pod. Read-only; the Node authorizer still keeps
		// a node from any pod's Secrets and from writing other nodes' pods.
		clusterRole(skiffNodePolicyRole,
			rule(read...).groups(core).resources("pods", "namespaces"),
			rule(read...).groups("networking.k8s.io").resources("networkpolicies"),
			rule(read...).groups("policy.networking.k8s.io").resources("clusternetworkpolicies"),
		),
		// The cluster DNS controller keeps kube-system/kube-dns and one EndpointSlice per
		// node from the nodes' dns.skiff.sh/address annotations.
		clusterRole(skiffClusterDNSRole,
			rule(read...).groups(core).resources("nodes"),
			rule(append([]string{"create", "update"}, read...)...).groups(core).resources("services"),
			rule(append([]string{"create", "update", "delete"}, read...)...).groups("discovery.k8s.io").resources("endpointslices"),
			recordEvents(),
		),
		// Each agent removes the data of its local-path volumes once they are deleted: it
		// asks for each volume by name, which the Node authorizer cannot allow for a volume
		// that no longer exists (NotFound is the answer it needs). Volumes hold no secrets.
		clusterRole(skiffLocalPathNodeRole,
			rule("get").groups(core).resources("persistentvolumes"),
		),
		// metrics.k8s.io is served by skiff, not an add-on: the role metrics-server's
		// manifest installs, aggregated into view, edit and admin, so whoever can read pods
		// can `kubectl top` them.
		partOf("admin", partOf("edit", partOf("view", clusterRole("system:aggregated-metrics-reader",
			rule(read...).groups("metrics.k8s.io").resources("pods", "nodes"),
		)))),
		// The LoadBalancer address allocator writes Services' status.loadBalancer.
		clusterRole(skiffLBIPAMRole,
			rule(read...).groups(core).resources("services"),
			rule("update", "patch").groups(core).resources("services/status"),
			rule(read...).groups(core).resources("configmaps"),
			recordEvents(),
		),
	}
}

// SkiffClusterRoleBindings is skiff's own ClusterRoleBindings.
func SkiffClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	return []rbacv1.ClusterRoleBinding{
		// Each skiff agent runs the eBPF service proxy, kube-proxy's job, as its node's
		// identity rather than as system:kube-proxy.
		namedClusterRoleBinding("skiff:node-proxier", "system:node-proxier", group(nodesGroup)),
		// A joining agent authenticates with a bootstrap token (group
		// system:bootstrappers:skiff:default-node-token) to request its client
		// certificate, which the CSR approver approves for this group; a node renews its
		// own with selfnodeclient. As kubeadm binds them for its token group.
		namedClusterRoleBinding("skiff:node-bootstrapper", "system:node-bootstrapper", group(bootstraptoken.NodeGroup)),
		namedClusterRoleBinding("skiff:node-autoapprove-bootstrap",
			"system:certificates.k8s.io:certificatesigningrequests:nodeclient", group(bootstraptoken.NodeGroup)),
		namedClusterRoleBinding("skiff:node-autoapprove-certificate-rotation",
			"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", group(nodesGroup)),
		// skiff's CSR approver also approves nodes' serving certificates (upstream leaves
		// them to an add-on); admission requires "approve" on that signer.
		namedClusterRoleBinding("skiff:certificate-controller:kubelet-serving-approver",
			"system:certificates.k8s.io:kubelet-serving-approver", serviceAccount(metav1.NamespaceSystem, "certificate-controller")),
		// See SkiffClusterRoles.
		namedClusterRoleBinding(skiffEndpointsRole, skiffEndpointsRole,
			serviceAccount(metav1.NamespaceSystem, "endpointslice-controller")),
		namedClusterRoleBinding(skiffNodePolicyRole, skiffNodePolicyRole, group(nodesGroup)),
		namedClusterRoleBinding(skiffLocalPathNodeRole, skiffLocalPathNodeRole, group(nodesGroup)),
		namedClusterRoleBinding(skiffClusterDNSRole, skiffClusterDNSRole, serviceAccount(metav1.NamespaceSystem, "cluster-dns-controller")),
		namedClusterRoleBinding(skiffLBIPAMRole, skiffLBIPAMRole, serviceAccount(metav1.NamespaceSystem, "loadbalancer-ipam-controller")),
	}
}

// SkiffRoles is skiff's own Roles, by namespace.
func SkiffRoles() map[string][]rbacv1.Role {
	return map[string][]rbacv1.Role{
		metav1.NamespaceSystem: {
			// Each agent's BGP speaker reads its configuration, ConfigMap
			// kube-system/skiff-bgp, and the peers' TCP-MD5 passwords it names, in Secret
			// bgp-secrets; an operator keeping them in other Secrets adds their names
			// (Reconcile adds back what is missing, never removes).
			role(metav1.NamespaceSystem, "skiff:bgp-speaker",
				rule(read...).groups(core).resources("configmaps").names("skiff-bgp"),
				rule("get").groups(core).resources("secrets").names("bgp-secrets"),
			),
		},
	}
}

// SkiffRoleBindings is skiff's own RoleBindings, by namespace.
func SkiffRoleBindings() map[string][]rbacv1.RoleBinding {
	return map[string][]rbacv1.RoleBinding{
		metav1.NamespaceSystem: {
			// The BGP speaker runs in the agent, as its node.
			roleBinding(metav1.NamespaceSystem, "skiff:bgp-speaker", "skiff:bgp-speaker", group(nodesGroup)),
		},
	}
}
