package pods

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/agent/eviction"
)

// evictionRequest is a pod the node-pressure eviction asked to end; done receives the outcome.
type evictionRequest struct {
	message     string
	reclaimDisk bool
	grace       int64
	done        chan error
}

// Evict ends a pod for node pressure, as the kubelet's eviction manager: a Warning event
// "Evicted", its containers stopped within grace seconds (preStop hooks first), and the pod Failed with reason Evicted,
// the message, and a DisruptionTarget condition (TerminationByKubelet). With reclaimDisk its
// sandbox, containers (their writable layers and logs) and volumes go too, so the disk it
// used is free at once; otherwise they stay, as a failed pod's do, until it is deleted. The
// work runs in the pod's own sync, so it cannot race the pod being started; Evict returns
// when it is done or ctx ends.
func (m *Manager) Evict(ctx context.Context, pod *corev1.Pod, message string, reclaimDisk bool, grace int64) error {
	req := &evictionRequest{message: message, reclaimDisk: reclaimDisk, grace: grace, done: make(chan error, 1)}
	m.mu.Lock()
	if m.evictions == nil {
		m.evictions = map[types.UID]*evictionRequest{}
	}
	m.evictions[pod.UID] = req
	m.mu.Unlock()
	key, _ := cache.MetaNamespaceKeyFunc(pod)
	m.loop.Add(key)
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		m.mu.Lock()
		if m.evictions[pod.UID] == req {
			delete(m.evictions, pod.UID)
		}
		m.mu.Unlock()
		return fmt.Errorf("evict %s: %w", key, ctx.Err())
	}
}

// takeEviction returns and forgets the eviction asked for the pod, if any.
func (m *Manager) takeEviction(uid types.UID) *evictionRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	req := m.evictions[uid]
	delete(m.evictions, uid)
	return req
}

// evict does an eviction in the pod's sync.
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
	// Until the pod's Failed status reaches this node's cache, a sync would see it running
	// and start it again: it is known as evicted until it is deleted (stopAll forgets it).
	m.mu.Lock()
	if m.evicted == nil {
		m.evicted = map[types.UID]bool{}
	}
	m.evicted[pod.UID] = true
	m.mu.Unlock()
	m.log.Info("pod evicted", "pod", pod.Namespace+"/"+pod.Name, "message", req.message)
	return m.writeTerminal(ctx, pod, codes, corev1.PodFailed, eviction.Reason, req.message, corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet", Message: req.message})
}

// wasEvicted says whether the pod was evicted (and not yet deleted).
func (m *Manager) wasEvicted(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.evicted[uid]
}

// ActivePods are the pods the node runs now: admitted and not finished (eviction's candidates).
func (m *Manager) ActivePods() []*corev1.Pod {
	if m.lister == nil {
		return nil
	}
	pods, err := m.lister.List(everything())
	if err != nil {
		return nil
	}
	m.admitMu.Lock()
	defer m.admitMu.Unlock()
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil || m.wasEvicted(p.UID) {
			continue
		}
		if m.admitted[p.UID] || p.Status.StartTime != nil {
			out = append(out, p)
		}
	}
	return out
}
