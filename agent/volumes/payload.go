package volumes

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/agent/downward"
)

// defaultMode is the API's default defaultMode of configMap, secret, downwardAPI and projected
// volumes; the API server fills it in, the agent falls back to it for objects that lack it.
const defaultMode int32 = 0o644

// tokenMode is the mode of a projected service-account token, trust anchors or pod
// certificate when the pod has a shared runAsUser or an fsGroup: only that user (and, by
// fsGroup's group read, the group) reads it.
const tokenMode int32 = 0o600

// ownedProjection is a file the kubelet gives the pod's shared user, 0600, when the pod has
// one or an fsGroup (tokens, trust anchors, pod certificates), and mode otherwise.
func ownedProjection(data []byte, mode int32, own ownership) projection {
	if own.fsUser != nil || own.fsGroup != nil {
		return projection{data: data, mode: tokenMode, user: own.fsUser}
	}
	return projection{data: data, mode: mode}
}

// projection is one file a volume source asks for, before ownership is applied.
type projection struct {
	data []byte
	mode int32
	user *int64 // owner: the pod's shared user, for tokens, keys and trust anchors
}

func modeOr(mode *int32, fallback int32) int32 {
	if mode != nil {
		return *mode
	}
	return fallback
}

// keyProjections maps the keys of a ConfigMap or Secret to files: every key under its own name
// without items, else each item's key at its path with its mode. A key an item names that the
// object lacks is an error unless the source is optional (then the item is skipped).
func keyProjections(data map[string][]byte, items []corev1.KeyToPath, mode int32, optional bool) (map[string]projection, error) {
	out := map[string]projection{}
	if len(items) == 0 {
		for k, b := range data {
			out[k] = projection{data: b, mode: mode}
		}
		return out, nil
	}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("references non-existent key %q", it.Key)
		}
		out[it.Path] = projection{data: b, mode: modeOr(it.Mode, mode)}
	}
	return out, nil
}

func isOptional(p *bool) bool { return p != nil && *p }

// configMapData is a ConfigMap's data and binaryData by key; a missing optional ConfigMap has
// none.
func (m *Manager) configMapData(ctx context.Context, ns, name string, optional bool) (map[string][]byte, error) {
	cm, err := m.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional {
		return map[string][]byte{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("configmap %q: %w", name, err)
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return data, nil
}

// secretData is a Secret's data by key; a missing optional Secret has none.
func (m *Manager) secretData(ctx context.Context, ns, name string, optional bool) (map[string][]byte, error) {
	s, err := m.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional {
		return map[string][]byte{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secret %q: %w", name, err)
	}
	return s.Data, nil
}

func (m *Manager) configMapProjections(ctx context.Context, ns, name string, items []corev1.KeyToPath, mode int32, optional *bool) (map[string]projection, error) {
	data, err := m.configMapData(ctx, ns, name, isOptional(optional))
	if err != nil {
		return nil, err
	}
	ps, err := keyProjections(data, items, mode, isOptional(optional))
	if err != nil {
		return nil, fmt.Errorf("configmap %q: %w", name, err)
	}
	return ps, nil
}

func (m *Manager) secretProjections(ctx context.Context, ns, name string, items []corev1.KeyToPath, mode int32, optional *bool) (map[string]projection, error) {
	data, err := m.secretData(ctx, ns, name, isOptional(optional))
	if err != nil {
		return nil, err
	}
	ps, err := keyProjections(data, items, mode, isOptional(optional))
	if err != nil {
		return nil, fmt.Errorf("secret %q: %w", name, err)
	}
	return ps, nil
}

// downwardProjections computes the downwardAPI files: pod fields and container resources,
// with the pod's addresses as its status records them (the kubelet refreshes volumes from
// the pod object, not from the sandbox) and the node's for the host and for limits not set.
func downwardProjections(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, mode int32, node nodeInfo) (map[string]projection, error) {
	out := map[string]projection{}
	var errs []error
	for _, it := range items {
		value, err := downwardValue(pod, it, node)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", it.Path, err))
			continue
		}
		out[it.Path] = projection{data: []byte(value), mode: modeOr(it.Mode, mode)}
	}
	return out, errors.Join(errs...)
}

func downwardValue(pod *corev1.Pod, it corev1.DownwardAPIVolumeFile, node nodeInfo) (string, error) {
	switch {
	case it.FieldRef != nil:
		hostIP := node.hostIP
		if hostIP == "" {
			hostIP = pod.Status.HostIP
		}
		return downward.FieldValue(pod, it.FieldRef.FieldPath, statusPodIPs(pod), hostIP)
	case it.ResourceFieldRef != nil:
		ref := it.ResourceFieldRef
		if ref.ContainerName == "" {
			return "", fmt.Errorf("resourceFieldRef %q: containerName is required in a volume", ref.Resource)
		}
		c := downward.ContainerByName(pod, ref.ContainerName)
		if c == nil {
			return "", fmt.Errorf("resourceFieldRef %q: no container %q", ref.Resource, ref.ContainerName)
		}
		return downward.ResourceValue(c, ref, node.allocatable)
	}
	return "", errors.New("neither fieldRef nor resourceFieldRef is set")
}

func statusPodIPs(pod *corev1.Pod) []string {
	var ips []string
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 && pod.Status.PodIP != "" {
		ips = []string{pod.Status.PodIP}
	}
	return ips
}

// projectedProjections merges the sources of a projected volume, later sources winning a
// path. The token file is 0600 and owned by the pod's shared runAsUser when there is one or
// the pod has an fsGroup (whose group read then makes it 0640), as the kubelet writes it.
func (m *Manager) projectedProjections(ctx context.Context, pod *corev1.Pod, v corev1.Volume, own ownership) (map[string]projection, error) {
	mode := modeOr(v.Projected.DefaultMode, defaultMode)
	out := map[string]projection{}
	for i, src := range v.Projected.Sources {
		var part map[string]projection
		var err error
		switch {
		case src.ConfigMap != nil:
			part, err = m.configMapProjections(ctx, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, mode, src.ConfigMap.Optional)
		case src.Secret != nil:
			part, err = m.secretProjections(ctx, pod.Namespace, src.Secret.Name, src.Secret.Items, mode, src.Secret.Optional)
		case src.DownwardAPI != nil:
			part, err = downwardProjections(pod, src.DownwardAPI.Items, mode, m.nodeInfo())
		case src.ServiceAccountToken != nil:
			part, err = m.tokenProjection(ctx, pod, v.Name, src.ServiceAccountToken, mode, own)
		case src.ClusterTrustBundle != nil:
			part, err = m.trustBundleProjection(ctx, src.ClusterTrustBundle, mode, own)
		case src.PodCertificate != nil:
			part, err = m.podCertProjection(ctx, pod, v.Name, i, src.PodCertificate, mode, own)
		default:
			err = errors.New("this projection is not supported by skiff's agent")
		}
		if err != nil {
			return nil, fmt.Errorf("source %d: %w", i, err)
		}
		for p, f := range part {
			out[p] = f
		}
	}
	return out, nil
}

func (m *Manager) tokenProjection(ctx context.Context, pod *corev1.Pod, volume string, p *corev1.ServiceAccountTokenProjection, mode int32, own ownership) (map[string]projection, error) {
	t, err := m.token(ctx, pod, volume, p)
	if err != nil {
		return nil, err
	}
	return map[string]projection{p.Path: ownedProjection([]byte(t), mode, own)}, nil
}

// files applies the pod's ownership to projections.
func (o ownership) files(ps map[string]projection) (map[string]file, error) {
	out := make(map[string]file, len(ps))
	for p, f := range ps {
		a, err := o.fileAttrs(f.mode, f.user)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out[p] = file{data: f.data, attrs: a}
	}
	return out, nil
}
