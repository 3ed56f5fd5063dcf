// Package nodeauth is skiff's Node authorizer, with the semantics of upstream's: a kubelet,
// authenticated as system:node:<name> in group system:nodes, may read only the Secrets,
// ConfigMaps, PersistentVolumeClaims, PersistentVolumes, ServiceAccounts (and their tokens) and
// ResourceClaims that pods bound to it reference, only its own Lease and CSINode, only its
// own Node and the pods bound to it; everything else it may do is given by static rules.
//
// Upstream keeps a graph of these relationships fed by informers. Skiff instead answers each
// request from the pods bound to the node (an informer indexed by spec.nodeName) and, for
// volumes, the claims they use: a cluster this size has few pods per node, and there is no
// second copy of the state to keep in step. An informer lags the writes it shows (a binding
// reaches the node's own watch and the authorizer's informer in no fixed order), so where the
// informer finds no relationship the authorizer reads the node's pods consistently before it
// refuses (LiveSource): a node is never refused a pod bound to it, and only misses pay.
//
// Writes a node is allowed here (mirror pods, pod status, evictions, its Node, leases and
// CSINodes on create, token requests) are narrowed further by the NodeRestriction admission
// plugin, which sees the objects.
package nodeauth
