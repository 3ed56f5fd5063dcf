package volumes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// LocalPathRootAnnotation is where the agent announces, on its Node, the directory the PV
// binder provisions local-path volumes under (see controllers/persistentvolume).
const LocalPathRootAnnotation = "skiff.sh/local-path-root"

// localPathProvisioner marks the volumes the agent's own directories back.
const localPathProvisioner = "skiff.sh/local-path"

// claimKey names a pod's claim volume in Manager.claims.
func claimKey(pod *corev1.Pod, volume string) string { return string(pod.UID) + "/" + volume }

// prepareClaim resolves a persistentVolumeClaim volume to the host directory of its bound
// volume (hostPath or local), creating a local-path volume's directory, world-writable as
// k3s's provisioner makes them, so any container user can write its data.
func (m *Manager) prepareClaim(ctx context.Context, pod *corev1.Pod, v corev1.Volume) error {
	name := v.PersistentVolumeClaim.ClaimName
	pvc, err := m.client.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("persistentvolumeclaim %q: %w", name, err)
	}
	if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		return fmt.Errorf("persistentvolumeclaim %q is not bound yet", name)
	}
	pv, err := m.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("persistentvolume %q of claim %q: %w", pvc.Spec.VolumeName, name, err)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != pvc.UID {
		return fmt.Errorf("persistentvolume %q is not bound to claim %q", pv.Name, name)
	}
	var path string
	switch {
	case pv.Spec.HostPath != nil:
		path = pv.Spec.HostPath.Path
		if pv.Annotations["pv.kubernetes.io/provisioned-by"] == localPathProvisioner && m.underLocalPathRoot(path) {
			if err := os.MkdirAll(path, 0o777); err != nil {
				return err
			}
			if err := os.Chmod(path, 0o777); err != nil {
				return err
			}
		} else if err := checkHostPath(pv.Spec.HostPath); err != nil {
			return err
		}
	case pv.Spec.Local != nil:
		path = pv.Spec.Local.Path
		if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
			return fmt.Errorf("local volume %q: %s is not a directory", pv.Name, path)
		}
	default:
		return fmt.Errorf("persistentvolume %q: only hostPath and local volumes are supported by skiff's agent", pv.Name)
	}
	m.mu.Lock()
	m.claims[claimKey(pod, v.Name)] = path
	m.mu.Unlock()
	return nil
}

// underLocalPathRoot says whether path is a directory directly below the node's
// local-path root: only those are created world-writable, whatever a volume claims to be.
func (m *Manager) underLocalPathRoot(path string) bool {
	m.mu.Lock()
	root := m.localPathRoot
	m.mu.Unlock()
	return root != "" && filepath.Dir(filepath.Clean(path)) == filepath.Clean(root)
}

// SetLocalPathRoot is where this node's local-path volumes live.
func (m *Manager) SetLocalPathRoot(root string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.localPathRoot = root
}

// claimRoot is the host directory prepareClaim resolved for a claim volume.
func (m *Manager) claimRoot(pod *corev1.Pod, v corev1.Volume) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	path, ok := m.claims[claimKey(pod, v.Name)]
	if !ok {
		return "", fmt.Errorf("volume %q: claim %q is not prepared", v.Name, v.PersistentVolumeClaim.ClaimName)
	}
	return path, nil
}

// CleanLocalPath removes, every interval, the directories under root whose local-path
// volume no longer exists (the binder deletes a released volume whose reclaim policy is
// Delete), as k3s's provisioner does with its helper pod. A directory is named
// pvc-<uid>_<namespace>_<claim>, after its volume; anything else under root is left alone.
func CleanLocalPath(ctx context.Context, client kubernetes.Interface, root string, interval time.Duration, log *slog.Logger) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := cleanLocalPathOnce(ctx, client, root, log); err != nil {
			log.Warn("local-path cleanup", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func cleanLocalPathOnce(ctx context.Context, client kubernetes.Interface, root string, log *slog.Logger) error {
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		pv, _, ok := strings.Cut(e.Name(), "_")
		if !e.IsDir() || !ok || !strings.HasPrefix(pv, "pvc-") {
			continue
		}
		_, err := client.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{})
		switch {
		case err == nil:
			continue
		case !apierrors.IsNotFound(err):
			errs = append(errs, err)
			continue
		}
		dir := filepath.Join(root, e.Name())
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		log.Info("removed the data of a deleted local-path volume", "volume", pv, "dir", dir)
	}
	return errors.Join(errs...)
}
