package storageprotection

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func podWith(name string, phase corev1.PodPhase, vols ...corev1.Volume) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.PodSpec{Volumes: vols},
		Status: corev1.PodStatus{Phase: phase}}
}

func claimVol(claim string) corev1.Volume {
	return corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

func TestClaimReleasable(t *testing.T) {
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data"}}
	eph := corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}
	other := podWith("x", corev1.PodRunning, claimVol("data"))
	other.Namespace = "elsewhere"
	for _, c := range []struct {
		name string
		pods []*corev1.Pod
		want bool
	}{
		{"no pods", nil, true},
		{"a running pod mounts it", []*corev1.Pod{podWith("a", corev1.PodRunning, claimVol("data"))}, false},
		{"a pending pod mounts it", []*corev1.Pod{podWith("a", corev1.PodPending, claimVol("data"))}, false},
		{"only finished pods mount it", []*corev1.Pod{podWith("a", corev1.PodSucceeded, claimVol("data")), podWith("b", corev1.PodFailed, claimVol("data"))}, true},
		{"another claim", []*corev1.Pod{podWith("a", corev1.PodRunning, claimVol("logs"))}, true},
		{"the same name in another namespace", []*corev1.Pod{other}, true},
		{"pod x's ephemeral volume data is claim x-data, not data", []*corev1.Pod{podWith("x", corev1.PodRunning, eph)}, true},
	} {
		if got := ClaimReleasable(claim, c.pods); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if got := ClaimsUsedBy(podWith("web", corev1.PodRunning, claimVol("a"), eph)); !slices.Equal(got, []string{"a", "web-data"}) {
		t.Errorf("claims used: %v", got)
	}
	for phase, want := range map[corev1.PersistentVolumePhase]bool{corev1.VolumeBound: false, corev1.VolumeReleased: true, corev1.VolumeAvailable: true, corev1.VolumeFailed: true} {
		if got := VolumeReleasable(&corev1.PersistentVolume{Status: corev1.PersistentVolumeStatus{Phase: phase}}); got != want {
			t.Errorf("a %s volume releasable = %v", phase, got)
		}
	}
}

// TestControllers runs both controllers against a fake API: a deleted claim keeps its
// finalizer while a pod uses it and loses it once the pod is gone; a deleted volume once it
// is no longer bound.
func TestControllers(t *testing.T) {
	deleted := metav1.NewTime(time.Now())
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data",
		Finalizers: []string{PVCFinalizer, "example.com/keep"}, DeletionTimestamp: &deleted}}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1", Finalizers: []string{PVFinalizer}, DeletionTimestamp: &deleted},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}}
	user := podWith("user", corev1.PodRunning, claimVol("data"))
	client := fake.NewClientset(claim, pv, user)
	factory := informers.NewSharedInformerFactory(client, 0)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pvc := NewPVC(client, factory.Core().V1().PersistentVolumeClaims(), factory.Core().V1().Pods(), log)
	pvs := NewPV(client, factory.Core().V1().PersistentVolumes(), log)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go pvc.Run(ctx)
	go pvs.Run(ctx)

	finalizers := func() ([]string, []string) {
		c, _ := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data", metav1.GetOptions{})
		v, _ := client.CoreV1().PersistentVolumes().Get(ctx, "pv1", metav1.GetOptions{})
		return c.Finalizers, v.Finalizers
	}
	time.Sleep(300 * time.Millisecond)
	if c, v := finalizers(); !slices.Contains(c, PVCFinalizer) || !slices.Contains(v, PVFinalizer) {
		t.Fatalf("released while in use: claim %v, volume %v", c, v)
	}
	if err := client.CoreV1().Pods("default").Delete(ctx, "user", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pv.Status.Phase = corev1.VolumeReleased
	if _, err := client.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil {
		c, v := finalizers()
		if slices.Equal(c, []string{"example.com/keep"}) && len(v) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	c, v := finalizers()
	t.Fatalf("not released: claim %v (another finalizer must stay), volume %v", c, v)
}
