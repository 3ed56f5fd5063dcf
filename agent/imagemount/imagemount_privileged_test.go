package imagemount

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/agent/runtime"
	"github.com/skiff-sh/skiff/images/oci"
)

// TestPrivilegedMount mounts images through Debian's containerd: a one-layer image (the bind
// path), a three-layer one (the overlay path, an upper layer's file over a lower's), each
// read-only; a stale view under the same key is replaced; Keys lists the views, Release removes
// them, and an image that is not there is a clear error.
func TestPrivilegedMount(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root and containerd: make unit (-short) skips it, make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (every machine here has it)")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctrDir := filepath.Join(dir, "containerd")
	c, err := runtime.Start(ctx, runtime.Options{Dir: ctrDir, CNIBinDir: filepath.Join(dir, "cni", "bin"),
		CNIConfDir: filepath.Join(dir, "cni", "net.d"), SandboxImage: "localhost/skiff/pause:1"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close(); runtime.Teardown(ctrDir) }()
	images := map[string]oci.Image{
		"localhost/skiff/one:1": {Files: []oci.File{{Path: "/data.json", Mode: 0o644, Data: []byte(`{"image":"one"}`)}}},
		"localhost/skiff/layers:1": {Files: []oci.File{{Path: "/etc/os-release", Mode: 0o644, Data: []byte("NAME=lower\n")}},
			Layers: [][]oci.File{
				{{Path: "/bin/tool", Mode: 0o755, Data: []byte("#!/bin/sh\n")}},
				{{Path: "/etc/os-release", Mode: 0o644, Data: []byte("NAME=upper\n")}},
			}},
	}
	for name, img := range images {
		img.Name = name
		file := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(name)+".tar")
		if err := oci.WriteFile(file, img); err != nil {
			t.Fatal(err)
		}
		// ctr import unpacks for containerd's default snapshotter, overlayfs, CRI's too.
		if err := c.ImportImage(ctx, file); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := c.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	m := New(conn)

	const prefix = "skiff-test/"
	mountAt := func(image, key string) string {
		t.Helper()
		target := filepath.Join(dir, "mnt", strings.ReplaceAll(key, "/", "_"))
		if err := os.MkdirAll(target, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := m.Mount(ctx, image, key, target); err != nil {
			t.Fatalf("mount %s: %v", image, err)
		}
		t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
		return target
	}
	read := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	readOnly := func(target string) {
		t.Helper()
		err := os.WriteFile(filepath.Join(target, "new"), []byte("x"), 0o644)
		if !errors.Is(err, unix.EROFS) {
			t.Errorf("writing into %s: %v, want EROFS", target, err)
		}
	}

	one := mountAt("localhost/skiff/one:1", prefix+"one")
	if got := read(filepath.Join(one, "data.json")); got != `{"image":"one"}` {
		t.Errorf("one-layer image data.json = %q", got)
	}
	readOnly(one)
	layers := mountAt("localhost/skiff/layers:1", prefix+"layers")
	if got := read(filepath.Join(layers, "etc/os-release")); got != "NAME=upper\n" {
		t.Errorf("layered image os-release = %q, want the upper layer's", got)
	}
	if st, err := os.Stat(filepath.Join(layers, "bin/tool")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("middle layer's bin/tool: %v %v", st, err)
	}
	readOnly(layers)

	// An agent that died after the view but before the mount left the view: mounting again
	// under the key replaces it.
	if err := unix.Unmount(one, 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Mount(ctx, "localhost/skiff/one:1", prefix+"one", one); err != nil {
		t.Fatalf("mount over a stale view: %v", err)
	}
	if got := read(filepath.Join(one, "data.json")); got != `{"image":"one"}` {
		t.Errorf("remounted data.json = %q", got)
	}

	keys, err := m.Keys(ctx, prefix)
	slices.Sort(keys)
	if err != nil || !slices.Equal(keys, []string{prefix + "layers", prefix + "one"}) {
		t.Fatalf("Keys = %v, %v", keys, err)
	}
	for _, target := range []string{one, layers} {
		if err := unix.Unmount(target, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys {
		if err := m.Release(ctx, k); err != nil {
			t.Fatal(err)
		}
		if err := m.Release(ctx, k); err != nil {
			t.Errorf("releasing %s twice: %v", k, err)
		}
	}
	if keys, err := m.Keys(ctx, prefix); err != nil || len(keys) != 0 {
		t.Errorf("after Release: Keys = %v, %v", keys, err)
	}

	target := filepath.Join(dir, "mnt", "absent")
	_ = os.MkdirAll(target, 0o755)
	if err := m.Mount(ctx, "localhost/skiff/absent:1", prefix+"absent", target); err == nil || !strings.Contains(err.Error(), "is not present") {
		t.Errorf("mounting an absent image: %v", err)
	}
}
