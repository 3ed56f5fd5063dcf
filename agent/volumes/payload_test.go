package volumes

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestKeyProjections(t *testing.T) {
	data := map[string][]byte{"a": []byte("1"), "b": []byte("2")}
	all, err := keyProjections(data, nil, 0o600, false)
	if err != nil || len(all) != 2 || all["a"].mode != 0o600 || string(all["b"].data) != "2" {
		t.Fatalf("without items: %+v %v", all, err)
	}
	items := []corev1.KeyToPath{{Key: "a", Path: "x/a"}, {Key: "b", Path: "b", Mode: ptr.To[int32](0o400)}}
	got, err := keyProjections(data, items, 0o644, false)
	if err != nil || len(got) != 2 || got["x/a"].mode != 0o644 || got["b"].mode != 0o400 {
		t.Fatalf("with items: %+v %v", got, err)
	}
	missing := append(items, corev1.KeyToPath{Key: "c", Path: "c"})
	if _, err := keyProjections(data, missing, 0o644, false); err == nil || !strings.Contains(err.Error(), `"c"`) {
		t.Fatalf("a missing key: %v", err)
	}
	got, err = keyProjections(data, missing, 0o644, true)
	if err != nil || len(got) != 2 {
		t.Fatalf("a missing key of an optional source is skipped: %+v %v", got, err)
	}
	if got, err := keyProjections(map[string][]byte{}, nil, 0o644, true); err != nil || len(got) != 0 {
		t.Fatalf("empty: %+v %v", got, err)
	}
}

func TestDownwardProjections(t *testing.T) {
	pod := testPod()
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	items := []corev1.DownwardAPIVolumeFile{
		{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
		{Path: "label", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['a']"}, Mode: ptr.To[int32](0o600)},
		{Path: "ip", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}},
		{Path: "host", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}},
		{Path: "cpu-req", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "c", Resource: "requests.cpu", Divisor: resource.MustParse("1m")}},
		{Path: "mem-limit", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.memory"}},
	}
	want := map[string]string{"name": "p", "label": "1", "ip": "10.0.0.5", "host": "192.0.2.9", "cpu-req": "250",
		"mem-limit": "67108864"}
	got, err := downwardProjections(pod, items, 0o644, nodeInfo{})
	if err != nil {
		t.Fatal(err)
	}
	for p, w := range want {
		if string(got[p].data) != w {
			t.Errorf("%s: %q, want %q", p, got[p].data, w)
		}
	}
	if got["label"].mode != 0o600 || got["name"].mode != 0o644 {
		t.Errorf("modes %v %v", got["label"].mode, got["name"].mode)
	}
	got, err = downwardProjections(pod, items[3:4], 0o644, nodeInfo{hostIP: "192.0.2.1"})
	if err != nil || string(got["host"].data) != "192.0.2.1" {
		t.Errorf("the node's address: %q %v", got["host"].data, err)
	}
	pod.Status.PodIPs = nil
	if got, _ := downwardProjections(pod, items[2:3], 0o644, nodeInfo{}); string(got["ip"].data) != "10.0.0.5" {
		t.Errorf("status.podIP without podIPs: %q", got["ip"].data)
	}
	bad := []corev1.DownwardAPIVolumeFile{
		{Path: "x", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nonsense"}},
		{Path: "y"},
		{Path: "z", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.bogus"}},
	}
	_, err = downwardProjections(pod, bad, 0o644, nodeInfo{})
	for _, p := range []string{"x:", "y:", "z:"} {
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("error %v does not name %s", err, p)
		}
	}
}
