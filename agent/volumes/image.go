package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ImageMounter mounts an image's root filesystem read-only on a directory under a key that
// names the mount's backing (imagemount.Mounter, over containerd's snapshots).
type ImageMounter interface {
	Mount(ctx context.Context, image, key, target string) error
	Release(ctx context.Context, key string) error
	Keys(ctx context.Context, prefix string) ([]string, error)
}

// SetImageMounter lets the manager serve image volumes; without one they are refused.
func (m *Manager) SetImageMounter(im ImageMounter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.imageMounter = im
}

func (m *Manager) mounter() ImageMounter {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.imageMounter
}

// imageKeyPrefix begins the key of every image volume's backing, so the ones left by pods
// that are gone can be found (ReleaseOrphanImages).
const imageKeyPrefix = "skiff/image-volume/"

// imageKey names the backing of a pod's image volume.
func imageKey(uid types.UID, volume string) string {
	return imageKeyPrefix + string(uid) + "/" + volume
}

// mountedAt reports whether something is mounted exactly at dir, from mountinfo: a bind of a
// directory on the same filesystem (a one-layer image's) has the device of its parent, so
// isMountPoint's device test cannot see it.
func mountedAt(dir string) (bool, error) {
	dir, err := filepath.EvalSymlinks(dir) // mountinfo names real paths
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	points, err := readMountPoints(dir)
	if err != nil {
		return false, err
	}
	return slices.Contains(points, dir), nil
}

// ImageMounted reports whether the pod's image volume is mounted: its image is pulled and
// mounted once, when the first container that mounts it starts, and stays for the pod's life.
func (m *Manager) ImageMounted(pod *corev1.Pod, volume string) bool {
	if checkPathElement("pod UID", string(pod.UID)) != nil || checkPathElement("volume name", volume) != nil {
		return false
	}
	ok, err := mountedAt(m.dir(pod, "image", volume))
	return err == nil && ok
}

// MountImage mounts image, which the runtime has, read-only as the pod's image volume. A volume
// mounted already is left as it is: as upstream, an image volume's content is what the image
// was when the pod first needed it.
func (m *Manager) MountImage(ctx context.Context, pod *corev1.Pod, volume, image string) error {
	if err := checkPathElement("pod UID", string(pod.UID)); err != nil {
		return err
	}
	if err := checkPathElement("volume name", volume); err != nil {
		return err
	}
	im := m.mounter()
	if im == nil {
		return errors.New("image volumes need containerd, which this agent does not reach")
	}
	l := m.podLock(pod.UID)
	l.Lock()
	defer l.Unlock()
	dir := m.dir(pod, "image", volume)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if ok, err := mountedAt(dir); err != nil || ok {
		return err
	}
	return im.Mount(ctx, image, imageKey(pod.UID, volume), dir)
}

// imageRoot is where an image volume is mounted; it is an error to use one that is not
// mounted (its container would see an empty directory).
func (m *Manager) imageRoot(pod *corev1.Pod, v corev1.Volume) (string, error) {
	if !m.ImageMounted(pod, v.Name) {
		return "", fmt.Errorf("image volume %q (%s) is not mounted", v.Name, v.Image.Reference)
	}
	return m.dir(pod, "image", v.Name), nil
}

// releaseImages releases the backings of the pod's image volumes, which Teardown has unmounted:
// the image directories under the pod's volumes name them.
func (m *Manager) releaseImages(uid, podDir string) error {
	im := m.mounter()
	if im == nil {
		return nil
	}
	entries, err := os.ReadDir(filepath.Join(podDir, "volumes", "image"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	var errs []error
	for _, e := range entries {
		errs = append(errs, im.Release(ctx, imageKey(types.UID(uid), e.Name())))
	}
	return errors.Join(errs...)
}

// ReleaseOrphanImages releases the image volume backings whose volume is not mounted: those of
// pods removed while the runtime could not be reached, or of an agent that died between the
// two steps of a mount. It returns the keys it released.
func (m *Manager) ReleaseOrphanImages(ctx context.Context) ([]string, error) {
	im := m.mounter()
	if im == nil {
		return nil, nil
	}
	keys, err := im.Keys(ctx, imageKeyPrefix)
	if err != nil {
		return nil, err
	}
	var released []string
	var errs []error
	for _, k := range keys {
		uid, volume, ok := strings.Cut(strings.TrimPrefix(k, imageKeyPrefix), "/")
		if !ok || checkPathElement("pod UID", uid) != nil || checkPathElement("volume name", volume) != nil {
			continue // not a key skiff made
		}
		pod := &corev1.Pod{}
		pod.UID = types.UID(uid)
		// Under the pod's lock: a MountImage of the pod in progress has made the backing but
		// not yet mounted it.
		l := m.podLock(pod.UID)
		l.Lock()
		mounted, err := mountedAt(m.dir(pod, "image", volume))
		if err == nil && !mounted {
			if err = im.Release(ctx, k); err == nil {
				released = append(released, k)
			}
		}
		l.Unlock()
		errs = append(errs, err)
	}
	return released, errors.Join(errs...)
}
