package pods

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// staticPods are the pods of manifest files (agent/static reads them), by namespace/name.
// The set is replaced whole when the files change; the pod workers read one at a time.
type staticPods struct {
	mu    sync.Mutex
	byKey map[string]*corev1.Pod
}

// replace makes pods the set and returns the keys of the pods added, changed (a new UID: an
// edited manifest) or removed.
func (s *staticPods) replace(pods []*corev1.Pod) (changed []string) {
	next := map[string]*corev1.Pod{}
	for _, p := range pods {
		next[p.Namespace+"/"+p.Name] = p
	}
	s.mu.Lock()
	prev := s.byKey
	s.byKey = next
	s.mu.Unlock()
	for k, p := range next {
		if old, ok := prev[k]; !ok || old.UID != p.UID {
			changed = append(changed, k)
		}
	}
	for k := range prev {
		if _, ok := next[k]; !ok {
			changed = append(changed, k)
		}
	}
	return changed
}

// get is the static pod of a key, nil if there is none.
func (s *staticPods) get(key string) *corev1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byKey[key]
}

// all is every static pod.
func (s *staticPods) all() []*corev1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(s.byKey))
	for _, p := range s.byKey {
		out = append(out, p)
	}
	return out
}

// SetStatic replaces the set of static pods (from manifest files); changed and removed ones
// are synced at once.
func (m *Manager) SetStatic(pods []*corev1.Pod) {
	for _, k := range m.static.replace(pods) {
		m.loop.Add(k)
	}
}

func (m *Manager) staticPod(key string) *corev1.Pod { return m.static.get(key) }

func isStatic(p *corev1.Pod) bool {
	return p.Annotations[staticSource] == "file" && p.ResourceVersion == ""
}

const (
	staticSource = "kubernetes.io/config.source"
	mirrorKey    = corev1.MirrorPodAnnotationKey
)

// runStatic runs a static pod. Its mirror in the API is only a view: deleting the mirror
// finishes the API deletion at once and leaves the containers running.
func (m *Manager) runStatic(ctx context.Context, sp *corev1.Pod) error {
	if mirror, err := m.lister.Pods(sp.Namespace).Get(sp.Name); err == nil && mirror.DeletionTimestamp != nil {
		_ = m.client.CoreV1().Pods(sp.Namespace).Delete(ctx, sp.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
			Preconditions: &metav1.Preconditions{UID: &mirror.UID}})
	}
	// An edited manifest is a new pod (new UID): the old version's sandbox goes.
	resp, err := m.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.namespace": sp.Namespace, "io.kubernetes.pod.name": sp.Name}}})
	if err != nil {
		return err
	}
	for _, sb := range resp.Items {
		if types.UID(sb.Metadata.Uid) != sp.UID {
			if err := m.stopAll(ctx, types.UID(sb.Metadata.Uid), 30, nil); err != nil {
				return err
			}
		}
	}
	return m.run(ctx, sp)
}
