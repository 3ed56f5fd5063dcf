package cni

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
)

// LoopbackAdd brings up lo in the sandbox. containerd's CRI runs a plugin named "loopback" for
// every sandbox; skiff installs skiff-cni under that name too, so nodes need no extra package.
func LoopbackAdd(args *skel.CmdArgs) error {
	var conf types.NetConf
	if err := jsonUnmarshal(args.StdinData, &conf); err != nil {
		return fmt.Errorf("loopback: bad network configuration: %w", err)
	}
	err := inNetns(args.Netns, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	return types.PrintResult(&current.Result{CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{{Name: "lo", Sandbox: args.Netns}}}, conf.CNIVersion)
}

// LoopbackDel has nothing to undo: lo goes with the namespace.
func LoopbackDel(*skel.CmdArgs) error { return nil }

// LoopbackCheck accepts any state.
func LoopbackCheck(*skel.CmdArgs) error { return nil }
