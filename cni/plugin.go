package cni

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/cni/protocol"
	"github.com/skiff-sh/skiff/internal/nldump"
)

// inNetns runs f on a thread switched into the network namespace at path (containernetworking's
// ns: the thread is switched back, or discarded if that fails).
func inNetns(path string, f func() error) error {
	return ns.WithNetNSPath(path, func(ns.NetNS) error { return f() })
}

func k8sArgs(args string) (K8sArgs, error) {
	var a K8sArgs
	if err := types.LoadArgs(args, &a); err != nil {
		return a, fmt.Errorf("skiff-cni: bad CNI_ARGS: %w", err)
	}
	return a, nil
}

// Add implements CNI ADD.
func Add(args *skel.CmdArgs) error {
	conf, err := ParseConfig(args.StdinData)
	if err != nil {
		return err
	}
	result, err := add(conf, args)
	if err != nil {
		return err
	}
	return types.PrintResult(result, conf.CNIVersion)
}

func add(conf *NetConf, args *skel.CmdArgs) (*current.Result, error) {
	if args.Netns == "" || args.IfName == "" || args.ContainerID == "" {
		return nil, errors.New("skiff-cni: ADD needs CNI_CONTAINERID, CNI_NETNS and CNI_IFNAME")
	}
	ka, err := k8sArgs(args.Args)
	if err != nil {
		return nil, err
	}
	agent := newAgentClient(conf.AgentSocket)
	var resp protocol.AddResponse
	err = agent.call(protocol.AddPath, protocol.AddRequest{ContainerID: args.ContainerID, Netns: args.Netns, IfName: args.IfName,
		PodNamespace: string(ka.K8S_POD_NAMESPACE), PodName: string(ka.K8S_POD_NAME), PodUID: string(ka.K8S_POD_UID)}, &resp)
	if err != nil {
		return nil, err
	}
	addrs, err := podAddrs(resp)
	if err != nil {
		return nil, err
	}
	mtu := conf.MTU
	if mtu == 0 {
		mtu = resp.MTU
	}
	result, err := setUp(args, addrs, mtu)
	if err == nil {
		// The pod's network policy goes on its veth before ADD returns, so before any of its
		// containers runs (the agent writes the policy first, then attaches).
		err = agent.call(protocol.AttachPath, protocol.AttachRequest{ContainerID: args.ContainerID, HostIf: HostVethName(args.ContainerID)}, nil)
	}
	if err != nil {
		// Leave nothing behind: the runtime will retry ADD from scratch.
		_ = tearDown(args.ContainerID)
		_ = agent.call(protocol.DelPath, protocol.DelRequest{ContainerID: args.ContainerID, HostIf: HostVethName(args.ContainerID)}, nil)
		return nil, err
	}
	return result, nil
}

// podAddr is one of the pod's addresses and the link-local gateway of its family.
type podAddr struct{ ip, gw net.IP }

func (a podAddr) ipv6() bool { return a.ip.To4() == nil }

// hostNet is the address as a one-address network: a /32 or a /128.
func hostNet(ip net.IP) *net.IPNet {
	if v4 := ip.To4(); v4 != nil {
		return &net.IPNet{IP: v4, Mask: net.CIDRMask(32, 32)}
	}
	return &net.IPNet{IP: ip, Mask: net.CIDRMask(128, 128)}
}

// podAddrs reads the agent's answer: the pod's addresses (IPs, or IP alone from an older
// agent), each with its family's gateway.
func podAddrs(resp protocol.AddResponse) ([]podAddr, error) {
	ips := resp.IPs
	if len(ips) == 0 {
		ips = []string{resp.IP}
	}
	var out []podAddr
	seen := map[bool]bool{}
	for _, s := range ips {
		ip := net.ParseIP(s)
		a := podAddr{ip: ip}
		switch {
		case ip == nil:
			return nil, fmt.Errorf("skiff-cni: node agent gave a bad address %q", s)
		case ip.To4() != nil:
			a.ip, a.gw = ip.To4(), net.ParseIP(resp.Gateway).To4()
		default:
			a.gw = net.ParseIP(resp.GatewayIPv6)
			if a.gw != nil && (a.gw.To4() != nil || !a.gw.IsLinkLocalUnicast()) {
				a.gw = nil
			}
		}
		if a.gw == nil {
			return nil, fmt.Errorf("skiff-cni: node agent gave address %s and no gateway of its family (gateway %q, gatewayIPv6 %q)", s, resp.Gateway, resp.GatewayIPv6)
		}
		if seen[a.ipv6()] {
			return nil, fmt.Errorf("skiff-cni: node agent gave two addresses of one family: %v", ips)
		}
		seen[a.ipv6()] = true
		out = append(out, a)
	}
	return out, nil
}

// setUp creates the veth pair and addresses both ends, in every family the pod has.
func setUp(args *skel.CmdArgs, addrs []podAddr, mtu int) (*current.Result, error) {
	hostName := HostVethName(args.ContainerID)
	tmpName := "t" + hostName[1:]
	target, err := ns.GetNS(args.Netns)
	if err != nil {
		return nil, fmt.Errorf("skiff-cni: open netns %s: %w", args.Netns, err)
	}
	defer target.Close()
	if old, err := netlink.LinkByName(hostName); err == nil {
		_ = netlink.LinkDel(old) // a half-done earlier ADD of the same sandbox
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostName, MTU: mtu}, PeerName: tmpName}
	if err := netlink.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("skiff-cni: create veth %s: %w", hostName, err)
	}
	host, err := netlink.LinkByName(hostName)
	if err != nil {
		return nil, err
	}
	peer, err := netlink.LinkByName(tmpName)
	if err != nil {
		return nil, err
	}
	if err := netlink.LinkSetNsFd(peer, int(target.Fd())); err != nil {
		return nil, fmt.Errorf("skiff-cni: move %s into %s: %w", tmpName, args.Netns, err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return nil, err
	}
	hostMAC := host.Attrs().HardwareAddr
	var podMAC net.HardwareAddr
	err = inNetns(args.Netns, func() error {
		l, err := netlink.LinkByName(tmpName)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetName(l, args.IfName); err != nil {
			return fmt.Errorf("rename to %s: %w", args.IfName, err)
		}
		for _, a := range addrs {
			addr := &netlink.Addr{IPNet: hostNet(a.ip)}
			if a.ipv6() {
				// No duplicate address detection: the pod's addresses are the node's to give,
				// and DAD would hold its first packets for a second or more.
				addr.Flags = unix.IFA_F_NODAD
			}
			if err := netlink.AddrAdd(l, addr); err != nil {
				return fmt.Errorf("address %s: %w", a.ip, err)
			}
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		if lo, err := netlink.LinkByName("lo"); err == nil {
			_ = netlink.LinkSetUp(lo)
		}
		for _, a := range addrs {
			// The gateway exists only as this neighbour entry: the host end answers for it.
			if err := netlink.NeighSet(&netlink.Neigh{LinkIndex: l.Attrs().Index, IP: a.gw, HardwareAddr: hostMAC,
				State: netlink.NUD_PERMANENT}); err != nil {
				return fmt.Errorf("gateway %s neighbour: %w", a.gw, err)
			}
			if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: hostNet(a.gw),
				Scope: netlink.SCOPE_LINK}); err != nil {
				return fmt.Errorf("gateway %s route: %w", a.gw, err)
			}
			if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: a.gw}); err != nil {
				return fmt.Errorf("default route via %s: %w", a.gw, err)
			}
		}
		podMAC = l.Attrs().HardwareAddr
		if l2, err := netlink.LinkByName(args.IfName); err == nil {
			podMAC = l2.Attrs().HardwareAddr
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("skiff-cni: set up %s in %s: %w", args.IfName, args.Netns, err)
	}
	for _, a := range addrs {
		if err := netlink.RouteReplace(&netlink.Route{LinkIndex: host.Attrs().Index, Dst: hostNet(a.ip),
			Scope: netlink.SCOPE_LINK}); err != nil {
			return nil, fmt.Errorf("skiff-cni: host route to %s: %w", a.ip, err)
		}
		if a.ipv6() {
			// The pod's IPv6 neighbour entry is pinned as its end pins the gateway's: no
			// neighbour discovery on either side, so nothing waits on it.
			if err := netlink.NeighSet(&netlink.Neigh{LinkIndex: host.Attrs().Index, IP: a.ip, HardwareAddr: podMAC,
				State: netlink.NUD_PERMANENT}); err != nil {
				return nil, fmt.Errorf("skiff-cni: neighbour %s on %s: %w", a.ip, hostName, err)
			}
		}
	}
	// Strict reverse-path filtering on the host end, as Calico sets on its workload
	// interfaces: a pod's packets must come from its own address (the /32 routed to this
	// veth), so a pod cannot spoof another's. proxy_arp lets the host answer for any address
	// the pod asks after. (IPv6 has no rp_filter: the network policy program on the veth
	// is where a pod's IPv6 source is checked.)
	for key, value := range map[string]string{"rp_filter": "1", "proxy_arp": "1"} {
		if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+hostName+"/"+key, []byte(value), 0o644); err != nil {
			return nil, fmt.Errorf("skiff-cni: %s on %s: %w", key, hostName, err)
		}
	}
	idx := 1
	result := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{
			{Name: hostName, Mac: hostMAC.String()},
			{Name: args.IfName, Mac: podMAC.String(), Sandbox: args.Netns},
		},
	}
	for _, a := range addrs {
		result.IPs = append(result.IPs, &current.IPConfig{Address: *hostNet(a.ip), Gateway: a.gw, Interface: &idx})
		def := net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}
		if a.ipv6() {
			def = net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
		}
		result.Routes = append(result.Routes, &types.Route{Dst: def, GW: a.gw})
	}
	return result, nil
}

// tearDown removes the host end (the kernel removes its peer and the host route with it).
func tearDown(containerID string) error {
	l, err := netlink.LinkByName(HostVethName(containerID))
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return netlink.LinkDel(l)
}

// Del implements CNI DEL: idempotent, and it succeeds when things are already gone.
func Del(args *skel.CmdArgs) error {
	conf, err := ParseConfig(args.StdinData)
	if err != nil {
		return err
	}
	if err := tearDown(args.ContainerID); err != nil {
		return fmt.Errorf("skiff-cni: remove veth: %w", err)
	}
	return newAgentClient(conf.AgentSocket).call(protocol.DelPath, protocol.DelRequest{ContainerID: args.ContainerID, HostIf: HostVethName(args.ContainerID)}, nil)
}

// Check implements CNI CHECK: the host end, its route and the pod's address must be there.
func Check(args *skel.CmdArgs) error {
	conf, err := ParseConfig(args.StdinData)
	if err != nil {
		return err
	}
	if conf.RawPrevResult == nil {
		return errors.New("skiff-cni: CHECK needs prevResult")
	}
	if err := version.ParsePrevResult(&conf.NetConf); err != nil {
		return err
	}
	prev, err := current.NewResultFromResult(conf.PrevResult)
	if err != nil {
		return err
	}
	if len(prev.IPs) == 0 {
		return errors.New("skiff-cni: prevResult has no address")
	}
	if _, err := netlink.LinkByName(HostVethName(args.ContainerID)); err != nil {
		return fmt.Errorf("skiff-cni: host veth %s: %w", HostVethName(args.ContainerID), err)
	}
	return inNetns(args.Netns, func() error {
		l, err := netlink.LinkByName(args.IfName)
		if err != nil {
			return fmt.Errorf("skiff-cni: %s in %s: %w", args.IfName, args.Netns, err)
		}
		addrs, err := nldump.Retry(func() ([]netlink.Addr, error) { return netlink.AddrList(l, netlink.FAMILY_ALL) })
		if err != nil {
			return err
		}
	want:
		for _, w := range prev.IPs {
			for _, a := range addrs {
				if a.IP.Equal(w.Address.IP) {
					continue want
				}
			}
			return fmt.Errorf("skiff-cni: %s lacks %s", args.IfName, w.Address.IP)
		}
		return nil
	})
}
