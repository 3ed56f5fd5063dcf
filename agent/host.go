package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/skiff-sh/skiff/agent/cgroups"
	"github.com/skiff-sh/skiff/agent/cpumanager"
	"github.com/skiff-sh/skiff/agent/node"
	"github.com/skiff-sh/skiff/agent/pressure"
	"github.com/skiff-sh/skiff/internal/layout"
)

// installCNI puts the plugin in the bin dir as skiff-cni (and as "loopback", which CRI runs
// for lo) and writes the network config. A separate skiff-cni binary is copied; without one
// (a plain `go build ./cmd/skiff`), both names link to this binary, which is the plugin when
// started by them.
func installCNI(plugin, binDir, conflist, socket string) error {
	for _, d := range []string{binDir, filepath.Dir(conflist)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	dst := filepath.Join(binDir, "skiff-cni")
	if _, err := os.Stat(plugin); err == nil {
		if err := copyExecutable(plugin, dst); err != nil {
			return fmt.Errorf("skiff-cni plugin: %w", err)
		}
	} else {
		self, eerr := os.Executable()
		if eerr != nil {
			return fmt.Errorf("skiff-cni plugin: %v, and this binary cannot be found to serve instead: %w", err, eerr)
		}
		if err := replaceLink(self, dst); err != nil {
			return err
		}
	}
	if err := replaceLink("skiff-cni", filepath.Join(binDir, "loopback")); err != nil {
		return err
	}
	conf, _ := json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0", "name": "skiff",
		"plugins": []map[string]any{{"type": "skiff-cni", "agentSocket": socket}},
	}, "", "  ")
	return os.WriteFile(conflist, conf, 0o644)
}

// copyExecutable copies src to dst through a temporary file, so a plugin containerd is
// running is never seen half-written.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// replaceLink makes name a symbolic link to target, replacing whatever name was.
func replaceLink(target, name string) error {
	tmp := name + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// ipv4Of is the first IPv4 address of ips, else the first address.
func ipv4Of(ips []string) string {
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip); err == nil && a.Is4() {
			return ip
		}
	}
	if len(ips) > 0 {
		return ips[0]
	}
	return ""
}

// ipv6Of is the first IPv6 address of ips (invalid: none).
func ipv6Of(ips []string) netip.Addr {
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip); err == nil && a.Is6() && !a.Is4In6() {
			return a
		}
	}
	return netip.Addr{}
}

func nodeAddr(ip string) netip.Addr {
	a, _ := netip.ParseAddr(ip)
	return a
}

// uplinkOf names the interface that holds the node's address in the agent's namespace, where
// NodePort traffic arrives; "" when none does (then no NodePorts are served).
func uplinkOf(ip string) string {
	want := nodeAddr(ip)
	ifaces, _ := net.Interfaces()
	for _, ifc := range ifaces {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if got, ok := netip.AddrFromSlice(n.IP); ok && got.Unmap() == want && !n.IP.IsLoopback() {
					return ifc.Name
				}
			}
		}
	}
	return ""
}

// cpuManager starts the static CPU manager policy when asked for (nil for none): the CPUs
// reserved are --reserved-cpus, or as many as --kube-reserved and --system-reserved add up
// to, rounded up; its checkpoint is in the data directory.
func cpuManager(o Options, log *slog.Logger) (*cpumanager.Manager, error) {
	if o.CPUManagerPolicy != cpumanager.PolicyStatic {
		return nil, nil
	}
	topo, err := cpumanager.Discover("/sys")
	if err != nil {
		return nil, fmt.Errorf("CPU manager: %w", err)
	}
	reserved := o.ReservedCPUs
	if reserved.IsEmpty() {
		var milli int64
		for _, r := range o.Reserved {
			milli += r.Cpu().MilliValue()
		}
		if reserved, err = cpumanager.ReservedFor(topo, int((milli+999)/1000)); err != nil {
			return nil, fmt.Errorf("CPU manager: reserving the CPUs of --kube-reserved and --system-reserved: %w", err)
		}
	}
	m, err := cpumanager.New(topo, reserved, layout.Agent{Dir: o.DataDir}.CPUManagerCheckpoint())
	if err != nil {
		return nil, fmt.Errorf("CPU manager: %w", err)
	}
	log.Info("static CPU manager policy", "cpus", topo.All().String(), "reserved", reserved.String(), "shared", m.Shared().String())
	return m, nil
}

// enforceNodeAllocatable limits the cgroup every pod is created under to the node's capacity
// less what is reserved for its own daemons, as the kubelet limits kubepods: pods together
// can then never take the memory, CPU share or tasks the node's daemons were promised, even
// before the eviction manager sees pressure. The hard eviction thresholds are not taken off
// here (they are in allocatable, for the scheduler), as the kubelet's.
func enforceNodeAllocatable(o Options, log *slog.Logger) error {
	root := o.CgroupRoot
	capacity := node.Capacity(0, o.DataDir)
	pidReserved := false
	for _, r := range o.Reserved {
		_, ok := r[node.ResourcePID]
		pidReserved = pidReserved || ok
	}
	if pidReserved {
		n, err := pressure.PIDLimit("/proc")
		if err != nil {
			return fmt.Errorf("reading the node's PID limit for --system-reserved/--kube-reserved pid: %w", err)
		}
		capacity[node.ResourcePID] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	pods := node.PodsLimit(capacity, o.Reserved...)
	limits := cgroups.Limits{MemoryBytes: pods.Memory().Value(), MilliCPU: pods.Cpu().MilliValue()}
	if pidReserved {
		limits.PIDs = max(pods.Name(node.ResourcePID, resource.DecimalSI).Value(), 1)
	}
	// Nothing may be reserved down to zero: a zero limit would lift the limit instead.
	limits.MemoryBytes = max(limits.MemoryBytes, 1)
	limits.MilliCPU = max(limits.MilliCPU, 1)
	if err := cgroups.EnforceLimits(cgroups.Mounts(), root, limits); err != nil {
		return fmt.Errorf("enforcing node allocatable on the pods' cgroup %s (--enforce-node-allocatable=none leaves it alone): %w", root, err)
	}
	log.Info("node allocatable enforced on the pods' cgroup", "cgroup", root, "memoryBytes", limits.MemoryBytes,
		"milliCPU", limits.MilliCPU, "pids", limits.PIDs)
	return nil
}
