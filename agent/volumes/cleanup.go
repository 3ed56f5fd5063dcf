package volumes

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// unmount is unix.Unmount; tests replace it to make an unmount fail.
var unmount = unix.Unmount

// mountPointsUnder lists, from a /proc/<pid>/mountinfo, the mount points at or below dir,
// deepest first (the order they must be unmounted in). A path mounted over twice is listed
// twice: each unmount removes one layer.
func mountPointsUnder(mountinfo io.Reader, dir string) ([]string, error) {
	var points []string
	sc := bufio.NewScanner(mountinfo)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			return nil, fmt.Errorf("mountinfo: malformed line %q", sc.Text())
		}
		p := unescapeMountPath(fields[4])
		if within(dir, p) {
			points = append(points, p)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	slices.SortStableFunc(points, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return points, nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space, \011, \012, \134).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func readMountPoints(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return mountPointsUnder(f, dir)
}

// unmountAll unmounts every mount at or below dir: memory emptyDirs, and whatever else was
// mounted there. A busy mount is detached (it lives on for whoever still uses it, but is no
// longer reachable through dir). Mounts can hide others, so it goes round until none is left
// or a round makes no progress; it fails when a mount is still there.
func unmountAll(dir string) error {
	var errs []error
	for range 8 {
		points, err := readMountPoints(dir)
		if err != nil {
			return err
		}
		if len(points) == 0 {
			return nil
		}
		errs = errs[:0]
		progress := false
		for _, p := range points {
			if err := unmountOne(p); err != nil {
				errs = append(errs, err)
			} else {
				progress = true
			}
		}
		if !progress {
			break
		}
	}
	left, err := readMountPoints(dir)
	if err != nil {
		return err
	}
	if len(left) == 0 {
		return nil
	}
	return fmt.Errorf("still mounted: %s: %w", strings.Join(left, ", "), errors.Join(errs...))
}

func unmountOne(p string) error {
	err := unmount(p, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unmount(p, unix.MNT_DETACH)
	}
	if err != nil {
		return fmt.Errorf("unmounting %s: %w", p, err)
	}
	return nil
}

// removeTree removes dir and everything below it without ever crossing into another
// filesystem: a directory on another device than dir is a mount the unmount missed, and
// removing through it would delete what the mount shows (a host path, a tmpfs in use). Such a
// directory, and the ones above it, are left in place and reported.
func removeTree(dir string) error {
	var root unix.Stat_t
	if err := unix.Lstat(dir, &root); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	return removeOnDevice(dir, root.Dev)
}

func removeOnDevice(p string, dev uint64) error {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return ignoreNotExist(os.Remove(p))
	}
	if st.Dev != dev {
		return fmt.Errorf("%s is another filesystem (a mount point?): not removing it", p)
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return ignoreNotExist(err)
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, removeOnDevice(filepath.Join(p, e.Name()), dev))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ignoreNotExist(os.Remove(p))
}

func ignoreNotExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
