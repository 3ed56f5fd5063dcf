package hostprep

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/agent/cgroups"
)

// System is the running kernel. Network sysctls are per namespace: with Netns set they are
// read and written in that namespace (where the node's pods are routed, as in the lab),
// else in the agent's own.
type System struct{ Netns string }

func sysctlPath(key string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
}

// inNetns runs f where the node's network is: /proc/sys/net shows the namespace of the
// thread that opens it.
func (s System) inNetns(f func() error) error {
	if s.Netns == "" {
		return f()
	}
	return ns.WithNetNSPath(s.Netns, func(ns.NetNS) error { return f() })
}

// Sysctl reads a sysctl.
func (s System) Sysctl(key string) (string, error) {
	var out string
	err := s.inNetns(func() error {
		b, err := os.ReadFile(sysctlPath(key))
		out = string(b)
		return err
	})
	return out, err
}

// SetSysctl writes a sysctl.
func (s System) SetSysctl(key, value string) error {
	return s.inNetns(func() error { return os.WriteFile(sysctlPath(key), []byte(value), 0o644) })
}

// IsBPFFS says whether path is a mounted BPF filesystem.
func (System) IsBPFFS(path string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false, err
	}
	return st.Type == unix.BPF_FS_MAGIC, nil
}

// MountBPFFS mounts the BPF filesystem at path.
func (System) MountBPFFS(path string) error {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return err
	}
	return unix.Mount("bpf", path, "bpf", 0, "mode=0700")
}

// HasCgroup2 says whether a cgroup2 hierarchy is mounted.
func (System) HasCgroup2() bool { return cgroups.Unified() != "" }

// Module looks in /sys/module (loaded, or built in with parameters), then the running
// kernel's modules.builtin and modules.dep under /lib/modules.
func (System) Module(name string) ModuleState {
	if _, err := os.Stat(filepath.Join("/sys/module", name)); err == nil {
		return ModulePresent
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return ModuleUnknown
	}
	tree := filepath.Join("/lib/modules", unix.ByteSliceToString(uts.Release[:]))
	builtin, berr := os.ReadFile(filepath.Join(tree, "modules.builtin"))
	dep, derr := os.ReadFile(filepath.Join(tree, "modules.dep"))
	if berr != nil && derr != nil {
		return ModuleUnknown
	}
	if listsModule(string(builtin), name) {
		return ModulePresent
	}
	if listsModule(string(dep), name) {
		return ModuleLoadable
	}
	// In neither list: modprobe could not load it either; let the use fail and say why.
	return ModuleUnknown
}

// listsModule says whether a modules.builtin or modules.dep text names the module
// ("kernel/drivers/net/veth.ko[.xz]" at a line's start, before any ':').
func listsModule(text, name string) bool {
	for _, line := range strings.Split(text, "\n") {
		path, _, _ := strings.Cut(line, ":")
		base := filepath.Base(strings.TrimSpace(path))
		if i := strings.Index(base, ".ko"); i > 0 && strings.ReplaceAll(base[:i], "-", "_") == strings.ReplaceAll(name, "-", "_") {
			return true
		}
	}
	return false
}

// LoadModule runs modprobe.
func (System) LoadModule(name string) error {
	out, err := exec.Command("modprobe", name).CombinedOutput()
	if err != nil {
		return fmt.Errorf("modprobe %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
