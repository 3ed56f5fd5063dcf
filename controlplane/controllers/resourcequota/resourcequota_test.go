package resourcequota

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// The controller writes status.hard and status.used from the namespace's objects, in
// scope, and gives back what a deleted object held.
func TestQuotaStatus(t *testing.T) {
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		corev1.ResourcePods: resource.MustParse("10"), corev1.ResourceRequestsCPU: resource.MustParse("2"),
		corev1.ResourceConfigMaps: resource.MustParse("5"), "count/secrets": resource.MustParse("5")}}}
	pod := func(name, cpu string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	client := fake.NewClientset(q, pod("a", "500m", corev1.PodRunning), pod("b", "250m", corev1.PodPending), pod("done", "1", corev1.PodSucceeded),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: "other"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns"}})
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, factory.Core().V1().ResourceQuotas(), factory, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	go c.Run(ctx)

	used := func() corev1.ResourceList {
		got, err := client.CoreV1().ResourceQuotas("ns").Get(ctx, "q", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Status.Used
	}
	wait := func(what string, cond func(corev1.ResourceList) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond(used()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: used %v", what, used())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	is := func(u corev1.ResourceList, name corev1.ResourceName, want string) bool {
		q := u[name]
		return q.String() == want
	}
	wait("initial usage", func(u corev1.ResourceList) bool {
		return is(u, corev1.ResourcePods, "2") && is(u, corev1.ResourceRequestsCPU, "750m") && is(u, corev1.ResourceConfigMaps, "1") && is(u, "count/secrets", "0")
	})
	if err := client.CoreV1().Pods("ns").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("after a delete", func(u corev1.ResourceList) bool {
		return is(u, corev1.ResourcePods, "1") && is(u, corev1.ResourceRequestsCPU, "250m")
	})
	got, _ := client.CoreV1().ResourceQuotas("ns").Get(ctx, "q", metav1.GetOptions{})
	if h := got.Status.Hard[corev1.ResourcePods]; h.String() != "10" {
		t.Errorf("status.hard %v", got.Status.Hard)
	}

	// The admission plugin charges a pod to status.used before the pod is stored. That
	// usage-only write must not make the controller recount from its pod informer, which
	// cannot have the pod yet: the recount would take the charge back and let the next pod
	// over the limit. (The controller recounted on every update before; this failed then.)
	got.Status.Used[corev1.ResourcePods] = resource.MustParse("2")
	got.Status.Used[corev1.ResourceRequestsCPU] = resource.MustParse("1250m")
	if _, err := client.CoreV1().ResourceQuotas("ns").UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the recount, had the update triggered one, is done by now
	if u := used(); !is(u, corev1.ResourcePods, "2") || !is(u, corev1.ResourceRequestsCPU, "1250m") {
		t.Errorf("the admission's charge was taken back by a recount: used %v", u)
	}
	// A change of the limits still recounts (and so would the pod's own event).
	got, _ = client.CoreV1().ResourceQuotas("ns").Get(ctx, "q", metav1.GetOptions{})
	got.Spec.Hard[corev1.ResourcePods] = resource.MustParse("20")
	if _, err := client.CoreV1().ResourceQuotas("ns").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("after the limits changed", func(u corev1.ResourceList) bool {
		return is(u, corev1.ResourcePods, "1") && is(u, corev1.ResourceRequestsCPU, "250m")
	})
}
