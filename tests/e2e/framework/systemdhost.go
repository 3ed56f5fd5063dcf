package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SystemdHost is a machine for install tests: Debian's systemd running as PID 1 in namespaces
// of its own (PID, mount, network, UTS, IPC, cgroup) on a root file system that is this
// machine's seen through an overlay whose writes go to a tmpfs — so `skiff install` writes its
// unit, binary and configuration where a real host has them, systemd starts them, and nothing
// of it reaches this machine's files. Its network namespace holds lo alone until the test links
// it to another (Link). systemd boots a target with no dependencies, so only what the test
// installs runs. Its /var/lib is a directory of the test on this machine's file system (bind
// mounted), as containerd's snapshots need a file system that is not an overlay.
type SystemdHost struct {
	Name string
	// Root is the overlay the host sees as /.
	Root string
	// PID is systemd's (PID 1 inside) in this machine's PID namespace.
	PID    int
	cgroup string
	tb     testing.TB
}

// NewSystemdHost boots a host named name (its hostname, so its node's name).
func NewSystemdHost(tb testing.TB, name string) *SystemdHost {
	tb.Helper()
	dir := tb.TempDir()
	h := &SystemdHost{Name: name, Root: filepath.Join(dir, "root"), tb: tb}
	layer := filepath.Join(dir, "layer")
	for _, d := range []string{h.Root, layer} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	run := func(args ...string) {
		tb.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			tb.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	run("mount", "-t", "tmpfs", "tmpfs", layer)
	tb.Cleanup(func() { _ = syscall.Unmount(layer, syscall.MNT_DETACH) })
	for _, d := range []string{"upper", "work"} {
		if err := os.MkdirAll(filepath.Join(layer, d), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	run("mount", "-t", "overlay", "overlay", "-o", fmt.Sprintf("lowerdir=/,upperdir=%s/upper,workdir=%s/work", layer, layer), h.Root)
	tb.Cleanup(func() { _ = syscall.Unmount(h.Root, syscall.MNT_DETACH) })
	// /var/lib on a real file system, as a machine has it: containerd's overlayfs snapshots
	// cannot have their upper layers on the overlay root.
	varLib := filepath.Join(dir, "var-lib")
	if err := os.MkdirAll(varLib, 0o755); err != nil {
		tb.Fatal(err)
	}
	run("mount", "--bind", varLib, filepath.Join(h.Root, "var", "lib"))
	tb.Cleanup(func() { _ = syscall.Unmount(filepath.Join(h.Root, "var", "lib"), syscall.MNT_DETACH) })
	target := "[Unit]\nDescription=skiff test host\nDefaultDependencies=no\n"
	for path, content := range map[string]string{
		"etc/systemd/system/skiff-host.target": target,
		"etc/hostname":                         name + "\n",
	} {
		if err := os.WriteFile(filepath.Join(h.Root, path), []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	// The host's processes, skiff's pods among them, live in cgroups of their own, removed at
	// the end: systemd's cgroup namespace is rooted there.
	h.cgroup = fmt.Sprintf("skiff-e2e-host-%s-%d", name, os.Getpid())
	var join strings.Builder
	for _, m := range cgroupMounts() {
		d := filepath.Join(m, h.cgroup)
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
		// A v1 cpuset takes no process before it has CPUs and memory nodes: its parent's.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(m, f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
					tb.Fatal(err)
				}
			}
		}
		fmt.Fprintf(&join, "echo $$ > %s/cgroup.procs && ", d)
	}
	log, err := os.Create(filepath.Join(dir, "systemd.log"))
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", join.String()+"exec unshare --pid --fork --mount --uts --ipc --net --cgroup --propagation private "+
		"sh -c 'hostname "+name+"; exec chroot "+h.Root+" /lib/systemd/systemd --unit=skiff-host.target --log-target=console'")
	cmd.Env = []string{"container=skiff-e2e", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.stop(cmd) })
	// systemd is the child of unshare's fork.
	Eventually(tb, 20*time.Second, "systemd started in "+name, func() (bool, string) {
		h.PID = childNamed(cmd.Process.Pid, "systemd")
		return h.PID > 0, "no systemd child"
	})
	Eventually(tb, 30*time.Second, "systemd running in "+name, func() (bool, string) {
		out, _ := h.Exec("systemctl", "is-system-running")
		return strings.TrimSpace(out) == "running", out
	})
	h.mountMissingControllers()
	return h
}

// mountMissingControllers mounts in the host the cgroup v1 controllers this machine has that
// systemd left out: it mounts cpu and cpuacct together, as most machines have them, and this
// machine has them apart, which the kernel then refuses — and runc sets CPU limits in cpu.
func (h *SystemdHost) mountMissingControllers() {
	h.tb.Helper()
	b, _ := os.ReadFile("/proc/self/mounts")
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || f[2] != "cgroup" {
			continue
		}
		target := f[1]
		if out, err := h.Exec("mountpoint", "-q", target); err == nil {
			continue
		} else if strings.TrimSpace(out) != "" {
			h.tb.Fatalf("mountpoint %s: %s", target, out)
		}
		var controllers []string
		for _, o := range strings.Split(f[3], ",") {
			if o != "rw" && o != "ro" && o != "relatime" && o != "nosuid" && o != "nodev" && o != "noexec" {
				controllers = append(controllers, o)
			}
		}
		h.MustExec("mount", "-o", "remount,rw", "/sys/fs/cgroup")
		h.MustExec("mkdir", "-p", target)
		h.MustExec("mount", "-t", "cgroup", "-o", strings.Join(controllers, ","), "cgroup", target)
	}
}

// Exec runs a command inside the host (its namespaces and root) and returns its output.
func (h *SystemdHost) Exec(args ...string) (string, error) {
	out, err := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(h.PID), "-a", "-r", "-w"}, args...)...).CombinedOutput()
	return string(out), err
}

// MustExec is Exec failing the test on an error.
func (h *SystemdHost) MustExec(args ...string) string {
	h.tb.Helper()
	out, err := h.Exec(args...)
	if err != nil {
		h.tb.Fatalf("%s: %v: %v\n%s", h.Name, args, err, out)
	}
	return out
}

// Link joins two hosts' network namespaces with a veth pair, addressing each end (CIDR form).
func Link(tb testing.TB, a *SystemdHost, addrA string, b *SystemdHost, addrB string) {
	tb.Helper()
	ifA, ifB := "sk"+a.Name, "sk"+b.Name
	for _, args := range [][]string{
		{"ip", "link", "add", ifA, "type", "veth", "peer", "name", ifB},
		{"ip", "link", "set", ifA, "netns", strconv.Itoa(a.PID)},
		{"ip", "link", "set", ifB, "netns", strconv.Itoa(b.PID)},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			tb.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	for _, end := range []struct {
		h         *SystemdHost
		ifc, addr string
	}{{a, ifA, addrA}, {b, ifB, addrB}} {
		end.h.MustExec("ip", "addr", "add", end.addr, "dev", end.ifc)
		end.h.MustExec("ip", "link", "set", end.ifc, "up")
		end.h.MustExec("ip", "link", "set", "lo", "up")
	}
}

// stop kills every process of the host (systemd is its PID 1: the namespace goes with it) and
// removes its cgroups.
func (h *SystemdHost) stop(cmd *exec.Cmd) {
	if h.PID > 0 {
		_ = syscall.Kill(h.PID, syscall.SIGKILL)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	for _, m := range cgroupMounts() {
		removeCgroupTree(filepath.Join(m, h.cgroup))
	}
}

// removeCgroupTree removes a cgroup and those below it, deepest first, retrying while the
// kernel reaps the processes that were in them.
func removeCgroupTree(dir string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var dirs []string
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		left := 0
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !os.IsNotExist(err) {
				left++
			}
		}
		if left == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cgroupMounts are this machine's cgroup hierarchies (v1 controllers and the unified one).
func cgroupMounts() []string {
	b, _ := os.ReadFile("/proc/self/mounts")
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 2 && (f[2] == "cgroup" || f[2] == "cgroup2") {
			out = append(out, f[1])
		}
	}
	return out
}

// childNamed finds a descendant of pid whose command is name.
func childNamed(pid int, name string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if strings.TrimSpace(string(comm)) != name {
			continue
		}
		for q := p; q > 1; {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", q))
			if err != nil {
				break
			}
			f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
			q, _ = strconv.Atoi(f[1])
			if q == pid {
				return p
			}
		}
	}
	return 0
}
