//go:build tools

// Package upstream pins the upstream control-plane commands `make scale-upstream` builds;
// nothing here is compiled into skiff.
package upstream

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
