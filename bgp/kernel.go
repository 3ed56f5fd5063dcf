package bgp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/internal/nldump"
)

// ProtoBGP marks the routes skiff installs (`ip route` shows "proto bgp"), so the agent finds
// and cleans up its own routes and leaves everyone else's alone.
const ProtoBGP = netlink.RouteProtocol(unix.RTPROT_BGP)

// Kernel installs routes in the main table of one network namespace.
type Kernel struct {
	// Handle is the namespace's netlink handle; nil means the calling thread's namespace.
	Handle *netlink.Handle
}

func (k Kernel) h() *netlink.Handle {
	if k.Handle != nil {
		return k.Handle
	}
	return &netlink.Handle{}
}

// Installed lists the skiff-owned (proto bgp) routes of the main table.
func (k Kernel) Installed() (Routes, error) {
	out := Routes{}
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := nldump.Retry(func() ([]netlink.Route, error) {
			return k.h().RouteListFiltered(family, &netlink.Route{Protocol: ProtoBGP, Table: unix.RT_TABLE_MAIN},
				netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
		})
		if err != nil {
			return nil, fmt.Errorf("list routes: %w", err)
		}
		for _, r := range rs {
			if r.Dst == nil {
				continue
			}
			prefix, ok := toPrefix(r.Dst)
			if !ok {
				continue
			}
			var hops []netip.Addr
			if a, ok := netip.AddrFromSlice(r.Gw); ok {
				hops = append(hops, k.zoned(a.Unmap(), r.LinkIndex))
			}
			for _, nh := range r.MultiPath {
				if a, ok := netip.AddrFromSlice(nh.Gw); ok {
					hops = append(hops, k.zoned(a.Unmap(), nh.LinkIndex))
				}
			}
			slices.SortFunc(hops, func(a, b netip.Addr) int { return a.Compare(b) })
			out[prefix] = hops
		}
	}
	return out, nil
}

// zoned gives a link-local gateway the name of the interface it is reached on, as PathOf
// names it, so installed routes compare equal to wanted ones.
func (k Kernel) zoned(gw netip.Addr, linkIndex int) netip.Addr {
	if !gw.Is6() || !gw.IsLinkLocalUnicast() || linkIndex == 0 {
		return gw
	}
	if l, err := k.h().LinkByIndex(linkIndex); err == nil {
		return gw.WithZone(l.Attrs().Name)
	}
	return gw
}

// gateway is a next hop as netlink takes it: the address, and for a link-local one (zoned
// with its interface) the interface's index.
func (k Kernel) gateway(h netip.Addr) (net.IP, int, error) {
	if h.Zone() == "" {
		return h.AsSlice(), 0, nil
	}
	l, err := k.h().LinkByName(h.Zone())
	if err != nil {
		return nil, 0, fmt.Errorf("next hop %s: %w", h, err)
	}
	return h.WithZone("").AsSlice(), l.Attrs().Index, nil
}

// Apply replaces or adds the routes in set and deletes those in del. Every change is tried;
// the errors are joined.
func (k Kernel) Apply(set Routes, del []netip.Prefix) error {
	var errs []error
	for prefix, hops := range set {
		r := &netlink.Route{Dst: toIPNet(prefix), Protocol: ProtoBGP, Table: unix.RT_TABLE_MAIN}
		var err error
		if len(hops) == 1 {
			r.Gw, r.LinkIndex, err = k.gateway(hops[0])
		} else {
			for _, h := range hops {
				nh := &netlink.NexthopInfo{}
				var herr error
				if nh.Gw, nh.LinkIndex, herr = k.gateway(h); herr != nil {
					err = herr
				}
				r.MultiPath = append(r.MultiPath, nh)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("route %s via %v: %w", prefix, hops, err))
			continue
		}
		if err := k.h().RouteReplace(r); err != nil {
			errs = append(errs, fmt.Errorf("route %s via %v: %w", prefix, hops, err))
		}
	}
	for _, prefix := range del {
		r := &netlink.Route{Dst: toIPNet(prefix), Protocol: ProtoBGP, Table: unix.RT_TABLE_MAIN}
		if err := k.h().RouteDel(r); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("delete route %s: %w", prefix, err))
		}
	}
	return errors.Join(errs...)
}

// Sync makes the kernel's skiff routes equal want (keeping stale ones if keepStale). A
// prefix that already has a route of another origin (connected, static, another daemon's)
// is left to it: BGP never replaces what it did not install.
func (k Kernel) Sync(want Routes, keepStale bool) error {
	installed, err := k.Installed()
	if err != nil {
		return err
	}
	set, del := Plan(want, installed, keepStale)
	foreign, err := k.foreign()
	if err != nil {
		return err
	}
	var errs []error
	for p := range set {
		if foreign[p] {
			delete(set, p)
			errs = append(errs, fmt.Errorf("route %s learned over BGP not installed: the table has a non-BGP route for it", p))
		}
	}
	return errors.Join(append(errs, k.Apply(set, del))...)
}

// foreign lists the main table's destinations whose routes skiff did not install.
func (k Kernel) foreign() (map[netip.Prefix]bool, error) {
	out := map[netip.Prefix]bool{}
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := nldump.Retry(func() ([]netlink.Route, error) {
			return k.h().RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		})
		if err != nil {
			return nil, fmt.Errorf("list routes: %w", err)
		}
		for _, r := range rs {
			if r.Protocol == ProtoBGP || r.Dst == nil {
				continue
			}
			if p, ok := toPrefix(r.Dst); ok {
				out[p] = true
			}
		}
	}
	return out, nil
}

func toPrefix(n *net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones).Masked(), true
}

func toIPNet(p netip.Prefix) *net.IPNet {
	bits := 32
	if p.Addr().Is6() {
		bits = 128
	}
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), bits)}
}
