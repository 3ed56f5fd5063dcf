package volumes

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestEmptyDirModeOf(t *testing.T) {
	for _, tc := range []struct {
		in   *int32
		want fs.FileMode
		bad  bool
	}{
		{in: nil, want: 0o777},
		{in: ptr.To[int32](0o750), want: 0o750},
		{in: ptr.To[int32](0o1777), want: 0o777 | fs.ModeSticky},
		{in: ptr.To[int32](0), want: 0},
		{in: ptr.To[int32](0o2777), bad: true},
		{in: ptr.To[int32](-1), bad: true},
	} {
		got, err := emptyDirModeOf(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && got != tc.want) {
			t.Errorf("%v: %v %v", ptr.Deref(tc.in, -1), got, err)
		}
	}
}

func TestTmpfsSize(t *testing.T) {
	mi := func(n int64) resource.Quantity { return *resource.NewQuantity(n<<20, resource.BinarySI) }
	limits := func(n int64) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: mi(n)}}
	}
	always := corev1.ContainerRestartPolicyAlways
	for _, tc := range []struct {
		name  string
		spec  corev1.PodSpec
		size  *resource.Quantity
		alloc int64
		want  int64
	}{
		{name: "nothing known", spec: corev1.PodSpec{Containers: []corev1.Container{{}}}, want: 0},
		{name: "allocatable", spec: corev1.PodSpec{Containers: []corev1.Container{{}}}, alloc: 1024, want: 1024},
		{name: "sizeLimit smaller", spec: corev1.PodSpec{Containers: []corev1.Container{{}}}, alloc: 1024, size: ptr.To(mi(10)), want: 10},
		{name: "sizeLimit larger than allocatable", spec: corev1.PodSpec{Containers: []corev1.Container{{}}}, alloc: 8, size: ptr.To(mi(10)), want: 8},
		{name: "sizeLimit zero is unset", spec: corev1.PodSpec{Containers: []corev1.Container{{}}}, alloc: 8, size: ptr.To(mi(0)), want: 8},
		{name: "pod limit", spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: limits(64)}, {Resources: limits(32)}}}, alloc: 1024, want: 96},
		{name: "one container unlimited", spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: limits(64)}, {}}}, alloc: 1024, want: 1024},
		{name: "init larger", spec: corev1.PodSpec{InitContainers: []corev1.Container{{Resources: limits(200)}},
			Containers: []corev1.Container{{Resources: limits(64)}}}, alloc: 1024, want: 200},
		{name: "sidecar adds", spec: corev1.PodSpec{InitContainers: []corev1.Container{{Resources: limits(16), RestartPolicy: &always}},
			Containers: []corev1.Container{{Resources: limits(64)}}}, alloc: 1024, want: 80},
		{name: "overhead", spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: limits(64)}},
			Overhead: corev1.ResourceList{corev1.ResourceMemory: mi(8)}}, want: 72},
		{name: "pod-level limit", spec: corev1.PodSpec{Containers: []corev1.Container{{}}, Resources: ptr.To(limits(48))}, alloc: 1024, want: 48},
	} {
		alloc := corev1.ResourceList{}
		if tc.alloc > 0 {
			alloc[corev1.ResourceMemory] = mi(tc.alloc)
		}
		if got := tmpfsSize(&corev1.Pod{Spec: tc.spec}, tc.size, alloc); got != tc.want<<20 {
			t.Errorf("%s: %d MiB, want %d", tc.name, got>>20, tc.want)
		}
	}
}

func TestEmptyDirSetUpOnce(t *testing.T) {
	withUmask(t, 0o077)
	m := New(fakeClient(nil), t.TempDir())
	pod := testPod(corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "moded", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Mode: ptr.To[int32](0o1750)}}})
	ctx := context.Background()
	if err := m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	dir := m.dir(pod, "empty-dir", "scratch")
	if got := perm(t, dir); got != 0o777 {
		t.Fatalf("mode %v, want 0777 whatever the umask", got)
	}
	if got := perm(t, m.dir(pod, "empty-dir", "moded")); got != 0o750|fs.ModeSticky {
		t.Fatalf("mode field: %v", got)
	}

	// What the containers do to the volume stays: Prepare runs every resync.
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if got := perm(t, dir); got != 0o700 {
		t.Fatalf("a later Prepare reset the mode to %v", got)
	}
	if readString(t, filepath.Join(dir, "data")) != "x" {
		t.Fatal("data lost")
	}

	// A volume gone under its marker (the data directory wiped) is set up again.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if got := perm(t, dir); got != 0o777 {
		t.Fatalf("recreated with mode %v", got)
	}
}
