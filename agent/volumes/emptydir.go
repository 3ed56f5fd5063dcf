package volumes

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// emptyDirMode is an emptyDir's mode: every container user may write it, whatever the umask.
const emptyDirMode fs.FileMode = 0o777

// setupEmptyDir makes an emptyDir once per pod, as the kubelet does: the directory 0777 (or
// its mode field), a tmpfs on it for medium Memory, fsGroup ownership — then a ready marker, so
// later calls (every resync) leave alone what the containers have since done to it. A marker
// whose directory or tmpfs has gone (a reboot) makes it set the volume up again.
func (m *Manager) setupEmptyDir(pod *corev1.Pod, v corev1.Volume, own ownership) error {
	src := v.EmptyDir
	if src.Medium != corev1.StorageMediumDefault && src.Medium != corev1.StorageMediumMemory {
		return fmt.Errorf("emptyDir medium %q is not supported by skiff's agent", src.Medium)
	}
	mode, err := emptyDirModeOf(src.Mode)
	if err != nil {
		return err
	}
	dir := m.dir(pod, "empty-dir", v.Name)
	marker := filepath.Join(m.root, string(pod.UID), "plugins", "empty-dir", v.Name, "ready")
	if ready, err := emptyDirReady(dir, marker, src.Medium); err != nil || ready {
		return err
	}
	onDisk := true
	if src.Medium == corev1.StorageMediumMemory {
		onDisk, err = m.setupTmpfs(pod, dir, mode, src)
	} else {
		err = setupDir(dir, mode)
	}
	if err != nil {
		return err
	}
	if own.fsGroup != nil {
		if err := applyFSGroup(dir, *own.fsGroup); err != nil {
			return fmt.Errorf("fsGroup %d: %w", *own.fsGroup, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(marker), 0o750); err != nil {
		return err
	}
	content := []byte(markerTmpfs)
	if onDisk {
		content = []byte(markerDisk)
	}
	return os.WriteFile(marker, content, 0o600)
}

// The ready marker says where the volume lives, so a memory emptyDir kept on disk (see
// setupTmpfs) is not taken for a tmpfs lost to a reboot.
const (
	markerDisk  = "disk"
	markerTmpfs = "tmpfs"
)

// setupTmpfs mounts the tmpfs of a memory emptyDir, unless one is there already, and reports
// whether the volume stays on disk instead. It never mounts over a directory that holds files
// (a memory emptyDir the agent kept on disk before it mounted tmpfs): containers already
// running would go on seeing the hidden files while new ones saw an empty tmpfs.
func (m *Manager) setupTmpfs(pod *corev1.Pod, dir string, mode fs.FileMode, src *corev1.EmptyDirVolumeSource) (bool, error) {
	if mounted, err := isTmpfsMount(dir); err == nil && mounted {
		return false, nil
	}
	if err := setupDir(dir, mode); err != nil {
		return false, err
	}
	if empty, err := isEmptyDir(dir); err != nil || !empty {
		return true, err
	}
	if err := mountTmpfs(dir, tmpfsSize(pod, src.SizeLimit, m.nodeInfo().allocatable)); err != nil {
		return false, err
	}
	if src.Mode != nil { // the tmpfs root hides the directory's mode; give it the one asked
		return false, os.Chmod(dir, mode)
	}
	return false, nil
}

func isEmptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	_, err = f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return false, err
}

// emptyDirReady reports whether a previous setup still stands; when the marker outlived the
// volume it removes the marker.
func emptyDirReady(dir, marker string, medium corev1.StorageMedium) (bool, error) {
	content, err := os.ReadFile(marker)
	if err != nil {
		return false, nil
	}
	if medium == corev1.StorageMediumMemory && string(content) != markerDisk {
		if mounted, err := isTmpfsMount(dir); err == nil && mounted {
			return true, nil
		}
	} else if info, err := os.Stat(dir); err == nil && info.IsDir() {
		return true, nil
	}
	if err := os.Remove(marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return false, nil
}

// emptyDirModeOf is the directory's mode: the mode field (0 to 01777) when set, else 0777.
func emptyDirModeOf(mode *int32) (fs.FileMode, error) {
	if mode == nil {
		return emptyDirMode, nil
	}
	if *mode < 0 || *mode > 0o1777 {
		return 0, fmt.Errorf("emptyDir mode %#o is outside 0 to 01777", *mode)
	}
	m := fs.FileMode(*mode & 0o777)
	if *mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m, nil
}

// setupDir creates dir and chmods it explicitly: MkdirAll's mode is cut by the umask.
func setupDir(dir string, mode fs.FileMode) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if info.Mode()&modeBits != mode {
		return os.Chmod(dir, mode)
	}
	return nil
}

// mountTmpfs mounts a tmpfs of size bytes (0: the kernel's default, half the RAM) on dir.
// Like the kubelet it passes no mode, so the tmpfs root is the kernel's 01777.
func mountTmpfs(dir string, size int64) error {
	opts := ""
	if size > 0 {
		opts = fmt.Sprintf("size=%d", size)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		return fmt.Errorf("mounting a tmpfs on %s: %w", dir, err)
	}
	return nil
}

// isTmpfsMount reports whether a tmpfs is mounted on dir itself: a tmpfs whose device differs
// from its parent's (a directory merely inside a tmpfs shares its device).
func isTmpfsMount(dir string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false, err
	}
	if st.Type != unix.TMPFS_MAGIC {
		return false, nil
	}
	return isMountPoint(dir)
}

func isMountPoint(dir string) (bool, error) {
	var self, parent unix.Stat_t
	if err := unix.Lstat(dir, &self); err != nil {
		return false, err
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, err
	}
	return self.Dev != parent.Dev || self.Ino == parent.Ino, nil
}

// tmpfsSize is the kubelet's size of a memory emptyDir: the smallest of the node's allocatable
// memory, the pod's memory limit and the volume's sizeLimit, counting only those set and
// positive; 0 when none is.
func tmpfsSize(pod *corev1.Pod, sizeLimit *resource.Quantity, allocatable corev1.ResourceList) int64 {
	var size int64
	smaller := func(v int64) {
		if v > 0 && (size == 0 || v < size) {
			size = v
		}
	}
	if q, ok := allocatable[corev1.ResourceMemory]; ok {
		smaller(q.Value())
	}
	if limit, ok := podMemoryLimit(pod); ok {
		smaller(limit)
	}
	if sizeLimit != nil {
		smaller(sizeLimit.Value())
	}
	return size
}

// podMemoryLimit is the memory the pod may use, as its cgroup is sized: the pod-level limit
// when set, else — only when every container sets a memory limit — what its containers can use
// at once (regular containers and sidecars together, or an init container with the sidecars
// started before it, whichever is more), plus the pod's overhead.
func podMemoryLimit(pod *corev1.Pod) (int64, bool) {
	if r := pod.Spec.Resources; r != nil {
		if q, ok := r.Limits[corev1.ResourceMemory]; ok {
			return q.Value(), true
		}
	}
	limit := func(c corev1.Container) (int64, bool) {
		q, ok := c.Resources.Limits[corev1.ResourceMemory]
		return q.Value(), ok
	}
	var sidecars, initPeak int64
	for _, c := range pod.Spec.InitContainers {
		l, ok := limit(c)
		if !ok {
			return 0, false
		}
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars += l
			continue
		}
		initPeak = max(initPeak, sidecars+l)
	}
	var regular int64
	for _, c := range pod.Spec.Containers {
		l, ok := limit(c)
		if !ok {
			return 0, false
		}
		regular += l
	}
	total := max(regular+sidecars, initPeak)
	if q, ok := pod.Spec.Overhead[corev1.ResourceMemory]; ok {
		total += q.Value()
	}
	return total, true
}
