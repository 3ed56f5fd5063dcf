package volumes

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExpandSubPathExpr(t *testing.T) {
	env := map[string]string{"POD_NAME": "p", "EMPTY": ""}
	if got, err := expandSubPathExpr("$(POD_NAME)/logs", env); err != nil || got != "p/logs" {
		t.Fatalf("%q %v", got, err)
	}
	if got, err := expandSubPathExpr("$$(POD_NAME)", env); err != nil || got != "$(POD_NAME)" {
		t.Fatalf("escaped: %q %v", got, err)
	}
	_, err := expandSubPathExpr("$(Z)/$(EMPTY)/$(Z)/$(A)", env)
	if err == nil || err.Error() != "missing value for A, EMPTY, Z" {
		t.Fatalf("got %v", err)
	}
	if _, err := expandSubPathExpr("$(A)", nil); err == nil {
		t.Fatal("a nil environment resolved a variable")
	}
}

func TestValidateSubPath(t *testing.T) {
	for p, ok := range map[string]bool{
		"a": true, "a/b": true, "a/..b": true, "..a": true, "a.": true, ".": true,
		"/tmp": false, "..": false, "../a": false, "a/..": false, "a/../b": false, "a`b`": false, "`": false,
	} {
		if err := validateSubPath(p); (err == nil) != ok {
			t.Errorf("%q: %v", p, err)
		}
	}
}

func TestSubPathHost(t *testing.T) {
	withUmask(t, 0o077)
	base := t.TempDir()
	root, err := filepath.EvalSymlinks(filepath.Join(base))
	if err != nil {
		t.Fatal(err)
	}
	vol := filepath.Join(root, "vol")
	outside := filepath.Join(root, "outside")
	for _, d := range []string{vol, outside} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(vol, 0o777|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(vol, "file"), []byte("x"), 0o644))
	must(os.Mkdir(filepath.Join(vol, "real"), 0o755))
	must(os.Symlink("real", filepath.Join(vol, "inside-link")))
	must(os.Symlink(outside, filepath.Join(vol, "escape")))
	must(os.Symlink("../outside", filepath.Join(vol, "escape-rel")))

	t.Run("created with the root's mode", func(t *testing.T) {
		got, err := subPathHost(vol, "new/deeper")
		if err != nil || got != filepath.Join(vol, "new/deeper") {
			t.Fatalf("%q %v", got, err)
		}
		for _, p := range []string{"new", "new/deeper"} {
			if m := perm(t, filepath.Join(vol, p)); m != 0o777|fs.ModeSticky {
				t.Errorf("%s: mode %v", p, m)
			}
		}
	})
	t.Run("existing", func(t *testing.T) {
		for sub, want := range map[string]string{"file": "file", "real": "real", "inside-link": "real", ".": ""} {
			got, err := subPathHost(vol, sub)
			if err != nil || got != filepath.Join(vol, want) {
				t.Errorf("%s: %q %v", sub, got, err)
			}
		}
	})
	t.Run("escaping symlinks", func(t *testing.T) {
		for _, sub := range []string{"escape", "escape-rel", "escape/new", "escape-rel/a/b"} {
			if got, err := subPathHost(vol, sub); err == nil {
				t.Errorf("%s: resolved to %q", sub, got)
			}
		}
		entries, _ := os.ReadDir(outside)
		if len(entries) != 0 {
			t.Fatalf("created outside the volume: %v", entries)
		}
	})
	t.Run("not prepared", func(t *testing.T) {
		if _, err := subPathHost(filepath.Join(root, "absent"), "a"); err == nil {
			t.Fatal("accepted")
		}
	})
}

func TestSubPathOfAtomicWriterVolumeIsTheCurrentVersion(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, dir, testFiles(t, map[string]int32{"k": 0o644, "d/e": 0o644}, map[string]string{"k": "1", "d/e": "2"}))
	resolved, _ := filepath.EvalSymlinks(dir)
	v1 := version(t, dir)
	got, err := subPathHost(dir, "k")
	if err != nil || got != filepath.Join(resolved, v1, "k") {
		t.Fatalf("%q %v", got, err)
	}
	if got, err := subPathHost(dir, "d"); err != nil || got != filepath.Join(resolved, v1, "d") {
		t.Fatalf("directory: %q %v", got, err)
	}
	mustWrite(t, dir, testFiles(t, map[string]int32{"k": 0o644}, map[string]string{"k": "2"}))
	if got, err := subPathHost(dir, "k"); err != nil || !strings.Contains(got, version(t, dir)) {
		t.Fatalf("after an update: %q %v", got, err)
	}
}

func TestKernelMode(t *testing.T) {
	for m, want := range map[fs.FileMode]uint32{
		0o755:                                 0o755,
		0o777 | fs.ModeSticky:                 0o1777,
		0o777 | fs.ModeSetgid:                 0o2777,
		0o777 | fs.ModeSetgid | fs.ModeSticky: 0o3777,
		0o755 | fs.ModeSetuid | fs.ModeDir:    0o4755,
	} {
		if got := kernelMode(m); got != want {
			t.Errorf("%v: %#o, want %#o", m, got, want)
		}
	}
}
