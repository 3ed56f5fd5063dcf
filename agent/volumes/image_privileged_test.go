package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// fakeImages stands in for containerd's snapshots: a "view" is a key, and mounting it puts a
// read-only tmpfs holding the image's name on the target, so the manager's own mount checks
// see a real mount.
type fakeImages struct {
	mu     sync.Mutex
	views  map[string]string // key -> image
	mounts int
	fail   error
}

func (f *fakeImages) Mount(ctx context.Context, image, key, target string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	if err := unix.Mount("tmpfs", target, "tmpfs", 0, "size=1m"); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(target, "image"), []byte(image), 0o644); err != nil {
		return err
	}
	if err := unix.Mount("", target, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		return err
	}
	f.views[key] = image
	f.mounts++
	return nil
}

func (f *fakeImages) Release(ctx context.Context, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.views, key)
	return nil
}

func (f *fakeImages) Keys(ctx context.Context, prefix string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var keys []string
	for k := range f.views {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

func (f *fakeImages) keys() []string {
	keys, _ := f.Keys(context.Background(), "")
	return keys
}

// TestPrivilegedImageVolume: an image volume is usable only once mounted; it is mounted once,
// read-only, under a key naming the pod and volume; a failed mount leaves nothing mounted;
// views of pods that are gone are released, those in use and foreign ones are not; teardown
// unmounts and releases.
func TestPrivilegedImageVolume(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	m := privilegedManager(t)
	vol := corev1.Volume{Name: "img", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{
		Reference: "registry.example/kitten:1.0", PullPolicy: corev1.PullIfNotPresent}}}
	pod := testPod(vol)
	c := corev1.Container{Name: "c", VolumeMounts: []corev1.VolumeMount{{Name: "img", MountPath: "/volume"}}}

	if err := m.MountImage(ctx, pod, "img", "registry.example/kitten:1.0"); err == nil || !strings.Contains(err.Error(), "need containerd") {
		t.Errorf("without a mounter: %v", err)
	}
	images := &fakeImages{views: map[string]string{
		"skiff/image-volume/gone-uid/v": "old", "other/tool/key": "theirs"}}
	m.SetImageMounter(images)

	if err := m.Prepare(ctx, pod); err != nil {
		t.Fatalf("Prepare with an image volume: %v", err)
	}
	if _, err := m.MountsFor(pod, c, nil); err == nil || !strings.Contains(err.Error(), `image volume "img" (registry.example/kitten:1.0) is not mounted`) {
		t.Errorf("mounts of an unmounted image volume: %v", err)
	}

	images.fail = errors.New("no such snapshot")
	if err := m.MountImage(ctx, pod, "img", "registry.example/kitten:1.0"); err == nil || !strings.Contains(err.Error(), "no such snapshot") {
		t.Errorf("failed mount: %v", err)
	}
	if m.ImageMounted(pod, "img") {
		t.Error("a failed mount counts as mounted")
	}
	images.fail = nil

	for range 2 {
		if err := m.MountImage(ctx, pod, "img", "registry.example/kitten:1.0"); err != nil {
			t.Fatal(err)
		}
	}
	if images.mounts != 1 {
		t.Errorf("mounted %d times, want once", images.mounts)
	}
	if !m.ImageMounted(pod, "img") {
		t.Fatal("not mounted after MountImage")
	}
	mounts, err := m.MountsFor(pod, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := m.dir(pod, "image", "img")
	if len(mounts) != 1 || mounts[0].HostPath != dir || !mounts[0].Readonly || mounts[0].ContainerPath != "/volume" {
		t.Errorf("mounts %+v", mounts)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "image")); err != nil || string(b) != "registry.example/kitten:1.0" {
		t.Errorf("volume content %q %v", b, err)
	}
	// A subPath of an image volume is a directory of the image, which cannot be created.
	sub := c
	sub.VolumeMounts = []corev1.VolumeMount{{Name: "img", MountPath: "/etc/os-release", SubPath: "image"}}
	if mounts, err := m.MountsFor(pod, sub, nil); err != nil || mounts[0].HostPath != filepath.Join(dir, "image") {
		t.Errorf("subPath mount: %+v %v", mounts, err)
	}

	released, err := m.ReleaseOrphanImages(ctx)
	if err != nil || !slices.Equal(released, []string{"skiff/image-volume/gone-uid/v"}) {
		t.Errorf("ReleaseOrphanImages = %v, %v", released, err)
	}
	if got := images.keys(); !slices.Equal(got, []string{"other/tool/key", "skiff/image-volume/uid-1/img"}) {
		t.Errorf("views after the orphan sweep: %v", got)
	}

	if err := m.Teardown(string(pod.UID)); err != nil {
		t.Fatal(err)
	}
	if got := images.keys(); !slices.Equal(got, []string{"other/tool/key"}) {
		t.Errorf("views after teardown: %v", got)
	}
	if _, err := os.Stat(m.dir(pod, "image", "img")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("image volume directory after teardown: %v", err)
	}
}
