package volumes

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// withUmask runs the rest of the test under umask, to prove modes do not depend on it.
func withUmask(t *testing.T, umask int) {
	t.Helper()
	old := syscall.Umask(umask)
	t.Cleanup(func() { syscall.Umask(old) })
}

func TestValidatePayloadPath(t *testing.T) {
	long := strings.Repeat("a", 256)
	for _, tc := range []struct {
		in, want string
		bad      bool
	}{
		{in: "key", want: "key"},
		{in: "a/b/c", want: "a/b/c"},
		{in: "./a", want: "a"},
		{in: "a//b/", want: "a/b"},
		{in: "a/..b", want: "a/..b"}, // only the first element is reserved, as in the kubelet
		{in: "a.", want: "a."},
		{in: "", bad: true},
		{in: "/abs", bad: true},
		{in: "..", bad: true},
		{in: "a/../b", bad: true},
		{in: "a/..", bad: true},
		{in: "..data", bad: true},
		{in: "..2024_01_01", bad: true},
		{in: "..x/y", bad: true},
		{in: ".", bad: true},
		{in: long, bad: true},
		{in: strings.Repeat("a/", 2049), bad: true},
	} {
		got, err := validatePayloadPath(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: accepted as %q", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: got %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestCleanPayloadRejectsFileThatIsADirectory(t *testing.T) {
	_, err := cleanPayload(map[string]file{"a": {}, "a/b/c": {}})
	if err == nil || !strings.Contains(err.Error(), `"a"`) {
		t.Fatalf("got %v", err)
	}
	if _, err := cleanPayload(map[string]file{"a/x": {}, "a/b/c": {}}); err != nil {
		t.Fatal(err)
	}
}

// testOwner is the writer's owner in unprivileged tests: the test process itself.
func testOwner() ownership {
	return ownership{uid: os.Geteuid(), gid: os.Getegid()}
}

func testFiles(t *testing.T, modes map[string]int32, data map[string]string) map[string]file {
	t.Helper()
	out := map[string]file{}
	for p, d := range data {
		a, err := testOwner().fileAttrs(modes[p], nil)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = file{data: []byte(d), attrs: a}
	}
	return out
}

func mustWrite(t *testing.T, dir string, files map[string]file) bool {
	t.Helper()
	changed, err := writeAtomic(dir, files, testOwner().dirAttrs())
	if err != nil {
		t.Fatal(err)
	}
	return changed
}

func version(t *testing.T, dir string) string {
	t.Helper()
	v, err := os.Readlink(filepath.Join(dir, dataLink))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// listing is the volume's top level: names, with link targets.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "..2") {
			name = "..<version>"
		}
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			if strings.HasPrefix(target, "..2") {
				target = "..<version>"
			}
			name += " -> " + target
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func perm(t *testing.T, p string) fs.FileMode {
	t.Helper()
	info, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode() & modeBits
}

func TestWriteAtomicLayoutAndModes(t *testing.T) {
	withUmask(t, 0o077)
	dir := filepath.Join(t.TempDir(), "vol")
	files := testFiles(t, map[string]int32{"a": 0o400, "sub/b": 0o644, "sub/deeper/c": 0o777},
		map[string]string{"a": "1", "sub/b": "2", "sub/deeper/c": "3"})
	if !mustWrite(t, dir, files) {
		t.Fatal("first write reported no change")
	}
	want := []string{"..<version>", "..data -> ..<version>", "a -> ..data/a", "sub -> ..data/sub"}
	if got := listing(t, dir); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("layout %q, want %q", got, want)
	}
	for p, w := range map[string]fs.FileMode{"a": 0o400, "sub/b": 0o644, "sub/deeper/c": 0o777,
		"sub": fs.ModeDir | 0o755, "sub/deeper": fs.ModeDir | 0o755, ".": fs.ModeDir | 0o755} {
		info, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode() & (modeBits | fs.ModeDir); got != w {
			t.Errorf("%s: mode %v, want %v", p, got, w)
		}
	}
	if readString(t, filepath.Join(dir, "sub/deeper/c")) != "3" {
		t.Fatal("content wrong")
	}
}

func TestWriteAtomicUpdates(t *testing.T) {
	dir := t.TempDir()
	v := map[string]string{"a": "1", "b": "2", "d/e": "3"}
	modes := map[string]int32{"a": 0o644, "b": 0o644, "d/e": 0o644}
	mustWrite(t, dir, testFiles(t, modes, v))
	first := version(t, dir)

	t.Run("no-op", func(t *testing.T) {
		if mustWrite(t, dir, testFiles(t, modes, v)) {
			t.Fatal("an unchanged payload was rewritten")
		}
		if version(t, dir) != first {
			t.Fatal("the version changed")
		}
	})
	t.Run("no-op repairs a missing link", func(t *testing.T) {
		if err := os.Remove(filepath.Join(dir, "a")); err != nil {
			t.Fatal(err)
		}
		if mustWrite(t, dir, testFiles(t, modes, v)) {
			t.Fatal("rewritten")
		}
		if readString(t, filepath.Join(dir, "a")) != "1" {
			t.Fatal("link not restored")
		}
	})
	t.Run("change", func(t *testing.T) {
		v["a"] = "changed"
		if !mustWrite(t, dir, testFiles(t, modes, v)) {
			t.Fatal("a changed payload was not written")
		}
		second := version(t, dir)
		if second == first {
			t.Fatal("same version directory")
		}
		if _, err := os.Stat(filepath.Join(dir, first)); !os.IsNotExist(err) {
			t.Fatal("the old version was kept")
		}
		if readString(t, filepath.Join(dir, "a")) != "changed" || readString(t, filepath.Join(dir, "d/e")) != "3" {
			t.Fatal("contents wrong")
		}
		first = second
	})
	t.Run("mode change only", func(t *testing.T) {
		modes["b"] = 0o600
		if !mustWrite(t, dir, testFiles(t, modes, v)) {
			t.Fatal("a mode change was not written")
		}
		if perm(t, filepath.Join(dir, "b")) != 0o600 {
			t.Fatal("mode not applied")
		}
	})
	t.Run("add", func(t *testing.T) {
		v["new"], modes["new"] = "4", 0o644
		v["d/f"], modes["d/f"] = "5", 0o644
		mustWrite(t, dir, testFiles(t, modes, v))
		if readString(t, filepath.Join(dir, "new")) != "4" || readString(t, filepath.Join(dir, "d/f")) != "5" {
			t.Fatal("added files missing")
		}
	})
	t.Run("remove", func(t *testing.T) {
		delete(v, "b")
		delete(v, "d/e")
		mustWrite(t, dir, testFiles(t, modes, v))
		want := []string{"..<version>", "..data -> ..<version>", "a -> ..data/a", "d -> ..data/d", "new -> ..data/new"}
		if got := listing(t, dir); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("layout %q, want %q", got, want)
		}
		if _, err := os.Stat(filepath.Join(dir, "d/e")); !os.IsNotExist(err) {
			t.Fatal("removed nested file still there")
		}
	})
	t.Run("remove everything", func(t *testing.T) { // an optional ConfigMap deleted
		mustWrite(t, dir, map[string]file{})
		want := []string{"..<version>", "..data -> ..<version>"}
		if got := listing(t, dir); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("layout %q, want %q", got, want)
		}
		if mustWrite(t, dir, map[string]file{}) {
			t.Fatal("an empty payload was rewritten")
		}
	})
}

func TestWriteAtomicPrunesLeftoversButNotForeignEntries(t *testing.T) {
	dir := t.TempDir()
	files := testFiles(t, map[string]int32{"a": 0o644}, map[string]string{"a": "1"})
	mustWrite(t, dir, files)
	for _, d := range []string{"..2001_01_01_00_00_00.1", "subpath-dir"} { // a crash's version; a subPath directory
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{newDataLink: "..2001_01_01_00_00_00.1", "gone": "..data/gone", "mine": "elsewhere"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	files["b"] = files["a"]
	mustWrite(t, dir, files)
	want := []string{"..<version>", "..data -> ..<version>", "a -> ..data/a", "b -> ..data/b", "mine -> elsewhere", "subpath-dir"}
	if got := listing(t, dir); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("layout %q, want %q", got, want)
	}
}

func TestWriteAtomicReplacesABadDataLink(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, dataLink)); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, dir, testFiles(t, map[string]int32{"a": 0o644}, map[string]string{"a": "1"}))
	if readString(t, filepath.Join(dir, "a")) != "1" || readString(t, filepath.Join(outside, "keep")) != "x" {
		t.Fatal("a ..data link pointing outside was followed")
	}
}

func TestWriteAtomicRejectsBadPayloadWithoutWriting(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, dir, testFiles(t, map[string]int32{"a": 0o644}, map[string]string{"a": "1"}))
	before := version(t, dir)
	for _, p := range []string{"../escape", "/abs", "..data"} {
		if _, err := writeAtomic(dir, map[string]file{p: {}}, testOwner().dirAttrs()); err == nil {
			t.Fatalf("%q accepted", p)
		}
	}
	if version(t, dir) != before || readString(t, filepath.Join(dir, "a")) != "1" {
		t.Fatal("a rejected payload changed the volume")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape")); !os.IsNotExist(err) {
		t.Fatal("wrote outside the volume")
	}
}

func TestIsVersionName(t *testing.T) {
	for name, want := range map[string]bool{
		"..2024_01_02_15_04_05.123456": true,
		"..2024_01_02_15_04_05.1":      true,
		"..2024_01_02_15_04_05.":       false,
		"..2024_01_02_15_04_05":        false,
		"..2024_13_02_15_04_05.1":      false,
		"..data":                       false,
		"..data_tmp":                   false,
		"..foo":                        false, // a subPath directory a container asked for
		"..":                           false,
		"2024_01_02_15_04_05.1":        false,
		"..2024_01_02_15_04_05.1/x":    false,
	} {
		if got := isVersionName(name); got != want {
			t.Errorf("%q: %v", name, got)
		}
	}
}

func TestWriteAtomicKeepsReservedLookingSubPathDirs(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, dir, testFiles(t, map[string]int32{"a": 0o644}, map[string]string{"a": "1"}))
	if err := os.Mkdir(filepath.Join(dir, "..foo"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, dir, testFiles(t, map[string]int32{"a": 0o644}, map[string]string{"a": "2"}))
	if _, err := os.Stat(filepath.Join(dir, "..foo")); err != nil {
		t.Fatal("a directory named ..foo was pruned")
	}
}

func TestWriteAtomicTakesOverFilesWrittenBeforeVersions(t *testing.T) {
	dir := t.TempDir()
	// The layout skiff's agent wrote before: plain files and directories, a temporary file.
	for p, d := range map[string]string{"k": "old", "sub/b.txt": "old", "k.skiff-tmp": "", "removed/x": "old"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(d), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, dir, testFiles(t, map[string]int32{"k": 0o644, "sub/b.txt": 0o644},
		map[string]string{"k": "new", "sub/b.txt": "new"}))
	want := []string{"..<version>", "..data -> ..<version>", "k -> ..data/k", "removed", "sub -> ..data/sub"}
	if got := listing(t, dir); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("layout %q, want %q", got, want)
	}
	if readString(t, filepath.Join(dir, "sub/b.txt")) != "new" {
		t.Fatal("old content still visible")
	}
}
