package volumes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMountPointsUnder(t *testing.T) {
	const mountinfo = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:40 / /var/lib/skiff/pods/u1/volumes/empty-dir/mem rw - tmpfs tmpfs rw,size=1024k
31 30 0:41 / /var/lib/skiff/pods/u1/volumes/empty-dir/mem/nested rw - tmpfs tmpfs rw
32 22 0:42 / /var/lib/skiff/pods/u10/volumes/empty-dir/mem rw - tmpfs tmpfs rw
33 22 0:43 / /var/lib/skiff/pods/u1/volumes/empty-dir/with\040space rw - tmpfs tmpfs rw
34 22 0:44 / /var/lib/skiff/pods/u1 rw - tmpfs tmpfs rw
35 30 0:45 / /var/lib/skiff/pods/u1/volumes/empty-dir/mem rw - tmpfs tmpfs rw
`
	got, err := mountPointsUnder(strings.NewReader(mountinfo), "/var/lib/skiff/pods/u1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/var/lib/skiff/pods/u1/volumes/empty-dir/mem/nested",
		"/var/lib/skiff/pods/u1/volumes/empty-dir/mem",
		"/var/lib/skiff/pods/u1/volumes/empty-dir/with space",
		"/var/lib/skiff/pods/u1/volumes/empty-dir/mem", // mounted over twice: unmounted twice
		"/var/lib/skiff/pods/u1",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := mountPointsUnder(strings.NewReader("garbage\n"), "/"); err == nil {
		t.Fatal("a malformed line was accepted")
	}
}

func TestUnescapeMountPath(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:         "/plain",
		`/a\040b`:        "/a b",
		`/tab\011nl\012`: "/tab\tnl\n",
		`/back\134slash`: `/back\slash`,
		`/short\04`:      `/short\04`,
		`/not\999octal`:  `/not\999octal`,
		`/end\`:          `/end\`,
	} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func TestRemoveTree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pod")
	for _, d := range []string{"a/b/c", "ro"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "a/b/c/f"), []byte("x"), 0o400); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := removeTree(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatal("not removed")
	}
	if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
		t.Fatal("followed a symlink out of the tree")
	}
	if err := removeTree(dir); err != nil {
		t.Fatalf("removing nothing: %v", err)
	}
}
