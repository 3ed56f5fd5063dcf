package lab

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
)

// ip runs one iproute2 command.
func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// sysctl sets a namespaced sysctl inside netns (nsenter --net keeps /proc/sys/net per
// namespace without remounting /sys, unlike ip netns exec).
func sysctl(netns, key, value string) error {
	path := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	cmd := exec.Command("nsenter", "--net=/run/netns/"+netns, "--", "sh", "-c", "echo "+value+" > "+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("sysctl %s=%s in %s: %v: %s", key, value, netns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// buildNetwork makes the ToR namespace with the fabric bridge, every node's namespace wired
// to it, and the host link into the master.
func buildNetwork(s Spec) error {
	tor := s.ToRHost()
	steps := [][]string{
		{"netns", "add", tor.Netns},
		{"-n", tor.Netns, "link", "set", "lo", "up"},
		{"-n", tor.Netns, "link", "add", "fabric", "type", "bridge"},
		{"-n", tor.Netns, "link", "set", "fabric", "up"},
	}
	if s.HasIPv4() {
		steps = append(steps, []string{"-n", tor.Netns, "addr", "add", tor.IP.String() + "/24", "dev", "fabric"})
	}
	for _, st := range steps {
		if err := ip(st...); err != nil {
			return err
		}
	}
	if err := sysctl(tor.Netns, "net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	if s.HasIPv6() {
		if err := sysctl(tor.Netns, "net.ipv6.conf.all.forwarding", "1"); err != nil {
			return err
		}
		if err := ip("-n", tor.Netns, "addr", "add", tor.IP6.String()+"/64", "dev", "fabric", "nodad"); err != nil {
			return err
		}
	}
	for _, h := range s.Hosts() {
		if err := buildNode(s, h); err != nil {
			return err
		}
	}
	// The host reaches the API through a point-to-point link into the master; the master
	// gets no route back beyond that /30, so the lab still reaches nothing outside itself.
	master := s.Master()
	hostIf := s.HostLink()
	for _, st := range [][]string{
		{"link", "add", hostIf, "type", "veth", "peer", "name", "api", "netns", master.Netns},
		{"link", "set", hostIf, "up"},
		{"-n", master.Netns, "link", "set", "api", "up"},
	} {
		if err := ip(st...); err != nil {
			return err
		}
	}
	if s.HasIPv4() {
		for _, st := range [][]string{
			{"addr", "add", hostSide.String() + "/30", "dev", hostIf},
			{"-n", master.Netns, "addr", "add", masterSide.String() + "/30", "dev", "api"},
			// The ToR answers the host too (the nodes learn the way back in buildNode).
			{"-n", tor.Netns, "route", "add", hostLink.String(), "via", master.IP.String()},
		} {
			if err := ip(st...); err != nil {
				return err
			}
		}
	}
	if s.HasIPv6() {
		for _, st := range [][]string{
			{"addr", "add", hostSide6.String() + "/126", "dev", hostIf, "nodad"},
			{"-n", master.Netns, "addr", "add", masterSide6.String() + "/126", "dev", "api", "nodad"},
			{"-n", tor.Netns, "route", "add", hostLink6.String(), "via", master.IP6.String()},
		} {
			if err := ip(st...); err != nil {
				return err
			}
		}
	}
	return addHostRoutes(s)
}

// via is the master's end of the host link in p's family.
func via(p netip.Prefix) string {
	if p.Addr().Is4() {
		return masterSide.String()
	}
	return masterSide6.String()
}

// addHostRoutes routes the lab's ranges from the host into the master's namespace. The
// routes name the lab's link, so they go with it when the lab is taken down. A range the
// host already routes elsewhere that exactly (another lab) is an error naming the route.
func addHostRoutes(s Spec) error {
	for _, p := range s.HostRoutes() {
		if err := ip("route", "add", p.String(), "via", via(p), "dev", s.HostLink()); err != nil {
			existing, _ := exec.Command("ip", "route", "show", p.String()).Output()
			return fmt.Errorf("routing %s into lab %s: %w (the host already has: %s)", p, s.Name, err, strings.TrimSpace(string(existing)))
		}
	}
	return nil
}

// buildNode makes one node's namespace: eth0 on the fabric (its peer enslaved to the ToR's
// bridge), loopback, forwarding on (it routes for its pods), and the way back to the host's
// end of the API link through the master.
func buildNode(s Spec, h Host) error {
	tor := s.ToRHost()
	for _, st := range [][]string{
		{"netns", "add", h.Netns},
		{"-n", h.Netns, "link", "set", "lo", "up"},
		{"link", "add", "name", h.Role, "netns", tor.Netns, "type", "veth", "peer", "name", "eth0", "netns", h.Netns},
		{"-n", tor.Netns, "link", "set", "dev", h.Role, "master", "fabric"},
		{"-n", tor.Netns, "link", "set", "dev", h.Role, "up"},
		{"-n", h.Netns, "link", "set", "eth0", "up"},
	} {
		if err := ip(st...); err != nil {
			return err
		}
	}
	if h.IP.IsValid() {
		if err := ip("-n", h.Netns, "addr", "add", h.IP.String()+"/24", "dev", "eth0"); err != nil {
			return err
		}
		if h.Role != "master" {
			if err := ip("-n", h.Netns, "route", "add", hostLink.String(), "via", s.Master().IP.String()); err != nil {
				return err
			}
		}
	}
	if h.IP6.IsValid() {
		// No duplicate address detection: the lab gives each address once, and a tentative
		// address would keep the node's BGP session from binding to it for a second or two.
		if err := ip("-n", h.Netns, "addr", "add", h.IP6.String()+"/64", "dev", "eth0", "nodad"); err != nil {
			return err
		}
		if h.Role != "master" {
			if err := ip("-n", h.Netns, "route", "add", hostLink6.String(), "via", s.Master().IP6.String()); err != nil {
				return err
			}
		}
		if err := sysctl(h.Netns, "net.ipv6.conf.all.forwarding", "1"); err != nil {
			return err
		}
	}
	return sysctl(h.Netns, "net.ipv4.ip_forward", "1")
}
