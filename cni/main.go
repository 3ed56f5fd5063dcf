package cni

import (
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"
)

// PluginNames are the names containerd runs the plugin by: skiff-cni for pod sandboxes and
// loopback for their lo. The skiff binary answers to both (a multi-call binary, as k3s's), so
// a plain `go build ./cmd/skiff` is a complete node.
var PluginNames = []string{"skiff-cni", "loopback"}

// IsPlugin says whether the process was started as the CNI plugin.
func IsPlugin() bool {
	base := filepath.Base(os.Args[0])
	for _, n := range PluginNames {
		if base == n {
			return true
		}
	}
	return false
}

// PluginMain runs the CNI plugin by the name it was started as, and exits.
func PluginMain() {
	if filepath.Base(os.Args[0]) == "loopback" {
		skel.PluginMainFuncs(skel.CNIFuncs{Add: LoopbackAdd, Del: LoopbackDel, Check: LoopbackCheck}, version.All, "skiff-cni as loopback")
		return
	}
	skel.PluginMainFuncs(skel.CNIFuncs{Add: Add, Del: Del, Check: Check}, version.All, "skiff-cni: routed pod networking for skiff")
}
