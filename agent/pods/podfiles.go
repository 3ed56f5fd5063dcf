package pods

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// hostsFile writes the pod's hosts file once per sandbox, addresses and hostAliases (not on
// every 2-second resync) and returns its path.
func (m *Manager) hostsFile(pod *corev1.Pod, sandboxID string, ips []string, hostname, domain string) (string, error) {
	key := fmt.Sprint(sandboxID, ips, hostname, domain, pod.Spec.HostAliases)
	m.mu.Lock()
	written := m.hosts[pod.UID] == key
	m.mu.Unlock()
	path := filepath.Join(m.podDir(pod.UID), "etc-hosts")
	if written {
		return path, nil
	}
	path, err := writeHostsFile(m.podDir(pod.UID), pod, ips, hostname, domain)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	m.hosts[pod.UID] = key
	m.mu.Unlock()
	return path, nil
}

// podDir is the pod's directory on the node (its hosts file, termination message files).
func (m *Manager) podDir(uid types.UID) string {
	return filepath.Join(m.opts.PodsDir, string(uid))
}

// volumesInUse says whether the pod's volumes were set up before: by this agent process, or
// by an earlier one (the pod has containers, which run with them).
func (m *Manager) volumesInUse(pod *corev1.Pod) bool {
	m.mu.Lock()
	prepared := !m.prepared[pod.UID].IsZero()
	m.mu.Unlock()
	if prepared {
		return true
	}
	for _, cs := range append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if cs.ContainerID != "" {
			return true
		}
	}
	return false
}

// prepareVolumes writes the pod's volumes when it is new and every 30 s after, so mounted
// configMaps, secrets and tokens follow their sources without an API read every resync.

func (m *Manager) prepareVolumes(ctx context.Context, pod *corev1.Pod) error {
	if m.opts.Volumes == nil {
		return nil
	}
	m.mu.Lock()
	last := m.prepared[pod.UID]
	m.mu.Unlock()
	if time.Since(last) < 30*time.Second {
		return nil
	}
	if err := m.opts.Volumes.Prepare(ctx, pod); err != nil {
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedMount", "MountVolume.SetUp failed: %v", err)
		return err
	}
	m.mu.Lock()
	m.prepared[pod.UID] = time.Now()
	m.mu.Unlock()
	return nil
}
