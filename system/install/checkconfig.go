package install

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/agent/cgroups"
	"github.com/skiff-sh/skiff/internal/layout"
)

// Check is one thing CheckConfig looks at.
type Check struct {
	Name string
	// Required: skiff does not run without it (else it loses a feature, named in Detail).
	Required bool
	OK       bool
	Detail   string
}

// CheckConfig looks at what this machine gives skiff, as k3s's check-config: the kernel's BPF
// (maps, the program types and attach points the dataplane uses), the BPF file system, cgroups,
// network namespaces and veths, the sysctls skiff sets itself, and the binaries it runs.
func CheckConfig() []Check {
	var checks []Check
	add := func(name string, required, ok bool, detail string) {
		checks = append(checks, Check{Name: name, Required: required, OK: ok, Detail: detail})
	}
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	release := unix.ByteSliceToString(uts.Release[:])
	major, minor := kernelVersion(release)
	add("kernel", true, major > 5 || (major == 5 && minor >= 10), release+" (5.10 or later; 6.6 or later for tcx)")

	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err == nil {
		m.Close()
	}
	add("bpf() maps", true, err == nil, errText(err, "BPF maps can be made (CONFIG_BPF_SYSCALL)"))
	for _, p := range []struct {
		name string
		typ  ebpf.ProgramType
	}{{"cgroup socket programs (Service load-balancing)", ebpf.CGroupSockAddr}, {"tc programs (NodePort, NetworkPolicy)", ebpf.SchedCLS}} {
		err := features.HaveProgramType(p.typ)
		add(p.name, true, err == nil, errText(err, "supported"))
	}
	err = features.HaveProgramType(ebpf.SchedCLS)
	tcx := err == nil && (major > 6 || (major == 6 && minor >= 6))
	add("tcx attachment", false, tcx, map[bool]string{true: "supported", false: "needs 6.6: NodePort programs attach nowhere without it"}[tcx])
	_, btfErr := os.Stat("/sys/kernel/btf/vmlinux")
	add("kernel BTF", false, btfErr == nil, errText(btfErr, "/sys/kernel/btf/vmlinux (bpftool's views of the programs)"))
	var st unix.Statfs_t
	bpffs := unix.Statfs(layout.BPFFS, &st) == nil && st.Type == unix.BPF_FS_MAGIC
	add("BPF file system", false, bpffs, map[bool]string{true: "mounted at " + layout.BPFFS, false: "not mounted at " + layout.BPFFS + ": the agent mounts it"}[bpffs])
	unified := cgroups.Unified()
	add("cgroup v2", true, unified != "", map[bool]string{true: "at " + unified, false: "no cgroup2 hierarchy: the socket programs attach to one"}[unified != ""])
	_, nsErr := os.Stat("/proc/self/ns/net")
	add("network namespaces", true, nsErr == nil, errText(nsErr, "CONFIG_NET_NS"))
	vethErr := vethWorks()
	add("veth", true, vethErr == nil, errText(vethErr, "pods' links can be made (CONFIG_VETH)"))
	for _, s := range []string{"net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding"} {
		b, err := os.ReadFile("/proc/sys/" + s)
		v := strings.TrimSpace(string(b))
		add("sysctl "+strings.ReplaceAll(s, "/", "."), false, err == nil && v == "1", fmt.Sprintf("%s now; the agent turns it on", orText(v, err)))
	}
	for _, bin := range []string{"containerd", "runc"} {
		path, err := exec.LookPath(bin)
		add(bin, true, err == nil, orText(path, err))
	}
	_, sdErr := os.Stat("/run/systemd/system")
	add("systemd", false, sdErr == nil, map[bool]string{true: "running: `skiff install` can manage skiff's units", false: "not running: run skiff by hand or under another supervisor"}[sdErr == nil])
	return checks
}

// PrintChecks writes the checks as k3s's check-config does and reports whether every
// required one passed.
func PrintChecks(w io.Writer, checks []Check) bool {
	ok := true
	for _, c := range checks {
		mark := "ok"
		switch {
		case !c.OK && c.Required:
			mark, ok = "MISSING", false
		case !c.OK:
			mark = "missing (optional)"
		}
		fmt.Fprintf(w, "- %-50s %-18s %s\n", c.Name+":", mark, c.Detail)
	}
	return ok
}

func kernelVersion(release string) (int, int) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return 0, 0
	}
	major, _ := strconv.Atoi(parts[0])
	minor, _ := strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	return major, minor
}

// vethWorks makes a veth pair in a network namespace of its own, which goes with the thread.
func vethWorks() error {
	errc := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with its namespace
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "check0"}, PeerName: "check1"})
	}()
	return <-errc
}

func errText(err error, ok string) string {
	if err != nil {
		return err.Error()
	}
	return ok
}

func orText(v string, err error) string {
	if err != nil {
		return err.Error()
	}
	return v
}
