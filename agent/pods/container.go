package pods

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/agent/api"
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
