package volumes

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func boundClaim(name, volume, path string, local bool) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: "claim-uid"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: volume},
		Spec: corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{Namespace: "default", Name: name, UID: "claim-uid"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}}}
	if local {
		pv.Annotations = map[string]string{"pv.kubernetes.io/provisioned-by": localPathProvisioner}
	}
	return pvc, pv
}

func claimPod(claim string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default", UID: "pod-uid"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
			Containers: []corev1.Container{{Name: "c", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}}}
}

// A bound local-path claim mounts its volume's directory, created world-writable under
// the node's root; the same annotation elsewhere gets no such treatment.
func TestClaimVolumes(t *testing.T) {
	root := filepath.Join(t.TempDir(), "storage")
	dir := filepath.Join(root, "pvc-1_default_data")
	pvc, pv := boundClaim("data", "pvc-1", dir, true)
	m := New(fake.NewClientset(pvc, pv), t.TempDir())
	m.SetLocalPathRoot(root)
	pod := claimPod("data")
	if err := m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o777 {
		t.Fatalf("local-path directory: %v %v", fi, err)
	}
	mounts, err := m.Mounts(pod, pod.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) != 1 || mounts[0].HostPath != dir || mounts[0].ContainerPath != "/data" || mounts[0].Readonly {
		t.Errorf("mounts %+v", mounts)
	}

	outside := filepath.Join(t.TempDir(), "elsewhere")
	pvc2, pv2 := boundClaim("data", "pvc-2", outside, true)
	m2 := New(fake.NewClientset(pvc2, pv2), t.TempDir())
	m2.SetLocalPathRoot(root)
	if err := m2.Prepare(context.Background(), claimPod("data")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(outside); err != nil || fi.Mode().Perm() == 0o777 {
		t.Errorf("a directory outside the root was made world-writable: %v %v", fi, err)
	}
}

func TestClaimNotBound(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
	m := New(fake.NewClientset(pvc), t.TempDir())
	pod := claimPod("data")
	if err := m.Prepare(context.Background(), pod); err == nil || !strings.Contains(err.Error(), `persistentvolumeclaim "data" is not bound yet`) {
		t.Errorf("unbound claim: %v", err)
	}
	if _, err := m.Mounts(pod, pod.Spec.Containers[0]); err == nil {
		t.Error("an unprepared claim mounted")
	}
	if err := m.Prepare(context.Background(), claimPod("missing")); err == nil || !strings.Contains(err.Error(), `persistentvolumeclaim "missing"`) {
		t.Errorf("missing claim: %v", err)
	}
}

// Cleanup removes only the directories of volumes that are gone.
func TestCleanLocalPath(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"pvc-live_default_a", "pvc-gone_default_b", "unrelated", "pvc-nounderscore"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	client := fake.NewClientset(&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-live"}})
	if err := cleanLocalPathOnce(context.Background(), client, root, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(root)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if strings.Join(left, ",") != "pvc-live_default_a,pvc-nounderscore,unrelated" {
		t.Errorf("left %v", left)
	}
}
