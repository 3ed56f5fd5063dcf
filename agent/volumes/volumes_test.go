package volumes

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestPrepareAndMounts(t *testing.T) {
	root := t.TempDir()
	client := fake.NewSimpleClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"}, Data: map[string]string{"a": "1", "b": "2"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec", Namespace: "ns"}, Data: map[string][]byte{"k": []byte("v")}},
	)
	m := New(client, root)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"}, Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{
			{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"},
				Items: []corev1.KeyToPath{{Key: "b", Path: "sub/b.txt"}}}}},
			{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec"}}},
			{Name: "gone", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Optional: ptr.To(true)}}},
			{Name: "ns", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
		Containers: []corev1.Container{{Name: "c", VolumeMounts: []corev1.VolumeMount{
			{Name: "cfg", MountPath: "/etc/cfg"}, {Name: "scratch", MountPath: "/tmp/s"}, {Name: "sec", MountPath: "/s", SubPath: "k"}}}},
	}}
	if err := m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	read := func(parts ...string) string {
		b, err := os.ReadFile(filepath.Join(append([]string{root, "uid-1", "volumes"}, parts...)...))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if read("configmap", "cfg", "sub", "b.txt") != "2" || read("secret", "sec", "k") != "v" || read("downward-api", "ns", "namespace") != "ns" {
		t.Fatal("volume contents wrong")
	}
	mounts, err := m.Mounts(pod, pod.Spec.Containers[0])
	if err != nil || len(mounts) != 3 {
		t.Fatalf("mounts: %v %v", err, mounts)
	}
	if !mounts[0].Readonly || mounts[1].Readonly || mounts[2].HostPath != filepath.Join(root, "uid-1", "volumes", "secret", "sec", "k") {
		t.Fatalf("mounts %+v", mounts)
	}
	bad := pod.DeepCopy()
	bad.Spec.Volumes = append(bad.Spec.Volumes, corev1.Volume{Name: "missing", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: "absent"}}})
	if err := m.Prepare(context.Background(), bad); err == nil {
		t.Fatal("a missing, non-optional secret was accepted")
	}
	if _, err := m.Mounts(pod, corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "nope", MountPath: "/x"}}}); err == nil {
		t.Fatal("a mount of an unknown volume was accepted")
	}
	m.Cleanup("uid-1")
	if _, err := os.Stat(filepath.Join(root, "uid-1")); !os.IsNotExist(err) {
		t.Fatal("cleanup left the pod's volumes")
	}
	if err := writeDir(t.TempDir(), map[string][]byte{"../escape": nil}); err == nil {
		t.Fatal("a path escaping the volume was accepted")
	}
}
