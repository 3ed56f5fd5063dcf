package pods

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// runHook runs a lifecycle handler (postStart or preStop) against a running container, as
// the kubelet does: exec in the container, an HTTP GET to the pod (its IP unless the action
// names a host), or a sleep. It returns the handler's failure.
func (pr *prober) runHook(ctx context.Context, pod *corev1.Pod, c corev1.Container, containerID, podIP string, h *corev1.LifecycleHandler) error {
	switch {
	case h.Exec != nil:
		// The kubelet gives exec hooks no timeout of their own: they are bounded by the
		// grace period (preStop) or run until done (postStart); ctx carries that bound.
		timeout := 2 * time.Minute
		if d, ok := ctx.Deadline(); ok {
			timeout = time.Until(d)
		}
		return pr.exec(ctx, containerID, h.Exec.Command, max(timeout, time.Second))
	case h.HTTPGet != nil:
		port, err := containerPort(c, h.HTTPGet.Port)
		if err != nil {
			return err
		}
		return pr.httpGet(ctx, h.HTTPGet, podIP, port)
	case h.Sleep != nil:
		select {
		case <-time.After(time.Duration(h.Sleep.Seconds) * time.Second):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	case h.TCPSocket != nil:
		return errors.New("tcpSocket lifecycle handlers are not supported (deprecated upstream and never run)")
	}
	return errors.New("empty lifecycle handler")
}

// containerPort resolves a named or numbered port of the container.
func containerPort(c corev1.Container, p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return int(p.IntVal), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("port %q not found in container %s", p.StrVal, c.Name)
}
