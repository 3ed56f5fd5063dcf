package volumes

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func needRoot(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs root: make unit (-short) skips it, make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (every machine here has it)")
	}
}

// privilegedManager is a manager whose pod directories are detached and removed when the test
// ends, even when it fails halfway through with tmpfs mounted.
func privilegedManager(t *testing.T, secrets ...*corev1.Secret) *Manager {
	t.Helper()
	root := t.TempDir()
	t.Cleanup(func() {
		resolved, err := filepath.EvalSymlinks(root)
		if err != nil {
			return
		}
		points, _ := readMountPoints(resolved)
		for _, p := range points {
			_ = unix.Unmount(p, unix.MNT_DETACH)
		}
	})
	client := fakeClient(nil)
	for _, s := range secrets {
		if _, err := client.CoreV1().Secrets(s.Namespace).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return New(client, root)
}

func owner(t *testing.T, p string) (uid, gid int) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Uid), int(st.Gid)
}

func tmpfsMounted(t *testing.T, dir string) bool {
	t.Helper()
	ok, err := isTmpfsMount(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestPrivilegedMemoryEmptyDir(t *testing.T) {
	needRoot(t)
	m := privilegedManager(t)
	size := resource.MustParse("10Mi")
	pod := testPod(corev1.Volume{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory, SizeLimit: &size}}})
	ctx := context.Background()
	if err := m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	dir := m.dir(pod, "empty-dir", "mem")
	if !tmpfsMounted(t, dir) {
		t.Fatal("no tmpfs mounted")
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if got := int64(st.Blocks) * st.Bsize; got != 10<<20 {
		t.Fatalf("tmpfs size %d, want sizeLimit 10Mi", got)
	}
	if got := perm(t, dir); got != 0o777|fs.ModeSticky {
		t.Fatalf("tmpfs root mode %v, want the kernel's 01777 as with the kubelet", got)
	}

	// A second Prepare neither remounts (the data would vanish) nor re-chmods.
	if err := os.WriteFile(filepath.Join(dir, "data"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if readString(t, filepath.Join(dir, "data")) != "x" || perm(t, dir) != 0o700 {
		t.Fatal("a later Prepare set the volume up again")
	}
	points, err := readMountPoints(mustResolve(t, dir))
	if err != nil || len(points) != 1 {
		t.Fatalf("mounts %v %v, want exactly one", points, err)
	}

	if err := m.Teardown(string(pod.UID)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(m.root, string(pod.UID))); !os.IsNotExist(err) {
		t.Fatal("pod directory left")
	}
}

func mustResolve(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPrivilegedEmptyDirFSGroup(t *testing.T) {
	needRoot(t)
	m := privilegedManager(t)
	pod := testPod(
		corev1.Volume{Name: "disk", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
	)
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](123)}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
		{Name: "mem", MountPath: "/test-volume", SubPath: "test-sub"},
		{Name: "disk", MountPath: "/d", SubPath: "sub"},
	}
	if err := m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]fs.FileMode{
		"disk": 0o777 | fs.ModeSetgid,                 // "volume on default medium should have the correct mode using FSGroup"
		"mem":  0o777 | fs.ModeSetgid | fs.ModeSticky, // the tmpfs root
	} {
		dir := m.dir(pod, "empty-dir", name)
		if got := perm(t, dir); got != want {
			t.Errorf("%s: mode %v, want %v", name, got, want)
		}
		if _, gid := owner(t, dir); gid != 123 {
			t.Errorf("%s: group %d", name, gid)
		}
	}
	mounts, err := m.MountsFor(pod, pod.Spec.Containers[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	// "nonexistent volume subPath should have the correct mode and owner using FSGroup":
	// mode of file "/test-volume": dgtrwxrwxrwx, owner GID 123.
	info, err := os.Stat(mounts[0].HostPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().String(); got != "dgtrwxrwxrwx" {
		t.Errorf("tmpfs subPath mode %s", got)
	}
	if uid, gid := owner(t, mounts[0].HostPath); uid != 0 || gid != 123 {
		t.Errorf("tmpfs subPath owner %d:%d", uid, gid)
	}
	if got := perm(t, mounts[1].HostPath); got != 0o777|fs.ModeSetgid {
		t.Errorf("disk subPath mode %v", got)
	}

	// Files the containers create later inherit the group (setgid) — checked for a root
	// process here, as the e2e "new files should be created with FSGroup ownership".
	f := filepath.Join(m.dir(pod, "empty-dir", "disk"), "new")
	if err := os.WriteFile(f, nil, 0o660); err != nil {
		t.Fatal(err)
	}
	if _, gid := owner(t, f); gid != 123 {
		t.Errorf("new file group %d", gid)
	}
	if err := m.Teardown(string(pod.UID)); err != nil {
		t.Fatal(err)
	}
}

func TestPrivilegedAtomicWriterFSGroupAndToken(t *testing.T) {
	needRoot(t)
	m := privilegedManager(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec", Namespace: "ns"},
		Data: map[string][]byte{"data-1": []byte("value-1"), "nested/d": []byte("x")}})
	pod := testPod(
		corev1.Volume{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "sec", DefaultMode: ptr.To[int32](0o440)}}},
		corev1.Volume{Name: "tok", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}},
	)
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](1001)}
	ctx := context.Background()
	if err := m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path     string
		mode     string
		uid, gid int
	}{
		{m.volPath(pod, "secret", "sec", "data-1"), "-r--r-----", 0, 1001}, // the e2e's defaultMode 0440 + fsGroup 1001
		{m.volPath(pod, "secret", "sec", "nested"), "dgrwxr-xr-x", 0, 1001},
		{m.volPath(pod, "secret", "sec"), "dgrwxr-xr-x", 0, 1001},
		{m.volPath(pod, "projected", "tok", "token"), "-rw-r-----", 1000, 1001}, // runAsUser and fsGroup
	} {
		info, err := os.Stat(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		uid, gid := owner(t, tc.path)
		if info.Mode().String() != tc.mode || uid != tc.uid || gid != tc.gid {
			t.Errorf("%s: %s %d:%d, want %s %d:%d", tc.path, info.Mode(), uid, gid, tc.mode, tc.uid, tc.gid)
		}
	}
	before := version(t, m.dir(pod, "secret", "sec"))
	if err := m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if version(t, m.dir(pod, "secret", "sec")) != before {
		t.Fatal("unchanged content and ownership were rewritten")
	}

	// A chown behind the writer's back is an ownership change: it is put right.
	if err := os.Chown(m.volPath(pod, "secret", "sec", "data-1"), 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if _, gid := owner(t, m.volPath(pod, "secret", "sec", "data-1")); gid != 1001 {
		t.Fatal("ownership not restored")
	}
}

func TestPrivilegedTeardownNeverRemovesThroughAMount(t *testing.T) {
	needRoot(t)
	m := privilegedManager(t)
	pod := testPod(corev1.Volume{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
	if err := m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	dir := m.dir(pod, "empty-dir", "mem")
	if err := os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("unmount fails", func(t *testing.T) {
		unmount = func(string, int) error { return unix.EPERM }
		defer func() { unmount = unix.Unmount }()
		err := m.Teardown(string(pod.UID))
		if err == nil || !strings.Contains(err.Error(), "still mounted") {
			t.Fatalf("error %v", err)
		}
		if readString(t, filepath.Join(dir, "precious")) != "x" || !tmpfsMounted(t, dir) {
			t.Fatal("removed through a mount it could not unmount")
		}
	})
	t.Run("removeTree alone stops at the mount", func(t *testing.T) {
		err := removeTree(filepath.Join(m.root, string(pod.UID)))
		if err == nil || !strings.Contains(err.Error(), "another filesystem") {
			t.Fatalf("error %v", err)
		}
		if readString(t, filepath.Join(dir, "precious")) != "x" {
			t.Fatal("removed across the mount")
		}
	})
	t.Run("busy mount is detached", func(t *testing.T) {
		f, err := os.Open(filepath.Join(dir, "precious")) // keeps the tmpfs busy
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		if err := m.Teardown(string(pod.UID)); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(m.root, string(pod.UID))); !errors.Is(err, fs.ErrNotExist) {
			t.Fatal("pod directory left")
		}
		b := make([]byte, 1)
		if _, err := f.Read(b); err != nil || string(b) != "x" {
			t.Fatal("the detached tmpfs lost its data while in use")
		}
	})
}

func TestPrivilegedMemoryEmptyDirKeptOnDiskWhenItHoldsFiles(t *testing.T) {
	needRoot(t)
	m := privilegedManager(t)
	pod := testPod(corev1.Volume{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
	dir := m.dir(pod, "empty-dir", "mem")
	// A memory emptyDir a previous agent kept on disk, in use by a running container.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := m.Prepare(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		if tmpfsMounted(t, dir) || readString(t, filepath.Join(dir, "data")) != "x" {
			t.Fatal("a tmpfs hid the volume's files")
		}
		if err := os.Chmod(dir, 0o700); err != nil { // what a container may do: it must stay
			t.Fatal(err)
		}
	}
	if got := perm(t, dir); got != 0o700 {
		t.Fatalf("set up again: mode %v", got)
	}
}
