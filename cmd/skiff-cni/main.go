// Command skiff-cni is the CNI plugin containerd runs for every pod sandbox on a skiff node.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/skiff-sh/skiff/cni"
)

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{Add: cni.Add, Del: cni.Del, Check: cni.Check}, version.All, "skiff-cni: routed pod networking for skiff")
}
