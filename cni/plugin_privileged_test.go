package cni

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/agent/cniserver"
	"github.com/skiff-sh/skiff/agent/ipam"
)

// testNetns makes a named network namespace owned by the test and removes it afterwards.
func testNetns(t *testing.T, role string) string {
	t.Helper()
	name := fmt.Sprintf("skiff-cni-%s-%d-%d", role, os.Getpid(), rand.IntN(1<<30))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	path := "/run/netns/" + name
	if err := inNetns(path, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	}); err != nil {
		t.Fatal(err)
	}
	return path
}

// onThreadIn runs f on a locked thread inside the namespace, as the plugin process would run
// in the host's namespace.
func onThreadIn(t *testing.T, path string, f func()) {
	t.Helper()
	if err := inNetns(path, func() error { f(); return nil }); err != nil {
		t.Error(err)
	}
}

func startAgent(t *testing.T, cidrs ...string) (string, *ipam.Node) {
	t.Helper()
	dir := t.TempDir()
	if len(cidrs) == 0 {
		cidrs = []string{"10.244.7.0/24"}
	}
	alloc, err := ipam.NewNode(cidrs, func(v6 bool) ipam.Store {
		return ipam.FileStore{Path: filepath.Join(dir, fmt.Sprintf("ipam-%v.json", v6))}
	})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "cni.sock")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = cniserver.Serve(ctx, sock, (&cniserver.Server{IPAM: alloc}).Handler()) }()
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return sock, alloc
}

func TestPrivilegedAddCheckDel(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root, BPF and network namespaces: make unit (-short) skips it, make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (every machine here has it)")
	}
	for _, c := range []struct {
		name  string
		cidrs []string
		want  []string // the pod's addresses, primary first
	}{
		{"ipv4", []string{"10.244.7.0/24"}, []string{"10.244.7.1"}},
		{"dual", []string{"10.244.7.0/24", "fd00:10:244:7::/64"}, []string{"10.244.7.1", "fd00:10:244:7::1"}},
		{"ipv6-first", []string{"fd00:10:244:7::/64", "10.244.7.0/24"}, []string{"fd00:10:244:7::1", "10.244.7.1"}},
		{"ipv6", []string{"fd00:10:244:7::/64"}, []string{"fd00:10:244:7::1"}},
	} {
		t.Run(c.name, func(t *testing.T) { testAddCheckDel(t, c.cidrs, c.want) })
	}
}

// gatewayOf is the pod's link-local next hop for an address's family.
func gatewayOf(ip net.IP) string {
	if ip.To4() != nil {
		return cniserver.DefaultGateway
	}
	return cniserver.DefaultGatewayIPv6
}

func testAddCheckDel(t *testing.T, cidrs, want []string) {
	hostNS, podNS := testNetns(t, "host"), testNetns(t, "pod")
	sock, alloc := startAgent(t, cidrs...)
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"skiff","type":"skiff-cni","agentSocket":%q}`, sock)
	args := &skel.CmdArgs{ContainerID: "0123456789abcdef", Netns: podNS, IfName: "eth0",
		Args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=test", StdinData: []byte(conf)}
	hostVeth := HostVethName(args.ContainerID)

	var res *current.Result
	onThreadIn(t, hostNS, func() {
		c, err := ParseConfig(args.StdinData)
		if err != nil {
			t.Error(err)
			return
		}
		if res, err = add(c, args); err != nil {
			t.Error(err)
			return
		}
		// A repeated ADD of the same sandbox gets the same addresses.
		again, err := add(c, args)
		if err != nil || len(again.IPs) != len(res.IPs) || !again.IPs[0].Address.IP.Equal(res.IPs[0].Address.IP) {
			t.Errorf("repeated ADD: %v %v", err, again)
		}
		// Host side: the veth and a /32 or /128 route to each of the pod's addresses.
		l, err := netlink.LinkByName(hostVeth)
		if err != nil {
			t.Errorf("host veth: %v", err)
			return
		}
		routes, _ := netlink.RouteList(l, netlink.FAMILY_ALL)
		var dsts []string
		for _, r := range routes {
			if r.Dst != nil && !r.Dst.IP.IsLinkLocalUnicast() && !r.Dst.IP.IsMulticast() {
				dsts = append(dsts, r.Dst.String())
			}
		}
		var wantDsts []string
		for _, w := range want {
			wantDsts = append(wantDsts, hostNet(net.ParseIP(w)).String())
		}
		sort.Strings(dsts)
		sort.Strings(wantDsts)
		if strings.Join(dsts, ",") != strings.Join(wantDsts, ",") {
			t.Errorf("host routes via %s: %v, want %v", hostVeth, dsts, wantDsts)
		}
		// Anti-spoofing: strict reverse-path filtering on the host end.
		if b, err := os.ReadFile("/proc/sys/net/ipv4/conf/" + hostVeth + "/rp_filter"); err != nil || strings.TrimSpace(string(b)) != "1" {
			t.Errorf("rp_filter on %s = %q (%v), want 1", hostVeth, b, err)
		}
	})
	if t.Failed() {
		return
	}
	var got []string
	for _, ip := range res.IPs {
		got = append(got, ip.Address.IP.String())
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("pod addresses %v, want %v (the node's primary block first)", got, want)
	}
	if als, ok := alloc.Get(args.ContainerID); !ok || len(als) != len(want) || als[0].PodName != "test" || als[0].PodNamespace != "default" {
		t.Fatalf("agent allocation %+v %v", als, ok)
	}
	// Pod side: eth0 with the addresses, none tentative (no duplicate address detection to
	// wait for), and a default route per family through the link-local gateway.
	if err := inNetns(podNS, func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V6)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if a.Flags&unix.IFA_F_TENTATIVE != 0 && !a.IP.IsLinkLocalUnicast() {
				return fmt.Errorf("pod address %s is tentative (duplicate address detection runs)", a.IP)
			}
		}
		routes, err := netlink.RouteList(l, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		var got []string
		for _, r := range routes {
			if r.Dst == nil || r.Dst.IP.IsUnspecified() {
				got = append(got, "default via "+r.Gw.String())
			} else {
				got = append(got, r.Dst.String())
			}
		}
		s := strings.Join(got, ",")
		for _, w := range want {
			gw := gatewayOf(net.ParseIP(w))
			if !strings.Contains(s, "default via "+gw) || !strings.Contains(s, hostNet(net.ParseIP(gw)).String()) {
				return fmt.Errorf("pod routes %s, want a default route via %s", s, gw)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Traffic: a TCP server in the pod answers a client in the host namespace, on each address.
	// The host's sources are addresses on its lo. A new IPv6 address stays tentative until the
	// kernel's address work runs (even on lo, where there is no DAD to do); a connect in that
	// moment picks ::1 as its source, which the pod must drop. So wait until they are usable,
	// and dial from them explicitly.
	onThreadIn(t, hostNS, func() {
		lo, _ := netlink.LinkByName("lo")
		for _, src := range []string{"198.18.0.1/32", "2001:2::1/128"} {
			a, _ := netlink.ParseAddr(src)
			if err := netlink.AddrAdd(lo, a); err != nil {
				t.Error(err)
			}
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			addrs, err := netlink.AddrList(lo, netlink.FAMILY_V6)
			if err != nil {
				t.Fatal(err)
			}
			tentative := false
			for _, a := range addrs {
				tentative = tentative || a.Flags&unix.IFA_F_TENTATIVE != 0
			}
			if !tentative {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("lo addresses still tentative after 5s: %v", addrs)
			}
		}
	})
	hostSource := map[bool]net.IP{false: net.ParseIP("198.18.0.1"), true: net.ParseIP("2001:2::1")}
	for _, w := range want {
		addr := net.JoinHostPort(w, "8080")
		var ln net.Listener
		if err := inNetns(podNS, func() (err error) { ln, err = net.Listen("tcp", addr); return }); err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := ln.Accept()
			if err == nil {
				_, _ = c.Write([]byte("hello from the pod\n"))
				c.Close()
			}
		}()
		onThreadIn(t, hostNS, func() {
			d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: hostSource[net.ParseIP(w).To4() == nil]}}
			c, err := d.Dial("tcp", addr)
			if err != nil {
				t.Errorf("host -> pod %s: %v", addr, err)
				return
			}
			defer c.Close()
			buf := make([]byte, 64)
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, _ := c.Read(buf)
			if got := string(buf[:n]); got != "hello from the pod\n" {
				t.Errorf("read %q from %s", got, addr)
			}
		})
		ln.Close()
	}

	// CHECK with the ADD result.
	prev, _ := json.Marshal(res)
	checkConf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"skiff","type":"skiff-cni","agentSocket":%q,"prevResult":%s}`, sock, prev)
	onThreadIn(t, hostNS, func() {
		ca := *args
		ca.StdinData = []byte(checkConf)
		if err := Check(&ca); err != nil {
			t.Errorf("CHECK: %v", err)
		}
	})

	// DEL removes the interfaces, the route and the allocation; a second DEL is fine.
	onThreadIn(t, hostNS, func() {
		for i := 0; i < 2; i++ {
			if err := Del(args); err != nil {
				t.Errorf("DEL %d: %v", i+1, err)
			}
		}
		if _, err := netlink.LinkByName(hostVeth); err == nil {
			t.Error("host veth left after DEL")
		}
	})
	if _, ok := alloc.Get(args.ContainerID); ok {
		t.Fatal("addresses not released by DEL")
	}
	_ = inNetns(podNS, func() error {
		if _, err := netlink.LinkByName("eth0"); err == nil {
			t.Error("pod eth0 left after DEL")
		}
		return nil
	})
}

func TestPrivilegedAddFailsCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root, BPF and network namespaces: make unit (-short) skips it, make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (every machine here has it)")
	}
	hostNS, podNS := testNetns(t, "host"), testNetns(t, "pod")
	args := &skel.CmdArgs{ContainerID: "feedfacecafe", Netns: podNS, IfName: "eth0"}
	onThreadIn(t, hostNS, func() {
		// No agent behind the socket: a clear error and no veth.
		c, _ := ParseConfig([]byte(`{"cniVersion":"1.0.0","name":"skiff","agentSocket":"/nonexistent/skiff.sock"}`))
		_, err := add(c, args)
		if err == nil || !strings.Contains(err.Error(), "node agent") {
			t.Errorf("ADD without an agent: %v", err)
		}
		if _, err := netlink.LinkByName(HostVethName(args.ContainerID)); err == nil {
			t.Error("veth leaked by a failed ADD")
		}
	})
	// A missing network namespace: the agent's allocation is rolled back.
	sock, alloc := startAgent(t)
	onThreadIn(t, hostNS, func() {
		c, _ := ParseConfig([]byte(fmt.Sprintf(`{"cniVersion":"1.0.0","name":"skiff","agentSocket":%q}`, sock)))
		bad := *args
		bad.Netns = "/run/netns/skiff-does-not-exist"
		if _, err := add(c, &bad); err == nil {
			t.Error("ADD into a missing netns succeeded")
		}
		if _, ok := alloc.Get(bad.ContainerID); ok {
			t.Error("allocation kept after a failed ADD")
		}
		if _, err := netlink.LinkByName(HostVethName(bad.ContainerID)); err == nil {
			t.Error("veth leaked by a failed ADD")
		}
	})
}
