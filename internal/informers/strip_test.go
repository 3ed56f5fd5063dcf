package informers

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// TestNewFactoryStripsManagedFields: what the factory's informers cache has no managed
// fields (as upstream's controller manager and scheduler cache none), and everything else of
// the object is kept.
func TestNewFactoryStripsManagedFields(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "a", Labels: map[string]string{"app": "x"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}},
		Spec: corev1.PodSpec{NodeName: "n1"}}
	c := fake.NewClientset(pod)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f := NewFactory(c)
	inf := f.Core().V1().Pods().Informer()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("no sync")
	}
	got, err := f.Core().V1().Pods().Lister().Pods("a").Get("p")
	if err != nil {
		t.Fatal(err)
	}
	if got.ManagedFields != nil || got.Labels["app"] != "x" || got.Spec.NodeName != "n1" {
		t.Fatalf("cached pod %+v", got.ObjectMeta)
	}
	cancel()
	f.Shutdown()
}
