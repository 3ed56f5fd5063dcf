package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

const staticManifest = `apiVersion: v1
kind: Pod
metadata:
  name: static-web
  labels: {app: static-web, version: "%s"}
spec:
  containers:
  - name: web
    image: localhost/skiff/netutil:1
    imagePullPolicy: IfNotPresent
`

// TestStaticPods: a manifest file runs a pod with a mirror in the API; deleting the mirror
// brings it back without restarting the container; editing the file replaces the pod;
// removing it stops the pod.
func TestStaticPods(t *testing.T) {
	_, nsPath := framework.Netns(t)
	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	s := framework.NewServerWithAgent(t, dir, nsPath, "--pod-manifest-path", manifests)
	s.Start()
	c := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var nodeName string
	eventually(t, 90*time.Second, "node registered", func() (bool, string) {
		l, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) != 1 {
			return false, fmt.Sprint(err)
		}
		nodeName = l.Items[0].Name
		return true, ""
	})
	file := filepath.Join(manifests, "web.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(staticManifest, "1")), 0o644); err != nil {
		t.Fatal(err)
	}
	mirrorName := "static-web-" + nodeName
	running := func(what string) (*corev1.Pod, string) {
		var pod *corev1.Pod
		var containerID string
		eventually(t, 90*time.Second, what, func() (bool, string) {
			p, err := c.CoreV1().Pods("default").Get(ctx, mirrorName, metav1.GetOptions{})
			if err != nil || p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
				return false, fmt.Sprint(err)
			}
			pod, containerID = p, p.Status.ContainerStatuses[0].ContainerID
			return containerID != "", containerID
		})
		return pod, containerID
	}
	// The control-plane taint does not matter: static pods are not scheduled.
	mirror, first := running("static pod running with its mirror")
	if mirror.Annotations["kubernetes.io/config.mirror"] == "" || mirror.Annotations["kubernetes.io/config.source"] != "file" ||
		mirror.Annotations["kubernetes.io/config.hash"] == "" || mirror.Annotations["kubernetes.io/config.seen"] == "" {
		t.Fatalf("mirror annotations %v", mirror.Annotations)
	}
	if ref := metav1.GetControllerOf(mirror); ref == nil || ref.Kind != "Node" || ref.Name != nodeName {
		t.Fatalf("mirror owner %v", mirror.OwnerReferences)
	}

	if err := c.CoreV1().Pods("default").Delete(ctx, mirrorName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "mirror recreated", func() (bool, string) {
		p, err := c.CoreV1().Pods("default").Get(ctx, mirrorName, metav1.GetOptions{})
		return err == nil && p.UID != mirror.UID && p.DeletionTimestamp == nil, fmt.Sprint(err)
	})
	if _, again := running("recreated mirror running"); again != first {
		t.Fatalf("deleting the mirror restarted the container: %s -> %s", first, again)
	}

	if err := os.WriteFile(file, []byte(fmt.Sprintf(staticManifest, "2")), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "edited manifest replaces the pod", func() (bool, string) {
		p, err := c.CoreV1().Pods("default").Get(ctx, mirrorName, metav1.GetOptions{})
		if err != nil || p.Labels["version"] != "2" || p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
			return false, fmt.Sprint(err)
		}
		id := p.Status.ContainerStatuses[0].ContainerID
		return id != "" && id != first, id
	})

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "removed manifest stops the pod", func() (bool, string) {
		_, err := c.CoreV1().Pods("default").Get(ctx, mirrorName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}
