package hostprep

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSystemInAFreshNamespace: a new network namespace starts with the kernel's default
// net.ipv4.ip_forward=0, as a fresh host does; Prepare turns it on there and not in the
// namespace this test runs in.
func TestSystemInAFreshNamespace(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("needs root and network namespaces (make test runs it)")
	}
	name := fmt.Sprintf("skiff-hostprep-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	here, err := System{}.Sysctl("net.ipv4.ip_forward")
	if err != nil {
		t.Fatal(err)
	}
	k := System{Netns: "/run/netns/" + name}
	if v, err := k.Sysctl("net.ipv4.ip_forward"); err != nil || strings.TrimSpace(v) != "0" {
		t.Fatalf("a fresh namespace has ip_forward %q (%v), want the default 0", v, err)
	}
	steps, err := Prepare(k, Needs{ServiceProxy: true})
	if err != nil {
		t.Fatal(err)
	}
	if steps[0].String() != "net.ipv4.ip_forward: was 0, set to 1" {
		t.Fatalf("steps %v", steps)
	}
	if v, _ := k.Sysctl("net.ipv4.ip_forward"); strings.TrimSpace(v) != "1" {
		t.Fatalf("ip_forward in the namespace is %q after Prepare", v)
	}
	if again, _ := (System{}).Sysctl("net.ipv4.ip_forward"); again != here {
		t.Fatalf("Prepare changed this namespace's ip_forward from %q to %q", here, again)
	}
}
