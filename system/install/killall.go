package install

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/agent/cgroups"
	agentruntime "github.com/skiff-sh/skiff/agent/runtime"
	"github.com/skiff-sh/skiff/bgp"
)

// Killall stops everything skiff runs on this machine and removes what it made in the
// kernel, as k3s-killall.sh: the skiff processes (the units are stopped first by Uninstall;
// alone, it kills them), containerd and the containers' shims, the pods (their cgroups and
// network namespaces, with their veths), the mounts under the data directories, the pinned
// BPF programs and maps (which detaches them), and the routes skiff's BGP speaker installed.
// Files stay (Uninstall removes them).
func Killall(p Paths, out io.Writer) error {
	var errs []error
	bin := filepath.Join(p.BinDir, "skiff")
	if n := killSkiff(bin); n > 0 {
		fmt.Fprintf(out, "killed %d skiff processes\n", n)
	}
	for _, dir := range []string{p.AgentDir, p.ServerDir} {
		agentruntime.Teardown(dir) // containerd, shims and what runs from the data dir; mounts; pod netns
	}
	if err := cgroups.KillAll(cgroups.Mounts(), cgroups.DefaultRoot); err != nil {
		errs = append(errs, fmt.Errorf("pods' cgroups: %w", err))
	} else {
		fmt.Fprintln(out, "killed the pods and removed their cgroups")
	}
	if _, err := os.Stat(p.BPFRoot); err == nil {
		if err := os.RemoveAll(p.BPFRoot); err != nil {
			errs = append(errs, fmt.Errorf("BPF pins: %w", err))
		} else {
			fmt.Fprintln(out, "removed the pinned BPF programs and maps", p.BPFRoot)
		}
	}
	n, err := removeBGPRoutes()
	if err != nil {
		errs = append(errs, fmt.Errorf("BGP routes: %w", err))
	} else if n > 0 {
		fmt.Fprintf(out, "removed %d routes learned over BGP\n", n)
	}
	return errors.Join(errs...)
}

// killSkiff SIGKILLs every process running bin (or a deleted copy of it, replaced by an
// install) other than this one, and returns how many.
func killSkiff(bin string) int {
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	killed := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || strings.TrimSuffix(exe, " (deleted)") != bin {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	if killed > 0 {
		time.Sleep(200 * time.Millisecond) // their children (containerd) follow by Pdeathsig
	}
	return killed
}

// removeBGPRoutes deletes the main table's routes of protocol bgp, which skiff's speaker owns
// on its nodes (bgp.Kernel installs and reconciles them).
func removeBGPRoutes() (int, error) {
	n := 0
	for _, family := range []int{unix.AF_INET, unix.AF_INET6} {
		routes, err := netlink.RouteListFiltered(family, &netlink.Route{Protocol: bgp.ProtoBGP, Table: unix.RT_TABLE_MAIN},
			netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			return n, err
		}
		for _, r := range routes {
			if err := netlink.RouteDel(&r); err == nil {
				n++
			}
		}
	}
	return n, nil
}
