// Package volumes materializes a pod's volumes on the node, under
// <agent-data-dir>/pods/<uid>/volumes/<plugin>/<name>, and turns a container's volumeMounts
// into CRI mounts: emptyDir, hostPath, configMap, secret, downwardAPI and projected (with the
// service-account token requested through TokenRequest, bound to the pod, and refreshed
// before it expires).
package volumes

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Manager prepares volumes.
type Manager struct {
	client kubernetes.Interface
	root   string

	mu     sync.Mutex
	tokens map[string]token // pod uid/volume -> token
}

type token struct {
	value   string
	refresh time.Time
}

// New returns a manager writing under root (<agent-data-dir>/pods).
func New(client kubernetes.Interface, root string) *Manager {
	return &Manager{client: client, root: root, tokens: map[string]token{}}
}

func (m *Manager) dir(pod *corev1.Pod, plugin, name string) string {
	return filepath.Join(m.root, string(pod.UID), "volumes", plugin, name)
}

// Prepare writes every volume of the pod; call it before (re)creating containers and
// periodically, so configMap, secret and token contents follow their sources.
func (m *Manager) Prepare(ctx context.Context, pod *corev1.Pod) error {
	for _, v := range pod.Spec.Volumes {
		var err error
		switch {
		case v.EmptyDir != nil:
			err = os.MkdirAll(m.dir(pod, "empty-dir", v.Name), 0o777)
		case v.HostPath != nil:
			err = hostPath(v.HostPath)
		case v.ConfigMap != nil:
			err = m.configMap(ctx, pod, m.dir(pod, "configmap", v.Name), v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional)
		case v.Secret != nil:
			err = m.secret(ctx, pod, m.dir(pod, "secret", v.Name), v.Secret.SecretName, v.Secret.Items, v.Secret.Optional)
		case v.DownwardAPI != nil:
			files := map[string][]byte{}
			for _, f := range v.DownwardAPI.Items {
				files[f.Path] = []byte(fieldValue(pod, f.FieldRef))
			}
			err = writeDir(m.dir(pod, "downward-api", v.Name), files)
		case v.Projected != nil:
			err = m.projected(ctx, pod, v)
		default:
			err = fmt.Errorf("volume %q: this volume type is not supported by skiff's agent", v.Name)
		}
		if err != nil {
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
	}
	return nil
}

func hostPath(h *corev1.HostPathVolumeSource) error {
	if h.Type == nil {
		return nil
	}
	switch *h.Type {
	case corev1.HostPathDirectoryOrCreate:
		return os.MkdirAll(h.Path, 0o755)
	case corev1.HostPathFileOrCreate:
		f, err := os.OpenFile(h.Path, os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	case corev1.HostPathDirectory, corev1.HostPathFile, corev1.HostPathSocket:
		if _, err := os.Stat(h.Path); err != nil {
			return fmt.Errorf("hostPath %s: %w", h.Path, err)
		}
	}
	return nil
}

func pick(data map[string][]byte, items []corev1.KeyToPath) (map[string][]byte, error) {
	if len(items) == 0 {
		return data, nil
	}
	out := map[string][]byte{}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			return nil, fmt.Errorf("key %q not found", it.Key)
		}
		out[it.Path] = b
	}
	return out, nil
}

func (m *Manager) configMapData(ctx context.Context, ns, name string, items []corev1.KeyToPath, optional *bool) (map[string][]byte, error) {
	cm, err := m.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return map[string][]byte{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("configmap %q: %w", name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return pick(data, items)
}

func (m *Manager) secretData(ctx context.Context, ns, name string, items []corev1.KeyToPath, optional *bool) (map[string][]byte, error) {
	s, err := m.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return map[string][]byte{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secret %q: %w", name, err)
	}
	return pick(s.Data, items)
}

func (m *Manager) configMap(ctx context.Context, pod *corev1.Pod, dir, name string, items []corev1.KeyToPath, optional *bool) error {
	data, err := m.configMapData(ctx, pod.Namespace, name, items, optional)
	if err != nil {
		return err
	}
	return writeDir(dir, data)
}

func (m *Manager) secret(ctx context.Context, pod *corev1.Pod, dir, name string, items []corev1.KeyToPath, optional *bool) error {
	data, err := m.secretData(ctx, pod.Namespace, name, items, optional)
	if err != nil {
		return err
	}
	return writeDir(dir, data)
}

func (m *Manager) projected(ctx context.Context, pod *corev1.Pod, v corev1.Volume) error {
	files := map[string][]byte{}
	for _, src := range v.Projected.Sources {
		var part map[string][]byte
		var err error
		switch {
		case src.ConfigMap != nil:
			part, err = m.configMapData(ctx, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional)
		case src.Secret != nil:
			part, err = m.secretData(ctx, pod.Namespace, src.Secret.Name, src.Secret.Items, src.Secret.Optional)
		case src.DownwardAPI != nil:
			part = map[string][]byte{}
			for _, f := range src.DownwardAPI.Items {
				part[f.Path] = []byte(fieldValue(pod, f.FieldRef))
			}
		case src.ServiceAccountToken != nil:
			var t string
			t, err = m.token(ctx, pod, v.Name, src.ServiceAccountToken)
			part = map[string][]byte{src.ServiceAccountToken.Path: []byte(t)}
		}
		if err != nil {
			return err
		}
		for k, b := range part {
			files[k] = b
		}
	}
	return writeDir(m.dir(pod, "projected", v.Name), files)
}

// token requests a pod-bound service-account token and renews it at 80 % of its life.
func (m *Manager) token(ctx context.Context, pod *corev1.Pod, volume string, p *corev1.ServiceAccountTokenProjection) (string, error) {
	key := string(pod.UID) + "/" + volume
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

func fieldValue(pod *corev1.Pod, ref *corev1.ObjectFieldSelector) string {
	if ref == nil {
		return ""
	}
	switch ref.FieldPath {
	case "metadata.name":
		return pod.Name
	case "metadata.namespace":
		return pod.Namespace
	case "metadata.uid":
		return string(pod.UID)
	case "spec.nodeName":
		return pod.Spec.NodeName
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName
	case "status.podIP":
		return pod.Status.PodIP
	case "status.hostIP":
		return pod.Status.HostIP
	case "metadata.labels", "metadata.annotations":
		m := pod.Labels
		if ref.FieldPath == "metadata.annotations" {
			m = pod.Annotations
		}
		var b strings.Builder
		for k, v := range m {
			fmt.Fprintf(&b, "%s=%q\n", k, v)
		}
		return b.String()
	}
	return ""
}

// writeDir makes dir hold exactly files (paths relative to dir), rewriting only what changed.
func writeDir(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range files {
		clean := filepath.Clean("/" + name)[1:]
		if clean == "" || filepath.IsAbs(name) || slices.Contains(strings.Split(name, "/"), "..") {
			return fmt.Errorf("bad path %q: must be relative and must not contain '..'", name)
		}
		p := filepath.Join(dir, clean)
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, data) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		tmp := p + ".skiff-tmp" // written whole, then renamed: readers never see half a file
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, p); err != nil {
			return err
		}
	}
	return nil
}

// Mounts returns the CRI mounts of a container's volumeMounts.
func (m *Manager) Mounts(pod *corev1.Pod, c corev1.Container) ([]*runtimeapi.Mount, error) {
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
		var host string
		switch {
		case v.EmptyDir != nil:
			host = m.dir(pod, "empty-dir", v.Name)
		case v.HostPath != nil:
			host = v.HostPath.Path
		case v.ConfigMap != nil:
			host = m.dir(pod, "configmap", v.Name)
		case v.Secret != nil:
			host = m.dir(pod, "secret", v.Name)
		case v.DownwardAPI != nil:
			host = m.dir(pod, "downward-api", v.Name)
		case v.Projected != nil:
			host = m.dir(pod, "projected", v.Name)
		default:
			return nil, fmt.Errorf("volume %q: unsupported type", v.Name)
		}
		if vm.SubPath != "" {
			host = filepath.Join(host, filepath.Clean("/" + vm.SubPath)[1:])
		}
		readOnly := vm.ReadOnly || v.ConfigMap != nil || v.Secret != nil || v.Projected != nil || v.DownwardAPI != nil
		out = append(out, &runtimeapi.Mount{ContainerPath: vm.MountPath, HostPath: host, Readonly: readOnly})
	}
	return out, nil
}

// Cleanup removes a pod's volumes.
func (m *Manager) Cleanup(uid string) {
	m.mu.Lock()
	for k := range m.tokens {
		if strings.HasPrefix(k, uid+"/") {
			delete(m.tokens, k)
		}
	}
	m.mu.Unlock()
	_ = os.RemoveAll(filepath.Join(m.root, uid))
}
