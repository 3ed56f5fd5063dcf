package pods

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/agent/api"
	"github.com/skiff-sh/skiff/agent/downward"
	"github.com/skiff-sh/skiff/agent/expansion"
)

// expandAll expands every element of a command or args list with the container's environment.
func expandAll(list []string, env map[string]string) []string {
	if list == nil {
		return nil
	}
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = expansion.Map(s, env)
	}
	return out
}

// envMap turns the CRI environment back into a map, for expansion.
func envMap(envs []*runtimeapi.KeyValue) map[string]string {
	m := make(map[string]string, len(envs))
	for _, kv := range envs {
		m[kv.Key] = string(kv.Value)
	}
	return m
}

// waitingError is why a container is not running: its Reason and Message become the
// container's waiting state, as the kubelet reports them — ErrImagePull, ImagePullBackOff,
// ErrImageNeverPull and ImageInspectError for images; CreateContainerConfigError for a
// container whose configuration cannot be made (a missing ConfigMap key, a bad subPath);
// CreateContainerError and RunContainerError from the runtime.
type waitingError struct {
	Reason, Message string
}

func (e *waitingError) Error() string { return e.Reason + ": " + e.Message }

// Upstream's limits: the termination message file is read up to 4 KiB; the fallback to the
// log takes its last 80 lines, up to 2 KiB.
const (
	terminationMessageMax    = 4096
	terminationLogFallbackN  = 80
	terminationLogFallbackKB = 2048
)

// Annotations on the CRI container carry what its status needs later, as the kubelet's do.
const (
	annotationTerminationPath   = "io.kubernetes.container.terminationMessagePath"
	annotationTerminationPolicy = "io.kubernetes.container.terminationMessagePolicy"
)

// terminationFile creates the host file behind a container's terminationMessagePath, writable
// by any user the container runs as (0666, as upstream), and returns its path.
func terminationFile(podDir, container string, attempt uint32) (string, error) {
	dir := filepath.Join(podDir, "containers", container)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(dir, strconv.FormatUint(uint64(attempt), 10))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o666)
	if err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return p, os.Chmod(p, 0o666)
}

// terminationMessage is an exited container's message: the last 4 KiB of the file it wrote at
// its terminationMessagePath, or, with FallbackToLogsOnError and a failure that wrote none,
// the end of its log.
func terminationMessage(st *runtimeapi.ContainerStatus) string {
	path := st.Annotations[annotationTerminationPath]
	fallback := st.Annotations[annotationTerminationPolicy] == string(corev1.TerminationMessageFallbackToLogsOnError)
	var msg string
	if path != "" {
		for _, m := range st.Mounts {
			if m.ContainerPath != path {
				continue
			}
			b, err := readTail(m.HostPath, terminationMessageMax)
			if err != nil && !os.IsNotExist(err) {
				return fmt.Sprintf("Error on reading termination log %s: %v", m.HostPath, err)
			}
			msg = string(b)
		}
	}
	if msg == "" && fallback && st.ExitCode != 0 && st.LogPath != "" {
		return logTail(st.LogPath)
	}
	return msg
}

// logTail is the last lines of a CRI log file as plain text, as the kubelet's fallback
// message.
func logTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	defer f.Close()
	var out bytes.Buffer
	n := int64(terminationLogFallbackN)
	if _, _, err := api.WriteLogs(f, &out, api.LogOptions{TailLines: &n}, true); err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	b := out.Bytes()
	if len(b) > terminationLogFallbackKB {
		b = b[len(b)-terminationLogFallbackKB:]
	}
	return string(b)
}

// readTail reads at most max bytes from the end of the file.
func readTail(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if off := fi.Size() - max; off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// latestContainers maps each container name to its newest attempt in the sandbox.
func (m *Manager) latestContainers(ctx context.Context, sandboxID string) (map[string]*runtimeapi.Container, error) {
	list, err := m.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: sandboxID}})
	if err != nil {
		return nil, err
	}
	latest := map[string]*runtimeapi.Container{}
	for _, c := range list.Containers {
		if cur := latest[c.Metadata.Name]; cur == nil || c.Metadata.Attempt > cur.Metadata.Attempt {
			latest[c.Metadata.Name] = c
		}
	}
	return latest, nil
}

// isSidecar says whether an init container is a sidecar: restartPolicy Always, running
// beside the pod's containers (upstream's native sidecars).
func isSidecar(c corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// shouldRestart applies a restart policy (the pod's, or Always for a sidecar) and upstream's
// crash backoff (10 s doubling to 5 min).
func (m *Manager) shouldRestart(ctx context.Context, pod *corev1.Pod, c *runtimeapi.Container, policy corev1.RestartPolicy) bool {
	s, err := m.runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id})
	if err != nil {
		return false
	}
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		if s.Status.ExitCode == 0 {
			return false
		}
	}
	// A container that ran long enough resets its backoff, as upstream (10 min).
	ranLong := s.Status.StartedAt > 0 && time.Unix(0, s.Status.FinishedAt).Sub(time.Unix(0, s.Status.StartedAt)) > 10*time.Minute
	if !m.backoffs.crashed(string(pod.UID)+"/"+c.Metadata.Name, time.Now(), ranLong) {
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s_%s(%s)",
			c.Metadata.Name, pod.Name, pod.Namespace, pod.UID)
		return false
	}
	return true
}

// start creates and starts one container (a new attempt after prev, if any). A container
// whose configuration or start fails is an error of type *waitingError, and its next try
// backs off.
func (m *Manager) start(ctx context.Context, pod *corev1.Pod, pc *podContext, c corev1.Container, prev *runtimeapi.Container) error {
	if err := m.ensureImage(ctx, pod, c.Image, c.ImagePullPolicy); err != nil {
		return err
	}
	if err := m.pullImageVolumes(ctx, pod, c); err != nil {
		return err
	}
	key := string(pod.UID) + "/start/" + c.Name
	if m.backoffs.blocked(key, time.Now()) {
		if last := m.backoffs.lastStartErr(key); last != nil {
			return last
		}
	}
	err := m.createAndStart(ctx, pod, pc, c, prev)
	var we *waitingError
	if errors.As(err, &we) {
		m.backoffs.startFailed(key, time.Now(), we)
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "Error: %s", we.Message)
		return err
	}
	if err == nil {
		m.backoffs.succeeded(key)
	}
	return err
}

func (m *Manager) createAndStart(ctx context.Context, pod *corev1.Pod, pc *podContext, c corev1.Container, prev *runtimeapi.Container) error {
	attempt := uint32(0)
	if prev != nil {
		attempt = prev.Metadata.Attempt + 1
	}
	if m.resizeCondition(pod.UID) != nil {
		// A resize the node has not taken on does not reach a restarted container either.
		c.Resources = m.appliedTo(pod, c)
	}
	envs, err := m.containerEnv(ctx, pod, c, pc.ips)
	if err != nil {
		return &waitingError{Reason: "CreateContainerConfigError", Message: err.Error()}
	}
	env := envMap(envs)
	var mounts []*runtimeapi.Mount
	if m.opts.Volumes != nil {
		if err := m.mountImageVolumes(ctx, pod, c); err != nil {
			return err
		}
		if mounts, err = m.opts.Volumes.MountsFor(pod, c, env); err != nil {
			return &waitingError{Reason: "CreateContainerConfigError", Message: err.Error()}
		}
	}
	if pc.hostsFile != "" && !mountsHosts(c) {
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: "/etc/hosts", HostPath: pc.hostsFile})
	}
	annotations := map[string]string{}
	if path := c.TerminationMessagePath; path != "" && m.opts.PodsDir != "" {
		host, err := terminationFile(m.podDir(pod.UID), c.Name, attempt)
		if err != nil {
			return &waitingError{Reason: "CreateContainerConfigError", Message: fmt.Sprintf("termination message file: %v", err)}
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: path, HostPath: host})
		annotations[annotationTerminationPath] = path
		annotations[annotationTerminationPolicy] = string(c.TerminationMessagePolicy)
	}
	if err := m.takeCPUs(ctx, pod); err != nil {
		return &waitingError{Reason: "CreateContainerConfigError", Message: err.Error()}
	}
	if prev != nil {
		_, _ = m.runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: prev.Id})
	}
	res := m.containerResources(pod, c)
	cfg := &runtimeapi.ContainerConfig{
		Mounts:      mounts,
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: attempt},
		Image:       &runtimeapi.ImageSpec{Image: c.Image},
		Command:     expandAll(c.Command, env),
		Args:        expandAll(c.Args, env),
		WorkingDir:  c.WorkingDir,
		Envs:        envs,
		Annotations: annotations,
		LogPath:     filepath.Join(c.Name, fmt.Sprintf("%d.log", attempt)),
		Labels: map[string]string{"io.kubernetes.pod.name": pod.Name, "io.kubernetes.pod.namespace": pod.Namespace,
			"io.kubernetes.pod.uid": string(pod.UID), "io.kubernetes.container.name": c.Name, imageLabel: c.Image},
		Linux: &runtimeapi.LinuxContainerConfig{Resources: res, SecurityContext: securityContext(pod, c)},
	}
	created, err := m.runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pc.sandboxID, Config: cfg, SandboxConfig: pc.cfg})
	if err != nil {
		return &waitingError{Reason: "CreateContainerError", Message: pullError(err).Error()}
	}
	m.setCPUsApplied(created.ContainerId, res.CpusetCpus)
	m.recorder.Eventf(pod, corev1.EventTypeNormal, "Created", "Created container: %s", c.Name)
	if _, err := m.runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: created.ContainerId}); err != nil {
		return &waitingError{Reason: "RunContainerError", Message: pullError(err).Error()}
	}
	m.recorder.Eventf(pod, corev1.EventTypeNormal, "Started", "Started container %s", c.Name)
	m.setApplied(pod, c)
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		// As the kubelet: the hook runs before the container counts as started, and a failed
		// hook kills the container (its restart policy decides what follows).
		podIP := ""
		if len(pc.ips) > 0 {
			podIP = pc.ips[0]
		}
		if err := m.prober.runHook(ctx, pod, c, created.ContainerId, podIP, c.Lifecycle.PostStart); err != nil {
			m.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedPostStartHook", "PostStartHook failed: %v", err)
			_, _ = m.runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: created.ContainerId, Timeout: gracePeriod(pod)})
		}
	}
	return nil
}

// imageLabel records the image a container was created for, to see the pod's spec change it.
const imageLabel = "skiff.sh/image"

// gracePeriod is the pod's termination grace period in seconds (30 unless set).
func gracePeriod(pod *corev1.Pod) int64 {
	if pod.DeletionGracePeriodSeconds != nil {
		return *pod.DeletionGracePeriodSeconds
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return 30
}

// stopContainer stops a running container within grace seconds, running its preStop hook
// first (the hook's time counts against the grace period, as upstream).
func (m *Manager) stopContainer(ctx context.Context, pod *corev1.Pod, c corev1.Container, id string, grace int64) {
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && grace > 0 {
		start := time.Now()
		hctx, cancel := context.WithTimeout(ctx, time.Duration(grace)*time.Second)
		if err := m.prober.runHook(hctx, pod, c, id, pod.Status.PodIP, c.Lifecycle.PreStop); err != nil {
			m.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed: %v", err)
		}
		cancel()
		grace = max(grace-int64(time.Since(start).Seconds()), 2) // upstream leaves at least 2 s
	}
	_, _ = m.runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: grace})
}

// containerSpec is the pod's container (regular, init or ephemeral) of that name.
func (m *Manager) containerSpec(pod *corev1.Pod, name string) corev1.Container {
	if c := downward.ContainerByName(pod, name); c != nil {
		return *c
	}
	for _, ec := range pod.Spec.EphemeralContainers {
		if ec.Name == name {
			return corev1.Container(ec.EphemeralContainerCommon)
		}
	}
	return corev1.Container{Name: name}
}
