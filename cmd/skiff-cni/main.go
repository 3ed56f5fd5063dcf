// Command skiff-cni is the CNI plugin containerd runs for every pod sandbox on a skiff node.
// The skiff binary is the same plugin when started by this name; this one is small.
package main

import "github.com/skiff-sh/skiff/cni"

func main() { cni.PluginMain() }
