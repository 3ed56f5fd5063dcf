// Package cgroups names each pod's cgroup parent (/skiff/pod<uid>, under every mounted
// hierarchy, v1 and v2 alike, with the cgroupfs driver) and removes it when the pod is gone:
// containerd removes its containers' cgroups but not the parent the agent asked for.
package cgroups

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Parent is the cgroup parent of a pod's sandbox and containers.
func Parent(uid string) string { return "/skiff/pod" + uid }

// Mounts lists the mount points of the cgroup (v1) and cgroup2 hierarchies.
func Mounts() []string {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 2 && (f[2] == "cgroup" || f[2] == "cgroup2") {
			out = append(out, f[1])
		}
	}
	return out
}

// Remove deletes the pod's cgroup directories (deepest first) in every hierarchy. A cgroup
// that still holds processes cannot be removed; that error is returned.
func Remove(mounts []string, uid string) error {
	var errs []error
	for _, m := range mounts {
		root := filepath.Join(m, Parent(uid))
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

// Exists reports whether the pod's cgroup is present in any hierarchy.
func Exists(mounts []string, uid string) bool {
	for _, m := range mounts {
		if _, err := os.Stat(filepath.Join(m, Parent(uid))); err == nil {
			return true
		}
	}
	return false
}
