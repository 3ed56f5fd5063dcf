package bgp

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// testNetns makes a namespace with a veth "fabric" link (no dummy module on these kernels) on 198.18.0.1/24 and returns its
// netlink handle; everything goes with the namespace at the end of the test.
func testNetns(t *testing.T) (*netlink.Handle, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs root, BPF and network namespaces: make unit (-short) skips it, make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (every machine here has it)")
	}
	name := fmt.Sprintf("skiff-bgp-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	for _, args := range [][]string{
		{"link", "add", "fabric", "type", "veth", "peer", "name", "fabric-peer"}, {"link", "set", "fabric", "up"}, {"link", "set", "fabric-peer", "up"}, {"addr", "add", "198.18.0.1/24", "dev", "fabric"},
	} {
		if out, err := exec.Command("ip", append([]string{"-n", name}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h, name
}

func TestPrivilegedKernelSync(t *testing.T) {
	h, name := testNetns(t)
	k := Kernel{Handle: h}
	// A route someone else owns in the same range is never touched.
	if out, err := exec.Command("ip", "-n", name, "route", "add", "10.250.0.0/24", "via", "198.18.0.9").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	want := Routes{p1: {n2}, p2: {n2, n3}}
	if err := k.Sync(want, false); err != nil {
		t.Fatal(err)
	}
	got, err := k.Installed()
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("installed %v, %v; want %v", got, err, want)
	}
	out, _ := exec.Command("ip", "-n", name, "route", "show", "10.244.2.0/24").CombinedOutput()
	if !strings.Contains(string(out), "proto bgp") || strings.Count(string(out), "nexthop via") != 2 {
		t.Errorf("ECMP route as ip shows it:\n%s", out)
	}

	// A graceful-restart pass keeps what is no longer wanted; a normal one removes it.
	if err := k.Sync(Routes{p1: {n3}}, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := k.Installed(); fmt.Sprint(got) != fmt.Sprint(Routes{p1: {n3}, p2: {n2, n3}}) {
		t.Errorf("after a keep-stale sync: %v", got)
	}
	if err := k.Sync(Routes{p1: {n3}}, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := k.Installed(); fmt.Sprint(got) != fmt.Sprint(Routes{p1: {n3}}) {
		t.Errorf("after a full sync: %v", got)
	}
	if err := k.Sync(Routes{}, false); err != nil {
		t.Fatal(err)
	}
	out, _ = exec.Command("ip", "-n", name, "route").CombinedOutput()
	if strings.Contains(string(out), "10.244.") || !strings.Contains(string(out), "10.250.0.0/24") {
		t.Errorf("routes left:\n%s", out)
	}
	// A destination that already has someone else's route is never replaced.
	if err := k.Sync(Routes{netip.MustParsePrefix("10.250.0.0/24"): {n2}}, false); err == nil || !strings.Contains(err.Error(), "non-BGP route") {
		t.Errorf("syncing over a foreign route: %v", err)
	}
	if out, _ := exec.Command("ip", "-n", name, "route", "show", "10.250.0.0/24").CombinedOutput(); !strings.Contains(string(out), "via 198.18.0.9") {
		t.Errorf("the foreign route was replaced: %s", out)
	}
	// An unreachable next hop is an error naming the route, not a panic.
	if err := k.Apply(Routes{p1: {netip.MustParseAddr("203.0.113.1")}}, nil); err == nil || !strings.Contains(err.Error(), "10.244.1.0/24") {
		t.Errorf("unreachable next hop: %v", err)
	}
}

// TestPrivilegedKernelLinkLocal: a route through a link-local next hop (a router with no
// global address on the link) goes through the next hop's interface, and reads back zoned
// with it, so a second sync changes nothing; an unknown interface is an error naming it.
func TestPrivilegedKernelLinkLocal(t *testing.T) {
	h, name := testNetns(t)
	k := Kernel{Handle: h}
	block := netip.MustParsePrefix("fd00:10:244:2::/64")
	hop := netip.MustParseAddr("fe80::2%fabric")
	if err := k.Sync(Routes{block: {hop}}, false); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("ip", "-n", name, "-6", "route", "show", block.String()).CombinedOutput()
	if !strings.Contains(string(out), "via fe80::2 dev fabric proto bgp") {
		t.Errorf("the route as ip shows it:\n%s", out)
	}
	got, err := k.Installed()
	if err != nil || len(got[block]) != 1 || got[block][0] != hop {
		t.Fatalf("installed %v, %v; want %s via %s", got, err, block, hop)
	}
	if set, del := Plan(Routes{block: {hop}}, got, false); len(set) != 0 || len(del) != 0 {
		t.Errorf("a second sync would change %v, delete %v", set, del)
	}
	// ECMP over two links' routers.
	two := []netip.Addr{netip.MustParseAddr("fe80::2%fabric"), netip.MustParseAddr("fe80::3%fabric-peer")}
	if err := k.Sync(Routes{block: two}, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := k.Installed(); fmt.Sprint(got[block]) != fmt.Sprint(two) {
		t.Errorf("ECMP installed %v, want %v", got[block], two)
	}
	if err := k.Apply(Routes{block: {netip.MustParseAddr("fe80::2%nosuch0")}}, nil); err == nil || !strings.Contains(err.Error(), "fe80::2%nosuch0") {
		t.Errorf("a next hop on a missing interface: %v", err)
	}
}
