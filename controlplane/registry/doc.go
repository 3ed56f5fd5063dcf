// Package registry holds skiff's per-resource strategies: how each served resource is
// defaulted on create, validated, which fields a status update may touch, how it is deleted
// (gracefully for pods on a node), which subresources it has (status, scale, binding, token)
// and what `kubectl get` prints for it. Each resource is a genericregistry.Store over the
// storage that controlplane/storage configures.
//
// Storage builds every store; the group versions it serves are the rows of scheme.APIs (the
// API server refuses to start when the two disagree). Files are named by API group
// (networking.go, discovery.go, coordination.go, authentication.go, ...); the core group,
// which is most of the API, has a file per resource family (core.go, services.go,
// namespaces.go, pod subresources in podlog.go, podexec.go, ...).
package registry
