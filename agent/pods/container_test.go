package pods

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestExpandAll(t *testing.T) {
	env := map[string]string{"TEST_VAR": "test-value"}
	if got := expandAll([]string{"/bin/sh", "-c", "echo $(TEST_VAR)"}, env); strings.Join(got, "|") != "/bin/sh|-c|echo test-value" {
		t.Errorf("expandAll = %q", got)
	}
	if expandAll(nil, env) != nil {
		t.Error("expandAll(nil) is not nil: the image's entrypoint would be replaced")
	}
}

func TestTerminationMessage(t *testing.T) {
	dir := t.TempDir()
	host, err := terminationFile(dir, "c", 2)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(host); err != nil || fi.Mode().Perm() != 0o666 || filepath.Base(host) != "2" {
		t.Fatalf("termination file %s: %v %v", host, fi.Mode(), err)
	}
	logPath := filepath.Join(dir, "0.log")
	var log strings.Builder
	for i := 0; i < 100; i++ {
		log.WriteString("2026-12-01T10:00:00.000000000Z stdout F line " + strings.Repeat("x", i%3) + "\n")
	}
	if err := os.WriteFile(logPath, []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	status := func(policy corev1.TerminationMessagePolicy, code int32) *runtimeapi.ContainerStatus {
		return &runtimeapi.ContainerStatus{ExitCode: code, LogPath: logPath,
			Annotations: map[string]string{annotationTerminationPath: "/dev/termination-log", annotationTerminationPolicy: string(policy)},
			Mounts:      []*runtimeapi.Mount{{ContainerPath: "/etc/hosts", HostPath: "/nonexistent"}, {ContainerPath: "/dev/termination-log", HostPath: host}}}
	}
	// Nothing written: empty, and the log only with the fallback policy and a failure.
	if got := terminationMessage(status(corev1.TerminationMessageReadFile, 1)); got != "" {
		t.Errorf("File policy, nothing written: %q", got)
	}
	if got := terminationMessage(status(corev1.TerminationMessageFallbackToLogsOnError, 0)); got != "" {
		t.Errorf("fallback policy, success: %q", got)
	}
	got := terminationMessage(status(corev1.TerminationMessageFallbackToLogsOnError, 1))
	if n := strings.Count(got, "\n"); n != 80 || !strings.HasPrefix(got, "line ") {
		t.Errorf("fallback to the log: %d lines, %q", n, got)
	}
	// Written: the file wins, cut to its last 4 KiB.
	if err := os.WriteFile(host, []byte("DONE"), 0o666); err != nil {
		t.Fatal(err)
	}
	if got := terminationMessage(status(corev1.TerminationMessageFallbackToLogsOnError, 1)); got != "DONE" {
		t.Errorf("written message: %q", got)
	}
	if err := os.WriteFile(host, []byte(strings.Repeat("a", 5000)+"END"), 0o666); err != nil {
		t.Fatal(err)
	}
	if got := terminationMessage(status(corev1.TerminationMessageReadFile, 0)); len(got) != terminationMessageMax || !strings.HasSuffix(got, "END") {
		t.Errorf("long message: %d bytes", len(got))
	}
	// No termination path (the container had none): nothing.
	if got := terminationMessage(&runtimeapi.ContainerStatus{ExitCode: 1}); got != "" {
		t.Errorf("no path: %q", got)
	}
}

func TestAppliedResources(t *testing.T) {
	c := corev1.Container{Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}
	r, alloc := appliedResources(c)
	if len(r.Requests) != 1 || r.Requests.Cpu().String() != "100m" || len(r.Limits) != 1 || r.Limits.Memory().String() != "64Mi" {
		t.Errorf("resources %+v: want only cpu and memory", r)
	}
	if len(alloc) != 2 {
		t.Errorf("allocated %v: want every request", alloc)
	}
	if r, alloc := appliedResources(corev1.Container{}); r.Requests != nil || r.Limits != nil || alloc != nil {
		t.Errorf("best effort: %+v %v", r, alloc)
	}
}

func TestResizeDecisions(t *testing.T) {
	q := resource.MustParse
	was := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("100m"), corev1.ResourceMemory: q("64Mi")},
		Limits: corev1.ResourceList{corev1.ResourceCPU: q("200m")}}
	same := *was.DeepCopy()
	same.Requests[corev1.ResourceCPU] = q("0.1") // the same amount, written otherwise
	same.Requests[corev1.ResourceEphemeralStorage] = q("1Gi")
	if !sameCPUMemory(was, same) {
		t.Error("equal cpu and memory compared unequal")
	}
	more := *was.DeepCopy()
	more.Limits[corev1.ResourceCPU] = q("400m")
	if sameCPUMemory(was, more) {
		t.Error("a changed cpu limit went unseen")
	}
	noLimit := *was.DeepCopy()
	delete(noLimit.Limits, corev1.ResourceCPU)
	if sameCPUMemory(was, noLimit) {
		t.Error("a removed limit went unseen")
	}
	c := corev1.Container{Resources: more, ResizePolicy: []corev1.ContainerResizePolicy{
		{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
		{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}}
	if restartOnResize(c, was) {
		t.Error("a cpu change with NotRequired restarts")
	}
	memChanged := *was.DeepCopy()
	memChanged.Requests[corev1.ResourceMemory] = q("128Mi")
	c.Resources = memChanged
	if !restartOnResize(c, was) {
		t.Error("a memory change with RestartContainer does not restart")
	}
}
