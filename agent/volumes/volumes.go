// Package volumes materializes a pod's volumes on the node, under
// <agent-data-dir>/pods/<uid>/volumes/<plugin>/<name>, and turns a container's volumeMounts
// into CRI mounts, behaving as the kubelet's volume plugins do where the conformance tests
// look:
//
//   - configMap, secret, downwardAPI and projected volumes are written by an atomic writer
//     (a timestamped version directory published through the ..data symlink, see atomic.go),
//     with defaultMode and per-item modes applied exactly, and refreshed on every Prepare;
//     the projected service-account token is requested through TokenRequest, bound to the
//     pod and renewed before it expires;
//   - emptyDir is a 0777 directory, or a tmpfs for medium Memory, set up once per pod;
//   - an image volume is the image's root filesystem, mounted read-only through the runtime
//     (ImageMounter) when the first container that mounts it starts (see image.go);
//   - the pod's fsGroup owns these volumes, with the group bits the kubelet adds;
//   - subPath and subPathExpr mounts are validated, created when missing and resolved so
//     they cannot leave their volume;
//   - Cleanup unmounts what it mounted before removing anything.
package volumes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Manager prepares volumes. It is safe for concurrent use; calls for one pod are serialized.
type Manager struct {
	client kubernetes.Interface
	root   string

	mu     sync.Mutex
	tokens map[string]token   // pod uid/volume/path -> token
	certs  map[string]podCert // pod uid/volume/source index -> pod certificate
	// nodeUIDs caches Node UIDs by name, which pod certificate requests name.
	nodeUIDs map[string]types.UID
	claims   map[string]string         // pod uid/volume -> host directory of its bound volume
	pods     map[types.UID]*sync.Mutex // serializes Prepare and Cleanup of one pod
	node     nodeInfo
	// localPathRoot holds this node's local-path volumes (SetLocalPathRoot).
	localPathRoot string
	// imageMounter mounts image volumes (SetImageMounter).
	imageMounter ImageMounter
}

// releaseTimeout bounds the runtime calls of a teardown.
const releaseTimeout = 30 * time.Second

type token struct {
	value   string
	refresh time.Time
}

// nodeInfo is what the downward API reads from the node.
type nodeInfo struct {
	hostIP      string
	allocatable corev1.ResourceList
}

// New returns a manager writing under root (<agent-data-dir>/pods).
func New(client kubernetes.Interface, root string) *Manager {
	return &Manager{client: client, root: root, tokens: map[string]token{}, certs: map[string]podCert{}, nodeUIDs: map[string]types.UID{}, claims: map[string]string{}, pods: map[types.UID]*sync.Mutex{}}
}

// SetNode records the node's address and allocatable resources: downwardAPI files read
// status.hostIP from it, resourceFieldRef limits a container does not set default to the
// allocatable, and memory emptyDirs are sized no larger than its memory.
func (m *Manager) SetNode(hostIP string, allocatable corev1.ResourceList) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.node = nodeInfo{hostIP: hostIP, allocatable: allocatable.DeepCopy()}
}

func (m *Manager) nodeInfo() nodeInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.node
}

// podLock is the lock of one pod's volumes.
func (m *Manager) podLock(uid types.UID) *sync.Mutex {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.pods[uid]
	if !ok {
		l = &sync.Mutex{}
		m.pods[uid] = l
	}
	return l
}

var errNoPod = errors.New("no pod")

// checkPathElement rejects a pod UID or volume name that would not be one directory of its
// own below root ("", ".", "..", anything with a slash).
func checkPathElement(kind, s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsRune(s, '/') {
		return fmt.Errorf("%s %q cannot name a directory", kind, s)
	}
	return nil
}

func (m *Manager) dir(pod *corev1.Pod, plugin, name string) string {
	return filepath.Join(m.root, string(pod.UID), "volumes", plugin, name)
}

// Prepare writes every volume of the pod; call it before (re)creating containers and
// periodically, so configMap, secret, downwardAPI and token contents follow their sources.
// A volume that fails does not stop the others; the error names each failed volume.
func (m *Manager) Prepare(ctx context.Context, pod *corev1.Pod) error {
	if pod == nil {
		return errNoPod
	}
	if err := checkPathElement("pod UID", string(pod.UID)); err != nil {
		return err
	}
	l := m.podLock(pod.UID)
	l.Lock()
	defer l.Unlock()
	own := podOwnership(pod)
	var errs []error
	for _, v := range pod.Spec.Volumes {
		if err := m.prepareVolume(ctx, pod, v, own); err != nil {
			errs = append(errs, fmt.Errorf("volume %q: %w", v.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) prepareVolume(ctx context.Context, pod *corev1.Pod, v corev1.Volume, own ownership) error {
	if err := checkPathElement("volume name", v.Name); err != nil {
		return err
	}
	switch {
	case v.EmptyDir != nil:
		return m.setupEmptyDir(pod, v, own)
	case v.HostPath != nil:
		return checkHostPath(v.HostPath)
	case v.PersistentVolumeClaim != nil:
		return m.prepareClaim(ctx, pod, v)
	case v.Image != nil:
		return nil // pulled and mounted when a container first needs it (MountImage)
	case v.ConfigMap != nil:
		ps, err := m.configMapProjections(ctx, pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items,
			modeOr(v.ConfigMap.DefaultMode, defaultMode), v.ConfigMap.Optional)
		return m.write(pod, "configmap", v.Name, ps, own, err)
	case v.Secret != nil:
		ps, err := m.secretProjections(ctx, pod.Namespace, v.Secret.SecretName, v.Secret.Items,
			modeOr(v.Secret.DefaultMode, defaultMode), v.Secret.Optional)
		return m.write(pod, "secret", v.Name, ps, own, err)
	case v.DownwardAPI != nil:
		ps, err := downwardProjections(pod, v.DownwardAPI.Items, modeOr(v.DownwardAPI.DefaultMode, defaultMode), m.nodeInfo())
		return m.write(pod, "downward-api", v.Name, ps, own, err)
	case v.Projected != nil:
		ps, err := m.projectedProjections(ctx, pod, v, own)
		return m.write(pod, "projected", v.Name, ps, own, err)
	}
	return errors.New("this volume type is not supported by skiff's agent")
}

// write publishes an atomic-writer volume, unless collecting its files failed: then the
// previous version stays, as with the kubelet.
func (m *Manager) write(pod *corev1.Pod, plugin, name string, ps map[string]projection, own ownership, collectErr error) error {
	if collectErr != nil {
		return collectErr
	}
	files, err := own.files(ps)
	if err != nil {
		return err
	}
	_, err = writeAtomic(m.dir(pod, plugin, name), files, own.dirAttrs())
	return err
}

// checkHostPath creates or checks the host path as its type asks.
func checkHostPath(h *corev1.HostPathVolumeSource) error {
	if h.Type == nil || *h.Type == corev1.HostPathUnset {
		return nil
	}
	switch *h.Type {
	case corev1.HostPathDirectoryOrCreate:
		if err := os.MkdirAll(h.Path, 0o755); err != nil {
			return fmt.Errorf("hostPath %s: %w", h.Path, err)
		}
	case corev1.HostPathFileOrCreate:
		f, err := os.OpenFile(h.Path, os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("hostPath %s: %w", h.Path, err)
		}
		_ = f.Close()
	}
	info, err := os.Stat(h.Path)
	if err != nil {
		return fmt.Errorf("hostPath %s: %w", h.Path, err)
	}
	if !hostPathIs(*h.Type, info.Mode()) {
		return fmt.Errorf("hostPath %s is not of type %s", h.Path, *h.Type)
	}
	return nil
}

func hostPathIs(t corev1.HostPathType, m os.FileMode) bool {
	switch t {
	case corev1.HostPathDirectory, corev1.HostPathDirectoryOrCreate:
		return m.IsDir()
	case corev1.HostPathFile, corev1.HostPathFileOrCreate:
		return m.IsRegular()
	case corev1.HostPathSocket:
		return m&os.ModeSocket != 0
	case corev1.HostPathCharDev:
		return m&os.ModeCharDevice != 0
	case corev1.HostPathBlockDev:
		return m&os.ModeDevice != 0 && m&os.ModeCharDevice == 0
	}
	return false
}

// token requests a pod-bound service-account token and renews it at 80 % of its life.
func (m *Manager) token(ctx context.Context, pod *corev1.Pod, volume string, p *corev1.ServiceAccountTokenProjection) (string, error) {
	key := string(pod.UID) + "/" + volume + "/" + p.Path // a volume may project several tokens
	m.mu.Lock()
	t, ok := m.tokens[key]
	m.mu.Unlock()
	if ok && time.Now().Before(t.refresh) {
		return t.value, nil
	}
	exp := int64(3600)
	if p.ExpirationSeconds != nil && *p.ExpirationSeconds > exp {
		exp = *p.ExpirationSeconds
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp,
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}
	if p.Audience != "" {
		req.Spec.Audiences = []string{p.Audience}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	resp, err := m.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for service account %s/%s: %w", pod.Namespace, sa, err)
	}
	life := time.Until(resp.Status.ExpirationTimestamp.Time)
	m.mu.Lock()
	m.tokens[key] = token{value: resp.Status.Token, refresh: time.Now().Add(life * 8 / 10)}
	m.mu.Unlock()
	return resp.Status.Token, nil
}

// volumeRoot is where a volume of the pod lives on the host, and whether the kubelet mounts
// it read-only whatever the volumeMount says.
func (m *Manager) volumeRoot(pod *corev1.Pod, v corev1.Volume) (string, bool, error) {
	if err := checkPathElement("volume name", v.Name); err != nil {
		return "", false, err
	}
	switch {
	case v.EmptyDir != nil:
		return m.dir(pod, "empty-dir", v.Name), false, nil
	case v.HostPath != nil:
		return v.HostPath.Path, false, nil
	case v.PersistentVolumeClaim != nil:
		path, err := m.claimRoot(pod, v)
		return path, v.PersistentVolumeClaim.ReadOnly, err
	case v.ConfigMap != nil:
		return m.dir(pod, "configmap", v.Name), true, nil
	case v.Secret != nil:
		return m.dir(pod, "secret", v.Name), true, nil
	case v.DownwardAPI != nil:
		return m.dir(pod, "downward-api", v.Name), true, nil
	case v.Projected != nil:
		return m.dir(pod, "projected", v.Name), true, nil
	case v.Image != nil:
		path, err := m.imageRoot(pod, v)
		return path, true, err
	}
	return "", false, fmt.Errorf("volume %q: this volume type is not supported by skiff's agent", v.Name)
}

// Mounts returns the CRI mounts of a container's volumeMounts; it is MountsFor without an
// environment, so a subPathExpr that references a variable fails.
func (m *Manager) Mounts(pod *corev1.Pod, c corev1.Container) ([]*runtimeapi.Mount, error) {
	return m.MountsFor(pod, c, nil)
}

// MountsFor returns the CRI mounts of a container's volumeMounts. env is the container's
// resolved environment, which subPathExpr is expanded with. A subPath is created when it does
// not exist and resolved on the host now (see subPathHost); an invalid one is an error that
// says "subPath", which the caller reports as CreateContainerConfigError.
func (m *Manager) MountsFor(pod *corev1.Pod, c corev1.Container, env map[string]string) ([]*runtimeapi.Mount, error) {
	if pod == nil {
		return nil, errNoPod
	}
	if err := checkPathElement("pod UID", string(pod.UID)); err != nil {
		return nil, err
	}
	byName := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		byName[v.Name] = v
	}
	var out []*runtimeapi.Mount
	for _, vm := range c.VolumeMounts {
		v, ok := byName[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %q: no such volume", vm.Name)
		}
		mount, err := m.mountFor(pod, v, vm, env)
		if err != nil {
			return nil, fmt.Errorf("volumeMount %q of container %q: %w", vm.Name, c.Name, err)
		}
		out = append(out, mount)
	}
	return out, nil
}

func (m *Manager) mountFor(pod *corev1.Pod, v corev1.Volume, vm corev1.VolumeMount, env map[string]string) (*runtimeapi.Mount, error) {
	host, readOnly, err := m.volumeRoot(pod, v)
	if err != nil {
		return nil, err
	}
	subPath, err := subPathOf(vm, env)
	if err != nil {
		return nil, err
	}
	if subPath != "" {
		if host, err = subPathHost(host, subPath); err != nil {
			return nil, err
		}
	}
	return &runtimeapi.Mount{
		ContainerPath: vm.MountPath,
		HostPath:      host,
		Readonly:      vm.ReadOnly || readOnly,
		Propagation:   propagation(vm.MountPropagation),
	}, nil
}

func propagation(p *corev1.MountPropagationMode) runtimeapi.MountPropagation {
	if p == nil {
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
	}
	switch *p {
	case corev1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
	case corev1.MountPropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
	}
	return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
}

// Cleanup removes a pod's volumes, logging what it could not remove (see Teardown).
func (m *Manager) Cleanup(uid string) {
	if err := m.Teardown(uid); err != nil {
		slog.Warn("pod volumes left in place", "uid", uid, "err", err)
	}
}

// Teardown removes a pod's volumes: it forgets the pod's tokens, unmounts every mount below
// the pod's directory, then removes the directory. When a mount cannot be unmounted it
// removes nothing and says so, and it never removes across a filesystem boundary.
func (m *Manager) Teardown(uid string) error {
	if err := checkPathElement("pod UID", uid); err != nil {
		return err
	}
	l := m.podLock(types.UID(uid))
	l.Lock()
	defer l.Unlock()
	m.mu.Lock()
	for k := range m.tokens {
		if strings.HasPrefix(k, uid+"/") {
			delete(m.tokens, k)
		}
	}
	for k := range m.claims {
		if strings.HasPrefix(k, uid+"/") {
			delete(m.claims, k)
		}
	}
	for k := range m.certs {
		if strings.HasPrefix(k, uid+"/") {
			delete(m.certs, k)
		}
	}
	delete(m.pods, types.UID(uid))
	m.mu.Unlock()

	// Only the root is resolved (mountinfo names real paths): were the pod's own directory a
	// symlink, removeTree removes the link, not what it points at.
	root, err := filepath.EvalSymlinks(m.root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pod %s volumes: %w", uid, err)
	}
	dir := filepath.Join(root, uid)
	if err := unmountAll(dir); err != nil {
		return fmt.Errorf("pod %s volumes: %w", uid, err)
	}
	// A backing that cannot be released now (the runtime is down) is found again by
	// ReleaseOrphanImages; the directories go regardless.
	releaseErr := m.releaseImages(uid, dir)
	if err := removeTree(dir); err != nil {
		return fmt.Errorf("pod %s volumes: %w", uid, errors.Join(err, releaseErr))
	}
	if releaseErr != nil {
		return fmt.Errorf("pod %s image volumes: %w", uid, releaseErr)
	}
	return nil
}
