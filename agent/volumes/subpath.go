package volumes

import (
	"errors"
	"fmt"
	"github.com/skiff-sh/skiff/agent/expansion"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// expandSubPathExpr expands a volumeMount's subPathExpr with the container's environment. As
// in the kubelet, a variable that is not set or is empty is an error rather than left as
// written: the subPath would otherwise silently name another directory.
func expandSubPathExpr(expr string, env map[string]string) (string, error) {
	var missing []string
	out := expansion.Expand(expr, func(name string) (string, bool) {
		v, ok := env[name]
		if !ok || v == "" {
			if !slices.Contains(missing, name) {
				missing = append(missing, name)
			}
		}
		return v, true
	})
	if len(missing) > 0 {
		slices.Sort(missing)
		return "", fmt.Errorf("missing value for %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// validateSubPath rejects a subPath (given or expanded) that could leave the volume.
func validateSubPath(p string) error {
	switch {
	case filepath.IsAbs(p):
		return fmt.Errorf("subPath %q must not be an absolute path", p)
	case slices.Contains(strings.Split(p, "/"), ".."):
		return fmt.Errorf("subPath %q must not contain '..'", p)
	case strings.Contains(p, "`"):
		return fmt.Errorf("subPath %q must not contain backticks", p)
	}
	return nil
}

// subPathOf is the volumeMount's subPath, subPathExpr expanded with env, validated; "" for
// none.
func subPathOf(vm corev1.VolumeMount, env map[string]string) (string, error) {
	p := vm.SubPath
	if vm.SubPathExpr != "" {
		var err error
		if p, err = expandSubPathExpr(vm.SubPathExpr, env); err != nil {
			return "", fmt.Errorf("subPathExpr %q: %w", vm.SubPathExpr, err)
		}
	}
	if p == "" {
		return "", nil
	}
	if err := validateSubPath(p); err != nil {
		return "", err
	}
	return filepath.Clean(p), nil
}

// subPathHost is the host path to mount for subPath of the volume at root. A missing subPath
// is created as a directory with the mode of the volume's root (setgid and sticky included),
// as the kubelet does, so it is as writable as the volume — by the fsGroup too. The path is
// then resolved, symlinks included, and must stay inside the volume: a container could have
// made a component a symlink out of it. Atomic-writer volumes thus mount the file of the
// version current now, which later updates do not replace (as with the kubelet).
//
// The kubelet also bind-mounts the resolved path through a file descriptor, closing the window
// in which a container could swap a directory for a symlink between this check and the
// runtime's mount; skiff's agent hands the runtime the resolved path.
func subPathHost(root, subPath string) (string, error) {
	base, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("volume not prepared: %w", err)
	}
	target := filepath.Join(base, subPath)
	if _, err := os.Lstat(target); errors.Is(err, fs.ErrNotExist) {
		info, err := os.Stat(base)
		if err != nil {
			return "", err
		}
		if err := safeMkdirAll(base, subPath, info.Mode()&modeBits); err != nil {
			return "", fmt.Errorf("creating subPath %q: %w", subPath, err)
		}
	}
	resolved, err := filepath.EvalSymlinks(target)
	if err != nil {
		return "", fmt.Errorf("subPath %q: %w", subPath, err)
	}
	if !within(base, resolved) {
		return "", fmt.Errorf("subPath %q resolves outside the volume", subPath)
	}
	return resolved, nil
}

func within(base, p string) bool {
	return p == base || strings.HasPrefix(p, base+string(filepath.Separator))
}

// safeMkdirAll creates rel below base, each missing directory with mode (exactly: it is
// chmod-ed after mkdir, past the umask). It walks from base by file descriptor, refusing to
// follow any symlink, so a container that owns part of the volume cannot redirect the
// creation outside it.
func safeMkdirAll(base, rel string, mode fs.FileMode) error {
	fd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }()
	for _, name := range strings.Split(rel, "/") {
		if name == "" || name == "." {
			continue
		}
		created := false
		err := unix.Mkdirat(fd, name, 0o700)
		switch {
		case err == nil:
			created = true
		case !errors.Is(err, unix.EEXIST):
			return fmt.Errorf("mkdir %s: %w", name, err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", name, err) // ELOOP: a symlink
		}
		_ = unix.Close(fd)
		fd = next
		if created {
			if err := unix.Fchmod(fd, kernelMode(mode)); err != nil {
				return fmt.Errorf("chmod %s: %w", name, err)
			}
		}
	}
	return nil
}

// kernelMode turns Go's mode bits into chmod(2)'s.
func kernelMode(m fs.FileMode) uint32 {
	k := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		k |= unix.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		k |= unix.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		k |= unix.S_ISVTX
	}
	return k
}
