package persistentvolume

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

type fixture struct {
	t        *testing.T
	c        *Controller
	client   *fake.Clientset
	recorder *record.FakeRecorder
	ctx      context.Context
}

// newFixture runs the controller over a fake clientset seeded with objs, with live informers.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(100)
	core := factory.Core().V1()
	c := New(client, core.PersistentVolumeClaims(), core.PersistentVolumes(), factory.Storage().V1().StorageClasses(), core.Nodes(),
		recorder, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go c.Run(ctx)
	return &fixture{t: t, c: c, client: client, recorder: recorder, ctx: ctx}
}

// eventually polls cond for up to 5 s.
func (f *fixture) eventually(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (f *fixture) claim(name string) *corev1.PersistentVolumeClaim {
	c, err := f.client.CoreV1().PersistentVolumeClaims("default").Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return c
}

func (f *fixture) volume(name string) *corev1.PersistentVolume {
	pv, err := f.client.CoreV1().PersistentVolumes().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return pv
}

func localPath(mode storagev1.VolumeBindingMode) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local-path"}, Provisioner: LocalPathProvisioner,
		ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimDelete), VolumeBindingMode: ptr.To(mode)}
}

func node(name, root string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{AnnLocalPathRoot: root}}}
}

// A claim binds to the smallest fitting static volume, both sides Bound, in upstream's shape.
func TestStaticBinding(t *testing.T) {
	c := claim("data", "manual", "1Gi")
	f := newFixture(t, c, volume("big", "manual", "10Gi"), volume("small", "manual", "2Gi"))
	f.eventually("claim bound", func() bool { cl := f.claim("data"); return cl != nil && cl.Status.Phase == corev1.ClaimBound })
	cl := f.claim("data")
	if cl.Spec.VolumeName != "small" || cl.Annotations[AnnBindCompleted] != "yes" || cl.Annotations[AnnBoundByController] != "yes" {
		t.Errorf("claim %s annotations %v", cl.Spec.VolumeName, cl.Annotations)
	}
	if size := cl.Status.Capacity[corev1.ResourceStorage]; size.String() != "2Gi" || len(cl.Status.AccessModes) != 1 {
		t.Errorf("claim status %+v", cl.Status)
	}
	f.eventually("volume bound", func() bool { pv := f.volume("small"); return pv.Status.Phase == corev1.VolumeBound })
	if pv := f.volume("small"); pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != c.UID {
		t.Errorf("claimRef %+v", pv.Spec.ClaimRef)
	}
	f.eventually("other volume Available", func() bool { return f.volume("big").Status.Phase == corev1.VolumeAvailable })

	// Deleting the claim releases the volume; Retain keeps it.
	retained := f.volume("small")
	retained.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	if _, err := f.client.CoreV1().PersistentVolumes().Update(f.ctx, retained, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.client.CoreV1().PersistentVolumeClaims("default").Delete(f.ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("volume released", func() bool { return f.volume("small").Status.Phase == corev1.VolumeReleased })
}

// A volume deleted while still Bound (its claim went a moment before, and the controller had
// not seen it yet) is still Released once the claim is gone, so pv-protection can let it go;
// it is not reclaimed (no delete of a local-path volume being deleted).
func TestDeletingVolumeIsReleased(t *testing.T) {
	c := claim("data", "manual", "1Gi")
	pv := volume("held", "manual", "1Gi")
	pv.Finalizers = []string{"kubernetes.io/pv-protection"}
	pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	f := newFixture(t, c, pv)
	f.eventually("volume bound", func() bool { pv := f.volume("held"); return pv != nil && pv.Status.Phase == corev1.VolumeBound })
	// The fake clientset keeps an object with finalizers on delete only if told: mark it
	// deleting. It checks no resourceVersions either, so a status write the controller makes
	// from its older copy can drop the mark: set it again until the controller's cache has it.
	// The controller sees the deletion before the claim goes (the race this is about).
	now := metav1.Now()
	f.eventually("the controller's cache sees the deletion", func() bool {
		if pv, err := f.c.volumes.Get("held"); err == nil && pv.DeletionTimestamp != nil {
			return true
		}
		if deleting := f.volume("held"); deleting != nil && deleting.DeletionTimestamp == nil {
			deleting.DeletionTimestamp = &now
			if _, err := f.client.CoreV1().PersistentVolumes().Update(f.ctx, deleting, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return false
	})
	if err := f.client.CoreV1().PersistentVolumeClaims("default").Delete(f.ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("deleting volume released", func() bool { pv := f.volume("held"); return pv != nil && pv.Status.Phase == corev1.VolumeReleased })
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == "persistentvolumes" {
			t.Errorf("a volume being deleted was reclaimed: %v", a)
		}
	}
}

// A local-path claim waits for its first consumer, then gets a volume on the selected node
// under that node's root, and binds to it; deleting the claim deletes the volume.
func TestLocalPathProvisioning(t *testing.T) {
	c := claim("data", "local-path", "1Gi")
	f := newFixture(t, c, localPath(storagev1.VolumeBindingWaitForFirstConsumer), node("node-1", "/var/lib/skiff/node-1/storage"))
	f.eventually("provisioner annotation", func() bool { return f.claim("data").Annotations[AnnStorageProvisioner] == LocalPathProvisioner })
	time.Sleep(100 * time.Millisecond)
	if pv := f.volume(LocalVolumeName(c)); pv != nil {
		t.Fatalf("provisioned before a node was selected: %s", pv.Name)
	}
	if cl := f.claim("data"); cl.Status.Phase != corev1.ClaimPending {
		t.Errorf("claim phase %s, want Pending", cl.Status.Phase)
	}

	cl := f.claim("data")
	cl.Annotations[AnnSelectedNode] = "node-1"
	if _, err := f.client.CoreV1().PersistentVolumeClaims("default").Update(f.ctx, cl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("claim bound", func() bool { cl := f.claim("data"); return cl.Status.Phase == corev1.ClaimBound })
	pv := f.volume(LocalVolumeName(c))
	if pv == nil || pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != "/var/lib/skiff/node-1/storage/pvc-uid-data_default_data" {
		t.Fatalf("volume %+v", pv)
	}
	f.eventually("volume bound", func() bool { return f.volume(pv.Name).Status.Phase == corev1.VolumeBound })

	if err := f.client.CoreV1().PersistentVolumeClaims("default").Delete(f.ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("volume deleted", func() bool {
		_, err := f.client.CoreV1().PersistentVolumes().Get(f.ctx, pv.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// What the binder cannot do, it says on the claim, and leaves other provisioners' claims
// annotated for them.
func TestProvisioningRefusals(t *testing.T) {
	external := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "csi"}, Provisioner: "csi.example.com",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate)}
	// The claim on a node without a local-path root has its node selected from the start: an
	// Update from the test would race the controller's own writes of the claim, which the
	// fake clientset does not refuse as stale (CI once lost the annotation that way).
	nowhere := claim("nowhere", "local-path-wffc", "1Gi")
	nowhere.Annotations = map[string]string{AnnSelectedNode: "bare"}
	f := newFixture(t, claim("ext", "csi", "1Gi"), claim("immediate", "local-path", "1Gi"), nowhere,
		external, localPath(storagev1.VolumeBindingImmediate),
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local-path-wffc"}, Provisioner: LocalPathProvisioner,
			VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare"}})
	f.eventually("external annotation", func() bool {
		cl := f.claim("ext")
		return cl.Annotations[AnnStorageProvisioner] == "csi.example.com" && cl.Annotations[AnnBetaProvisioner] == "csi.example.com"
	})
	want := map[string]bool{"ExternalProvisioning": false, "ProvisioningFailed immediate": false, "ProvisioningFailed root": false}
	timeout := time.After(5 * time.Second)
	for done := false; !done; {
		select {
		case e := <-f.recorder.Events:
			switch {
			case contains(e, "ExternalProvisioning", "external provisioner 'csi.example.com'"):
				want["ExternalProvisioning"] = true
			case contains(e, "ProvisioningFailed", "needs volumeBindingMode WaitForFirstConsumer"):
				want["ProvisioningFailed immediate"] = true
			case contains(e, "ProvisioningFailed", `node "bare" does not announce a local-path root`):
				want["ProvisioningFailed root"] = true
			}
			done = want["ExternalProvisioning"] && want["ProvisioningFailed immediate"] && want["ProvisioningFailed root"]
		case <-timeout:
			t.Fatalf("events seen: %v", want)
		}
	}
}

func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
