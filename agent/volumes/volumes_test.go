package volumes

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// fakeClient serves the objects and answers TokenRequests with a JWT-shaped token naming the
// audience, counting the requests.
func fakeClient(requests *int, objects ...runtime.Object) *fake.Clientset {
	client := fake.NewSimpleClientset(objects...)
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		req := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest)
		if requests != nil {
			*requests++
		}
		aud := "default"
		if len(req.Spec.Audiences) > 0 {
			aud = req.Spec.Audiences[0]
		}
		return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{
			Token: "header." + aud + ".sig", ExpirationTimestamp: metav1.NewTime(time.Now().Add(time.Hour))}}, nil
	})
	return client
}

func cmVolume(name, cm string, items ...corev1.KeyToPath) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: cm}, Items: items}}}
}

func testPod(volumes ...corev1.Volume) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1", Labels: map[string]string{"b": "2", "a": "1"}},
		Spec: corev1.PodSpec{Volumes: volumes, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}}},
		Status: corev1.PodStatus{PodIP: "10.0.0.5", PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}}, HostIP: "192.0.2.9"},
	}
}

func (m *Manager) volPath(pod *corev1.Pod, plugin, name string, parts ...string) string {
	return filepath.Join(append([]string{m.dir(pod, plugin, name)}, parts...)...)
}

func TestPrepareWritesEveryVolumeType(t *testing.T) {
	withUmask(t, 0o077)
	client := fakeClient(nil,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"},
			Data: map[string]string{"a": "1", "b": "2"}, BinaryData: map[string][]byte{"bin": {0, 1}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec", Namespace: "ns"}, Data: map[string][]byte{"k": []byte("v")}},
	)
	m := New(client, t.TempDir())
	m.SetNode("192.0.2.1", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")})
	pod := testPod(
		cmVolume("cfg", "cfg", corev1.KeyToPath{Key: "b", Path: "sub/b.txt", Mode: ptr.To[int32](0o400)}),
		cmVolume("cfg-all", "cfg"),
		corev1.Volume{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "sec", DefaultMode: ptr.To[int32](0o440)}}},
		corev1.Volume{Name: "gone", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Optional: ptr.To(true),
			Items: []corev1.KeyToPath{{Key: "x", Path: "x"}}}}},
		corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			DefaultMode: ptr.To[int32](0o400),
			Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}},
				{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}, Mode: ptr.To[int32](0o644)},
				{Path: "ip", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}},
				{Path: "host", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}},
				{Path: "cpu", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.cpu"}},
				{Path: "mem", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.memory",
					Divisor: resource.MustParse("1Mi")}},
			}}}},
		corev1.Volume{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To[int32](0o640),
			Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"},
					Items: []corev1.KeyToPath{{Key: "a", Path: "cfg/a"}}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"},
					Items: []corev1.KeyToPath{{Key: "k", Path: "sec/k", Mode: ptr.To[int32](0o400)}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
					{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", Audience: "api"}},
			}}}},
		corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	)
	if err := m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path []string
		want string
		mode os.FileMode
	}{
		{[]string{"configmap", "cfg", "sub", "b.txt"}, "2", 0o400},
		{[]string{"configmap", "cfg-all", "a"}, "1", 0o644},
		{[]string{"configmap", "cfg-all", "bin"}, "\x00\x01", 0o644},
		{[]string{"secret", "sec", "k"}, "v", 0o440},
		{[]string{"downward-api", "info", "namespace"}, "ns", 0o400},
		{[]string{"downward-api", "info", "labels"}, "a=\"1\"\nb=\"2\"", 0o644},
		{[]string{"downward-api", "info", "ip"}, "10.0.0.5", 0o400},
		{[]string{"downward-api", "info", "host"}, "192.0.2.1", 0o400},
		{[]string{"downward-api", "info", "cpu"}, "4", 0o400}, // no limit: the node's allocatable
		{[]string{"downward-api", "info", "mem"}, "64", 0o400},
		{[]string{"projected", "proj", "cfg", "a"}, "1", 0o640},
		{[]string{"projected", "proj", "sec", "k"}, "v", 0o400},
		{[]string{"projected", "proj", "name"}, "p", 0o640},
		{[]string{"projected", "proj", "token"}, "header.api.sig", 0o640}, // no runAsUser, no fsGroup: defaultMode
	} {
		p := m.volPath(pod, tc.path[0], tc.path[1], tc.path[2:]...)
		if got := readString(t, p); got != tc.want {
			t.Errorf("%s: %q, want %q", strings.Join(tc.path, "/"), got, tc.want)
		}
		if got := perm(t, p); got != tc.mode {
			t.Errorf("%s: mode %v, want %v", strings.Join(tc.path, "/"), got, tc.mode)
		}
	}
	if got := listing(t, m.dir(pod, "configmap", "gone")); len(got) != 2 {
		t.Errorf("missing optional configmap: %q", got)
	}
	if got := perm(t, m.dir(pod, "empty-dir", "scratch")); got != 0o777 {
		t.Errorf("emptyDir mode %v", got)
	}
}

func TestPrepareFollowsSources(t *testing.T) {
	ctx := context.Background()
	client := fakeClient(nil, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"},
		Data: map[string]string{"a": "1", "b": "2"}})
	m := New(client, t.TempDir())
	v := cmVolume("cfg", "cfg")
	v.ConfigMap.Optional = ptr.To(true)
	pod := testPod(v)
	if err := m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	dir := m.dir(pod, "configmap", "cfg")
	first := version(t, dir)
	if err := m.Prepare(ctx, pod); err != nil || version(t, dir) != first {
		t.Fatalf("an unchanged configmap was rewritten (%v)", err)
	}

	cms := client.CoreV1().ConfigMaps("ns")
	if _, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"},
		Data: map[string]string{"a": "changed"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if readString(t, filepath.Join(dir, "a")) != "changed" {
		t.Fatal("update not reflected")
	}
	if _, err := os.Lstat(filepath.Join(dir, "b")); !os.IsNotExist(err) {
		t.Fatal("a removed key is still there")
	}

	if err := cms.Delete(ctx, "cfg", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if got := listing(t, dir); len(got) != 2 {
		t.Fatalf("a deleted optional configmap left %q", got)
	}
}

func TestPrepareKeepsTheLastVersionWhenTheSourceFails(t *testing.T) {
	ctx := context.Background()
	client := fakeClient(nil, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec", Namespace: "ns"}, Data: map[string][]byte{"k": []byte("v")}})
	m := New(client, t.TempDir())
	pod := testPod(
		corev1.Volume{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec"}}},
		corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	)
	if err := m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Secrets("ns").Delete(ctx, "sec", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := m.Prepare(ctx, pod)
	if err == nil || !strings.Contains(err.Error(), `volume "sec"`) || !strings.Contains(err.Error(), `secret "sec"`) {
		t.Fatalf("error %v does not name the volume and the secret", err)
	}
	if readString(t, m.volPath(pod, "secret", "sec", "k")) != "v" {
		t.Fatal("the last good version was dropped")
	}
}

func TestPrepareErrors(t *testing.T) {
	m := New(fakeClient(nil, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"}}), t.TempDir())
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"missing secret": {testPod(corev1.Volume{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "absent"}}}),
			`volume "s": secret "absent"`},
		"missing key":   {testPod(cmVolume("c", "cfg", corev1.KeyToPath{Key: "x", Path: "x"})), `volume "c": configmap "cfg": references non-existent key "x"`},
		"escaping path": {testPod(cmVolume("c", "cfg", corev1.KeyToPath{Key: "x", Path: "../x"})), `volume "c"`},
		"bad mode": {testPod(corev1.Volume{Name: "d", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items: []corev1.DownwardAPIVolumeFile{{Path: "n", Mode: ptr.To[int32](0o1777), FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}}),
			`volume "d": n: mode 01777 is outside 0 to 0777`},
		"resource without container": {testPod(corev1.Volume{Name: "d", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items: []corev1.DownwardAPIVolumeFile{{Path: "n", ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}}}}}),
			"containerName is required"},
		"unknown container": {testPod(corev1.Volume{Name: "d", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items: []corev1.DownwardAPIVolumeFile{{Path: "n", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "x", Resource: "limits.cpu"}}}}}}),
			`no container "x"`},
		"unsupported type": {testPod(corev1.Volume{Name: "nfs", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "x", Path: "/"}}}),
			`volume "nfs": this volume type is not supported`},
		"missing claim": {testPod(corev1.Volume{Name: "pvc", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "x"}}}),
			`volume "pvc": persistentvolumeclaim "x"`},
		"bad volume name": {testPod(corev1.Volume{Name: "..", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}),
			"cannot name a directory"},
		"bad medium": {testPod(corev1.Volume{Name: "e", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: "HugePages"}}}),
			`medium "HugePages" is not supported`},
	} {
		err := m.Prepare(context.Background(), tc.pod)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", name, err, tc.want)
		}
	}
	if err := m.Prepare(context.Background(), nil); err == nil {
		t.Error("a nil pod was accepted")
	}
	if _, err := m.MountsFor(nil, corev1.Container{}, nil); err == nil {
		t.Error("a nil pod was accepted")
	}
	bad := testPod()
	bad.UID = "../x"
	if err := m.Prepare(context.Background(), bad); err == nil {
		t.Error("a pod UID with a slash was accepted")
	}
}

func TestTokenCachedPerPath(t *testing.T) {
	var requests int
	m := New(fakeClient(&requests), t.TempDir())
	pod := testPod(corev1.Volume{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "one", Audience: "a1"}},
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "two", Audience: "a2"}},
		}}}})
	for range 2 {
		if err := m.Prepare(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	if requests != 2 {
		t.Fatalf("%d token requests, want one per token, cached", requests)
	}
	if readString(t, m.volPath(pod, "projected", "proj", "one")) != "header.a1.sig" ||
		readString(t, m.volPath(pod, "projected", "proj", "two")) != "header.a2.sig" {
		t.Fatal("tokens of different audiences mixed up")
	}
	m.Cleanup("uid-1")
	m.mu.Lock()
	left := len(m.tokens)
	m.mu.Unlock()
	if left != 0 {
		t.Fatal("cleanup kept the pod's tokens")
	}
}

func TestMountsFor(t *testing.T) {
	client := fakeClient(nil, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec", Namespace: "ns"}, Data: map[string][]byte{"k": []byte("v")}})
	m := New(client, t.TempDir())
	host := t.TempDir()
	pod := testPod(
		corev1.Volume{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec"}}},
		corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: host}}},
	)
	if err := m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	scratch, err := filepath.EvalSymlinks(m.dir(pod, "empty-dir", "scratch"))
	if err != nil {
		t.Fatal(err)
	}
	hostToContainer := corev1.MountPropagationHostToContainer
	c := corev1.Container{Name: "c", VolumeMounts: []corev1.VolumeMount{
		{Name: "sec", MountPath: "/s"},
		{Name: "sec", MountPath: "/k", SubPath: "k"},
		{Name: "scratch", MountPath: "/w", SubPathExpr: "$(POD)/logs"},
		{Name: "scratch", MountPath: "/r", ReadOnly: true},
		{Name: "host", MountPath: "/h", MountPropagation: &hostToContainer},
	}}
	mounts, err := m.MountsFor(pod, c, map[string]string{"POD": "p"})
	if err != nil {
		t.Fatal(err)
	}
	secVersion := version(t, m.dir(pod, "secret", "sec"))
	secDir, _ := filepath.EvalSymlinks(m.dir(pod, "secret", "sec"))
	want := []*runtimeapi.Mount{
		{ContainerPath: "/s", HostPath: m.dir(pod, "secret", "sec"), Readonly: true},
		{ContainerPath: "/k", HostPath: filepath.Join(secDir, secVersion, "k"), Readonly: true},
		{ContainerPath: "/w", HostPath: filepath.Join(scratch, "p", "logs")},
		{ContainerPath: "/r", HostPath: m.dir(pod, "empty-dir", "scratch"), Readonly: true},
		{ContainerPath: "/h", HostPath: host, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
	}
	if len(mounts) != len(want) {
		t.Fatalf("%d mounts", len(mounts))
	}
	for i, w := range want {
		g := mounts[i]
		if g.ContainerPath != w.ContainerPath || g.HostPath != w.HostPath || g.Readonly != w.Readonly || g.Propagation != w.Propagation {
			t.Errorf("mount %d: %+v, want %+v", i, g, w)
		}
	}
	if info, err := os.Stat(filepath.Join(scratch, "p", "logs")); err != nil || !info.IsDir() {
		t.Fatalf("subPath directory not created: %v", err)
	}

	legacy, err := m.Mounts(pod, corev1.Container{VolumeMounts: c.VolumeMounts[:2]})
	if err != nil || len(legacy) != 2 {
		t.Fatalf("Mounts: %v", err)
	}

	for name, vm := range map[string]corev1.VolumeMount{
		"absolute":     {Name: "scratch", MountPath: "/x", SubPathExpr: "$(ABS)"},
		"backstep":     {Name: "scratch", MountPath: "/x", SubPathExpr: "$(UP)"},
		"backticks":    {Name: "scratch", MountPath: "/x", SubPathExpr: "$(TICK)"},
		"missing var":  {Name: "scratch", MountPath: "/x", SubPathExpr: "$(NOPE)/a"},
		"empty var":    {Name: "scratch", MountPath: "/x", SubPathExpr: "$(EMPTY)"},
		"plain backup": {Name: "scratch", MountPath: "/x", SubPath: "a/../../b"},
	} {
		_, err := m.MountsFor(pod, corev1.Container{Name: "c", VolumeMounts: []corev1.VolumeMount{vm}},
			map[string]string{"ABS": "/tmp", "UP": "..", "TICK": "a`b`", "EMPTY": ""})
		if err == nil || !strings.Contains(err.Error(), "subPath") || !strings.Contains(err.Error(), `volumeMount "scratch"`) {
			t.Errorf("%s: error %v should name the volumeMount and say subPath", name, err)
		}
	}
	if _, err := m.MountsFor(pod, corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "nope", MountPath: "/x"}}}, nil); err == nil {
		t.Error("a mount of an unknown volume was accepted")
	}
}

func TestCleanupRemovesThePodDirectory(t *testing.T) {
	root := t.TempDir()
	m := New(fakeClient(nil), root)
	pod := testPod(corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	if err := m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.dir(pod, "empty-dir", "scratch"), "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Teardown("uid-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "uid-1")); !os.IsNotExist(err) {
		t.Fatal("cleanup left the pod's volumes")
	}
	if err := m.Teardown("uid-1"); err != nil {
		t.Fatalf("a second teardown: %v", err)
	}
	for _, uid := range []string{"", ".", "..", "a/b"} {
		if err := m.Teardown(uid); err == nil {
			t.Errorf("uid %q accepted", uid)
		}
	}
	if _, err := os.Stat(root); err != nil {
		t.Fatal("a bad uid removed the root")
	}
}

func TestTeardownOfASymlinkedPodDirectory(t *testing.T) {
	m := New(fakeClient(nil), t.TempDir())
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(m.root, "uid-link")); err != nil {
		t.Fatal(err)
	}
	if err := m.Teardown("uid-link"); err != nil {
		t.Fatal(err)
	}
	if readString(t, filepath.Join(outside, "keep")) != "x" {
		t.Fatal("removed through the symlink")
	}
	if _, err := os.Lstat(filepath.Join(m.root, "uid-link")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("the link itself was left")
	}
}

func TestConcurrentUse(t *testing.T) {
	m := New(fakeClient(nil), t.TempDir())
	pod := testPod(corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
		Items: []corev1.DownwardAPIVolumeFile{
			{Path: "host", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}},
			{Path: "cpu", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.cpu"}},
		}}}})
	m.SetNode("192.0.2.1", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")})
	done := make(chan error)
	for i := range 4 {
		go func() {
			var err error
			for range 20 {
				if i%2 == 0 {
					m.SetNode("192.0.2.1", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")})
				} else if err == nil {
					err = m.Prepare(context.Background(), pod)
				}
			}
			done <- err
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := readString(t, m.volPath(pod, "downward-api", "info", "cpu")); got != "2" {
		t.Fatalf("cpu %q", got)
	}
}
