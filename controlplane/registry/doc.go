// Package registry holds skiff's per-resource strategies: how each served resource is
// defaulted on create, validated, which fields a status update may touch, how it is deleted
// (gracefully for pods on a node), which subresources it has (status, scale, binding, token)
// and what `kubectl get` prints for it. Each resource is a genericregistry.Store over the
// storage that controlplane/storage configures.
//
// The caller builds a Registry with New and installs Registry.Groups into the API server.
package registry
