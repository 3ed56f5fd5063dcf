package pods

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/skiff-sh/skiff/agent/eviction"
)

// evictionRequest is a pod node-pressure eviction asked to end. It stays until the pod is
// deleted: from the moment it is asked the pod is never started again, and a sync that finds
// it unfinished (a failed stop or status write) does the work again.
type evictionRequest struct {
	key         string // namespace/name
	message     string
	reclaimDisk bool
	grace       int64
	finished    bool
	done        chan error // receives the first outcome
	notified    bool
}

// Evict ends a pod for node pressure, as the kubelet's eviction manager: a Warning event
// "Evicted", its containers stopped within grace seconds (preStop hooks first), and the pod
// Failed with reason Evicted, the message, and a DisruptionTarget condition
// (TerminationByKubelet). With reclaimDisk its sandbox, containers (their writable layers and
// logs) and volumes go too, so the disk it used is free at once; otherwise they stay, as a
// failed pod's do, until it is deleted. The work runs in the pod's own sync, so it cannot
// race the pod being started; Evict returns when it is done or ctx ends (the work goes on).
// A pod already being evicted is not evicted again.
func (m *Manager) Evict(ctx context.Context, pod *corev1.Pod, message string, reclaimDisk bool, grace int64) error {
	key, _ := cache.MetaNamespaceKeyFunc(pod)
	m.mu.Lock()
	if m.evictions == nil {
		m.evictions = map[types.UID]*evictionRequest{}
	}
	if _, ok := m.evictions[pod.UID]; ok {
		m.mu.Unlock()
		return nil
	}
	req := &evictionRequest{key: key, message: message, reclaimDisk: reclaimDisk, grace: grace, done: make(chan error, 1)}
	m.evictions[pod.UID] = req
	m.mu.Unlock()
	m.loop.Add(key)
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("evict %s: %w", key, ctx.Err())
	}
}

// eviction is the eviction asked for the pod, if any.
func (m *Manager) eviction(uid types.UID) *evictionRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.evictions[uid]
}

// syncEviction does (or finishes) an eviction in the pod's sync.
func (m *Manager) syncEviction(ctx context.Context, pod *corev1.Pod, req *evictionRequest) error {
	m.mu.Lock()
	finished := req.finished
	m.mu.Unlock()
	if finished {
		// Like any finished pod: the containers stay (unless disk was reclaimed), the
		// network goes.
		return m.stopSandboxes(ctx, pod.UID)
	}
	err := m.evict(ctx, pod, req)
	m.mu.Lock()
	req.finished = err == nil
	if !req.notified {
		req.notified = true
		req.done <- err
	}
	m.mu.Unlock()
	return err
}

func (m *Manager) evict(ctx context.Context, pod *corev1.Pod, req *evictionRequest) error {
	m.recorder.Event(pod, corev1.EventTypeWarning, eviction.Reason, req.message)
	codes, err := m.stopContainers(ctx, pod, req.grace)
	if err != nil {
		return err
	}
	if req.reclaimDisk {
		if err := m.stopAll(ctx, pod.UID, 0, pod); err != nil {
			return err
		}
	} else if err := m.stopSandboxes(ctx, pod.UID); err != nil {
		return err
	}
	m.forgetAdmitted(pod.UID)
	m.log.Info("pod evicted", "pod", req.key, "message", req.message)
	// The status is written over the API's current copy (this node's cache may be behind),
	// retried on conflict: a pod whose containers are gone must not stay Running there.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := m.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && cur.UID != pod.UID) {
			return nil // deleted meanwhile
		}
		if err != nil {
			return err
		}
		return m.writeTerminalStrict(ctx, cur, codes, corev1.PodFailed, eviction.Reason, req.message, corev1.PodCondition{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet", Message: req.message})
	})
}

// forgetEviction drops the eviction of a pod that is gone: by UID, or by key when only the
// name is known.
func (m *Manager) forgetEviction(uid types.UID, key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.evictions, uid)
	if key == "" {
		return
	}
	for u, req := range m.evictions {
		if req.key == key {
			delete(m.evictions, u)
		}
	}
}

// ActivePods are the pods the node runs now: admitted, not finished, not being evicted
// (eviction's candidates). None before the pod cache has synced.
func (m *Manager) ActivePods() []*corev1.Pod {
	if !m.synced.Load() {
		return nil
	}
	pods, err := m.lister.List(everything())
	if err != nil {
		return nil
	}
	m.admitMu.Lock()
	defer m.admitMu.Unlock()
	return m.activeOf(pods)
}

// activeOf picks the active pods out of pods; the caller holds admitMu.
func (m *Manager) activeOf(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil || m.eviction(p.UID) != nil {
			continue
		}
		if m.admitted[p.UID] || p.Status.StartTime != nil {
			out = append(out, p)
		}
	}
	return out
}

// ImageVolumeRefs are the image references every pod of this node not yet deleted mounts as
// volumes (running or finished: a finished pod's mounts stay until it is deleted).
func (m *Manager) ImageVolumeRefs() []string {
	if !m.synced.Load() {
		return nil
	}
	pods, err := m.lister.List(everything())
	if err != nil {
		return nil
	}
	var refs []string
	for _, p := range pods {
		for _, v := range p.Spec.Volumes {
			if v.Image != nil {
				refs = append(refs, v.Image.Reference)
			}
		}
	}
	return refs
}
