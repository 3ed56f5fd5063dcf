// Package cgroups makes each pod's cgroup, as the kubelet does with the cgroupfs driver and
// --cgroups-per-qos: <root>/pod<uid> for a Guaranteed pod, <root>/burstable/pod<uid> and
// <root>/besteffort/pod<uid> for the others (root /skiff by default), under every mounted
// hierarchy, v1 and v2 alike, with the pod's CPU weight, quota, memory and PID limits; it
// limits the root to the node's allocatable, and removes a pod's cgroup when the pod is gone:
// containerd removes its containers' cgroups but not the parent the agent asked for. A root per agent (the lab gives each node its own) lets whoever owns
// the agent kill and remove everything it ran (KillAll).
package cgroups

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultRoot is where pod cgroups go unless the agent is told otherwise.
const DefaultRoot = "/skiff"

// Mounts lists the mount points of the cgroup (v1) and cgroup2 hierarchies.
func Mounts() []string {
	return mountsOf("cgroup", "cgroup2")
}

// mountsOf lists the mount points of the file systems of the given types, in mount order.
func mountsOf(types ...string) []string {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 2 && slices.Contains(types, f[2]) {
			out = append(out, f[1])
		}
	}
	return out
}

// Remove deletes the pod's cgroup directories (deepest first) in every hierarchy, in
// whichever QoS tier they are. A cgroup that still holds processes cannot be removed; that
// error is returned.
func Remove(mounts []string, root, uid string) error {
	var errs []error
	for _, p := range parents(root, uid) {
		errs = append(errs, removeTree(mounts, p))
	}
	return errors.Join(errs...)
}

func removeTree(mounts []string, cgroup string) error {
	var errs []error
	for _, m := range mounts {
		root := filepath.Join(m, cgroup)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Exists reports whether the pod's cgroup is present in any hierarchy, in any QoS tier.
func Exists(mounts []string, root, uid string) bool {
	for _, m := range mounts {
		if Find(m, root, uid) != "" {
			return true
		}
	}
	return false
}

// At reports whether the cgroup is present in any hierarchy.
func At(mounts []string, cgroup string) bool {
	for _, m := range mounts {
		if _, err := os.Stat(filepath.Join(m, cgroup)); err == nil {
			return true
		}
	}
	return false
}

// KillAll SIGKILLs every process in any cgroup under root (in every hierarchy) and removes
// the cgroups, retrying briefly while the kernel reaps them. It is for tearing down what an
// agent ran after the agent itself is gone.
func KillAll(mounts []string, root string) error {
	if root == "" || path.Clean("/"+root) == "/" {
		return errors.New("refusing to kill every process of the cgroup root")
	}
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		for _, m := range mounts {
			_ = filepath.WalkDir(filepath.Join(m, root), func(p string, d fs.DirEntry, werr error) error {
				if werr != nil || d.IsDir() || d.Name() != "cgroup.procs" {
					return nil
				}
				b, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(b)) {
					if pid, perr := strconv.Atoi(f); perr == nil && pid > 1 {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				return nil
			})
		}
		if err = removeTree(mounts, root); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// Unified is the mount point of the cgroup2 hierarchy (/sys/fs/cgroup/unified on hybrid
// machines, /sys/fs/cgroup on pure cgroup2 ones), where cgroup BPF programs attach; "" if none.
func Unified() string {
	if m := mountsOf("cgroup2"); len(m) > 0 {
		return m[0]
	}
	return ""
}
