package agent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/images/oci"
)

// TestImageVolume mounts an image as a volume, as a user does with the real kubectl: the image
// (two layers, the upper one replacing a file of the lower) is pulled from a registry the test
// runs, per the volume's pullPolicy Always, and mounted read-only, whole and by subPath, into a
// container of another image; a write into it fails; an image volume that cannot be had
// (pullPolicy Never, image absent) keeps the container waiting with the kubelet's reason and
// message; deleting the pod unmounts the volume and releases containerd's view of the image.
func TestImageVolume(t *testing.T) {
	n := newRegistryNode(t)
	c, ctx, kubectl, reg, dir := n.c, n.ctx, n.kubectl, n.reg, n.dir

	data := oci.Image{Name: "localhost/skiff/data:1",
		Files: []oci.File{{Path: "/data.json", Mode: 0o644, Data: []byte(`{"image":"kitten.jpg"}`)},
			{Path: "/etc/os-release", Mode: 0o644, Data: []byte("NAME=lower\n")}},
		Layers: [][]oci.File{{{Path: "/etc/os-release", Mode: 0o644, Data: []byte("NAME=\"Image Volume Test\"\n")}}}}
	archive := filepath.Join(dir, "data.tar")
	if err := oci.WriteFile(archive, data); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.AddArchive(archive, "test/data", "v1"); err != nil {
		t.Fatal(err)
	}
	image := reg.Ref("test/data", "v1")

	manifest := `apiVersion: v1
kind: Pod
metadata:
  name: reader
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists}]
  containers:
  - name: read
    image: localhost/skiff/netutil:1
    command: [/bin/netutil, cat, /volume/data.json, /volume/etc/os-release, /os-release]
    volumeMounts:
    - {name: data, mountPath: /volume}
    - {name: data, mountPath: /os-release, subPath: etc/os-release}
  - name: write
    image: localhost/skiff/netutil:1
    command: [/bin/netutil, write, /volume/new, text]
    volumeMounts: [{name: data, mountPath: /volume}]
  volumes:
  - name: data
    image: {reference: ` + image + `, pullPolicy: Always}
---
apiVersion: v1
kind: Pod
metadata:
  name: never
spec:
  terminationGracePeriodSeconds: 1
  tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists}]
  containers:
  - name: c
    image: localhost/skiff/netutil:1
    command: [/bin/netutil, sleep, 1h]
    volumeMounts: [{name: data, mountPath: /volume}]
  volumes:
  - name: data
    image: {reference: ` + reg.Ref("test/data", "absent") + `, pullPolicy: Never}
`
	kubectl(manifest, "apply", "-f", "-")
	t.Cleanup(func() { deletePods(t, c, "reader", "never") })

	var reader *corev1.Pod
	eventually(t, 90*time.Second, "both containers of reader terminated", func() (bool, string) {
		p, err := c.CoreV1().Pods("default").Get(ctx, "reader", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		reader = p
		done := 0
		for _, st := range p.Status.ContainerStatuses {
			if st.State.Terminated != nil {
				done++
			}
		}
		return done == 2, fmt.Sprintf("%s %+v\n%s", p.Status.Phase, p.Status.ContainerStatuses, podEvents(ctx, c, "reader"))
	})
	for _, st := range reader.Status.ContainerStatuses {
		code := st.State.Terminated.ExitCode
		if (st.Name == "read") != (code == 0) {
			t.Errorf("container %s exited %d", st.Name, code)
		}
	}
	want := `{"image":"kitten.jpg"}NAME="Image Volume Test"` + "\n" + `NAME="Image Volume Test"` + "\n"
	if out := kubectl("", "logs", "reader", "-c", "read"); out != want {
		t.Errorf("the image's files through the volume: %q, want %q", out, want)
	}
	if out := kubectl("", "logs", "reader", "-c", "write"); !strings.Contains(out, "read-only file system") {
		t.Errorf("writing into the image volume: %q, want a read-only file system error", out)
	}
	// Pulled from the registry (pullPolicy Always), with the kubelet's events.
	fetched := false
	for _, r := range reg.Requests() {
		fetched = fetched || strings.HasSuffix(r, " /v2/test/data/manifests/v1")
	}
	if !fetched {
		t.Errorf("the registry was not asked for the volume's image; requests: %v", reg.Requests())
	}
	if evs := podEvents(ctx, c, "reader"); !strings.Contains(evs.String(), fmt.Sprintf("Pulling image %q", image)) {
		t.Errorf("no Pulling event for the volume's image:\n%s", evs)
	}

	eventually(t, 60*time.Second, "never's container waiting with ErrImageNeverPull", func() (bool, string) {
		p, err := c.CoreV1().Pods("default").Get(ctx, "never", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
			return false, fmt.Sprintf("%s %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w.Reason == "ErrImageNeverPull" && w.Message == fmt.Sprintf("Container image %q is not present with pull policy of Never", reg.Ref("test/data", "absent")),
			fmt.Sprintf("waiting %s: %s", w.Reason, w.Message)
	})

	// Deleting the pod unmounts the volume and releases containerd's view of the image.
	volumeDir := filepath.Join(dir, "agent", "pods", string(reader.UID), "volumes", "image", "data")
	if !mountedOnHost(t, volumeDir) {
		t.Errorf("%s is not a mount point while the pod exists", volumeDir)
	}
	views := func() string {
		out, err := exec.CommandContext(ctx, "ctr", "--address", filepath.Join(dir, "agent", "containerd", "containerd.sock"),
			"-n", "k8s.io", "snapshots", "ls").CombinedOutput()
		if err != nil {
			t.Fatalf("ctr snapshots ls: %v\n%s", err, out)
		}
		return string(out)
	}
	key := "skiff/image-volume/" + string(reader.UID) + "/data"
	if out := views(); !strings.Contains(out, key) {
		t.Errorf("containerd has no view %s:\n%s", key, out)
	}
	deletePods(t, c, "reader")
	eventually(t, 30*time.Second, "the view released after the pod is gone", func() (bool, string) {
		out := views()
		return !strings.Contains(out, key) && !mountedOnHost(t, volumeDir), out
	})
}

// mountedOnHost reports whether dir is a mount point in this (the host's) mount namespace.
func mountedOnHost(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}
