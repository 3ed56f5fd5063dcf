package volumes

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// The atomic writer gives configMap, secret, downwardAPI and projected volumes the layout the
// kubelet gives them, because applications (and the conformance tests) rely on it:
//
//	<dir>/..2024_01_02_15_04_05.123456789/   the real files of one version
//	<dir>/..data -> ..2024_01_02_15_04_05.123456789
//	<dir>/<top>  -> ..data/<top>             one link per top-level entry
//
// A new version is written whole into a fresh timestamped directory and published by renaming
// a symlink over ..data, so a reader sees either the old or the new version and never a mix;
// watchers can watch ..data. Names starting with ".." are reserved for this machinery.
const (
	dataLink    = "..data"
	newDataLink = "..data_tmp"

	maxPathLength = 4096 // as the kubelet: PATH_MAX
	maxNameLength = 255  // as the kubelet: NAME_MAX
)

// attrs are the permission bits and owner a written file or directory must end up with.
type attrs struct {
	mode     fs.FileMode // permission bits, plus setgid for directories under an fsGroup
	uid, gid int
}

// file is one file of a payload.
type file struct {
	data []byte
	attrs
}

// validatePayloadPath checks a payload path as the kubelet's atomic writer does: relative,
// no '..' element, not starting with '..' (reserved for ..data and the timestamped
// directories), within the kernel's length limits. It returns the cleaned path.
func validatePayloadPath(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("invalid path: must not be empty")
	case path.IsAbs(p):
		return "", fmt.Errorf("invalid path %q: must be relative", p)
	case len(p) > maxPathLength:
		return "", fmt.Errorf("invalid path %q: longer than %d characters", p, maxPathLength)
	}
	elems := strings.Split(p, "/")
	for _, e := range elems {
		if e == ".." {
			return "", fmt.Errorf("invalid path %q: must not contain '..'", p)
		}
		if len(e) > maxNameLength {
			return "", fmt.Errorf("invalid path %q: a name is longer than %d characters", p, maxNameLength)
		}
	}
	if strings.HasPrefix(elems[0], "..") {
		return "", fmt.Errorf("invalid path %q: must not start with '..'", p)
	}
	clean := path.Clean(p)
	if clean == "." {
		return "", fmt.Errorf("invalid path %q: names no file", p)
	}
	return clean, nil
}

// cleanPayload validates every path and rejects a path that is both a file and the parent
// directory of another file, which no directory tree can hold.
func cleanPayload(files map[string]file) (map[string]file, error) {
	out := make(map[string]file, len(files))
	for p, f := range files {
		clean, err := validatePayloadPath(p)
		if err != nil {
			return nil, err
		}
		out[clean] = f
	}
	for p := range out {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := out[d]; ok {
				return nil, fmt.Errorf("invalid paths: %q is a file and the parent directory of %q", d, p)
			}
		}
	}
	return out, nil
}

// entry is what a path of a version directory holds, as written or as found on disk.
type entry struct {
	dir  bool
	mode fs.FileMode // permission, setuid, setgid and sticky bits
	uid  int
	gid  int
	data []byte // files only
}

func (e entry) equal(o entry) bool {
	return e.dir == o.dir && e.mode == o.mode && e.uid == o.uid && e.gid == o.gid && bytes.Equal(e.data, o.data)
}

const modeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// desiredTree lists every path a version directory must hold for the payload: the files and
// each directory above them ("" is the version directory itself).
func desiredTree(files map[string]file, dirs attrs) map[string]entry {
	tree := map[string]entry{"": {dir: true, mode: dirs.mode, uid: dirs.uid, gid: dirs.gid}}
	for p, f := range files {
		tree[p] = entry{mode: f.mode, uid: f.uid, gid: f.gid, data: f.data}
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			tree[d] = entry{dir: true, mode: dirs.mode, uid: dirs.uid, gid: dirs.gid}
		}
	}
	return tree
}

// readTree lists what a version directory holds. Anything but plain files and directories
// (which the writer never creates) is reported as an entry that matches nothing.
func readTree(dir string) (map[string]entry, error) {
	tree := map[string]entry{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			rel = ""
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := entry{dir: info.IsDir(), mode: info.Mode() & modeBits, uid: -1, gid: -1}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			e.uid, e.gid = int(st.Uid), int(st.Gid)
		}
		switch {
		case info.Mode().IsRegular():
			if e.data, err = os.ReadFile(p); err != nil {
				return err
			}
		case !info.IsDir():
			e.mode = fs.ModeIrregular // a symlink, device...: never what the payload asks for
		}
		tree[rel] = e
		return nil
	})
	return tree, err
}

func sameTree(a, b map[string]entry) bool {
	if len(a) != len(b) {
		return false
	}
	for p, e := range a {
		o, ok := b[p]
		if !ok || !e.equal(o) {
			return false
		}
	}
	return true
}

// writeAtomic makes dir present exactly files (paths relative to dir), each with its mode and
// owner, directories with dirs. It reports whether it published a new version: when the current
// version already has the same contents, modes and owners it writes nothing.
func writeAtomic(dir string, files map[string]file, dirs attrs) (bool, error) {
	files, err := cleanPayload(files)
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	if err := ensureAttrs(dir, dirs); err != nil {
		return false, err
	}
	current := currentVersion(dir)
	changed := true
	if current == "" {
		if err := clearUnversioned(dir, files); err != nil {
			return false, err
		}
	} else {
		have, err := readTree(filepath.Join(dir, current))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("reading the current version: %w", err)
		}
		changed = err != nil || !sameTree(have, desiredTree(files, dirs))
	}
	if changed {
		if current, err = publish(dir, files, dirs); err != nil {
			return false, err
		}
	}
	if err := linkTopLevel(dir, files); err != nil {
		return changed, err
	}
	return changed, prune(dir, current, files)
}

// currentVersion is the version directory ..data points at, or "" when there is none or the
// link points anywhere else (it is then simply replaced, never followed).
func currentVersion(dir string) string {
	target, err := os.Readlink(filepath.Join(dir, dataLink))
	if err != nil || !isVersionName(target) {
		return ""
	}
	return target
}

// versionLayout is the timestamp that names a version directory, after its ".." and before
// the random suffix os.MkdirTemp adds.
const versionLayout = "2006_01_02_15_04_05"

// isVersionName reports whether name is a version directory's: "..<timestamp>.<suffix>". The
// writer removes only such names (and its own links), so it never deletes outside dir nor a
// directory a container asked for as a subPath, even one named "..something".
func isVersionName(name string) bool {
	rest, ok := strings.CutPrefix(name, "..")
	if !ok || len(rest) < len(versionLayout)+2 || rest[len(versionLayout)] != '.' || strings.Contains(rest, "/") {
		return false
	}
	_, err := time.Parse(versionLayout, rest[:len(versionLayout)])
	return err == nil
}

// clearUnversioned readies a volume that has no version yet but may hold files written
// directly into it (by skiff's agent before it had this writer): regular files at the top
// level, and directories where the payload's links must go, are removed so the links can take
// their place. A container that mounted one of them keeps the file it has.
func clearUnversioned(dir string, files map[string]file) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	tops := topLevel(files)
	var errs []error
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		switch {
		case strings.HasPrefix(e.Name(), ".."):
		case e.Type().IsRegular():
			errs = append(errs, os.Remove(p))
		case e.IsDir() && tops[e.Name()]:
			errs = append(errs, removeTree(p))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clearing files written before versions: %w", err)
	}
	return nil
}

// publish writes files into a new timestamped directory and points ..data at it.
func publish(dir string, files map[string]file, dirs attrs) (string, error) {
	version, err := os.MkdirTemp(dir, ".."+time.Now().UTC().Format(versionLayout)+".")
	if err != nil {
		return "", fmt.Errorf("creating a version directory: %w", err)
	}
	name := filepath.Base(version)
	if err := writeVersion(version, files, dirs); err != nil {
		_ = os.RemoveAll(version)
		return "", err
	}
	tmp := filepath.Join(dir, newDataLink)
	_ = os.Remove(tmp) // a leftover of an interrupted write
	if err := os.Symlink(name, tmp); err != nil {
		_ = os.RemoveAll(version)
		return "", fmt.Errorf("linking the new version: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataLink)); err != nil { // the atomic step
		_ = os.Remove(tmp)
		_ = os.RemoveAll(version)
		return "", fmt.Errorf("publishing the new version: %w", err)
	}
	return name, nil
}

func writeVersion(version string, files map[string]file, dirs attrs) error {
	if err := ensureAttrs(version, dirs); err != nil {
		return err
	}
	// Shallow paths first, so each directory is created (and given its attrs) once.
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		if err := mkdirsWithAttrs(version, path.Dir(p), dirs); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(version, p), files[p]); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
	}
	return nil
}

// mkdirsWithAttrs creates rel (and its parents) below base, each with dirs.
func mkdirsWithAttrs(base, rel string, dirs attrs) error {
	if rel == "." {
		return nil
	}
	cur := base
	for _, e := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, e)
		err := os.Mkdir(cur, 0o700)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := ensureAttrs(cur, dirs); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(p string, f file) error {
	// Created 0600 and then given its mode: the mode must be exactly what was asked, whatever
	// the umask, and the file must never be readable by others before its owner is set.
	w, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := w.Write(f.data); err != nil {
		_ = w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return ensureAttrs(p, f.attrs)
}

// ensureAttrs gives p its owner, then its mode (chown clears setuid and setgid, so it goes
// first), touching neither when they are already right.
func ensureAttrs(p string, a attrs) error {
	info, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if st, ok := info.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != a.uid || int(st.Gid) != a.gid {
		if err := os.Lchown(p, a.uid, a.gid); err != nil {
			return err
		}
		if info, err = os.Lstat(p); err != nil {
			return err
		}
	}
	if info.Mode()&modeBits != a.mode {
		return os.Chmod(p, a.mode)
	}
	return nil
}

// linkTopLevel creates the user-visible link of every top-level entry that lacks one. A name
// taken by something else (a subPath directory the container asked for) is left alone, as the
// kubelet does: the file is still reachable below ..data.
func linkTopLevel(dir string, files map[string]file) error {
	for top := range topLevel(files) {
		link := filepath.Join(dir, top)
		if _, err := os.Lstat(link); err == nil || !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := os.Symlink(path.Join(dataLink, top), link); err != nil {
			return fmt.Errorf("linking %s: %w", top, err)
		}
	}
	return nil
}

func topLevel(files map[string]file) map[string]bool {
	tops := map[string]bool{}
	for p := range files {
		top, _, _ := strings.Cut(p, "/")
		tops[top] = true
	}
	return tops
}

// prune removes what the current version no longer has: the links of top-level entries that
// are gone (a key removed from a ConfigMap, an optional ConfigMap deleted), the previous
// version and anything an interrupted write left behind. It removes only the writer's own
// links and reserved names, never what a container created there.
func prune(dir, current string, files map[string]file) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	tops := topLevel(files)
	var errs []error
	for _, e := range entries {
		name := e.Name()
		p := filepath.Join(dir, name)
		switch {
		case name == dataLink || name == current:
		case name == newDataLink:
			errs = append(errs, os.Remove(p))
		case isVersionName(name):
			errs = append(errs, os.RemoveAll(p))
		case !tops[name] && isOwnLink(p, name):
			errs = append(errs, os.Remove(p))
		}
	}
	return errors.Join(errs...)
}

func isOwnLink(p, name string) bool {
	target, err := os.Readlink(p)
	return err == nil && target == path.Join(dataLink, name)
}
