// Package apiserver assembles skiff's Kubernetes API server on k8s.io/apiserver's generic
// server: the PKI, embedded or external etcd, the storage factory with upstream's key layout,
// the request chain (authentication by client certificate or service-account token, then
// authorization, admission, validation and storage), the served API groups, OpenAPI, and the
// bootstrap objects every cluster has (the built-in namespaces and the `kubernetes` Service).
//
// Callers fill Options and call Run, which blocks until ctx is cancelled.
package apiserver
