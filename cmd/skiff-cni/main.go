// Command skiff-cni is the CNI plugin containerd runs for every pod sandbox on a skiff node.
package main

import (
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/skiff-sh/skiff/cni"
)

func main() {
	if filepath.Base(os.Args[0]) == "loopback" {
		skel.PluginMainFuncs(skel.CNIFuncs{Add: cni.LoopbackAdd, Del: cni.LoopbackDel, Check: cni.LoopbackCheck}, version.All, "skiff-cni as loopback")
		return
	}
	skel.PluginMainFuncs(skel.CNIFuncs{Add: cni.Add, Del: cni.Del, Check: cni.Check}, version.All, "skiff-cni: routed pod networking for skiff")
}
