package informers

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// Two runs over one shared factory share its informer (one cache); the handlers of a run
// that ended are gone, the other run's still fire, and a new run finds the cache synced.
func TestScopedRunsShareInformersAndReleaseHandlers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(svc("before"))
	shared := Own(ctx, NewFactory(client))

	a, b := shared.Scope(), shared.Scope()
	kickA, kickB := make(chan struct{}, 1), make(chan struct{}, 1)
	infA := a.Core().V1().Services().Informer()
	infB := b.Core().V1().Services().Informer()
	if infA.GetStore() != infB.GetStore() {
		t.Fatal("the two runs got informers of their own: the objects would be held twice")
	}
	if _, err := infA.AddEventHandler(Trigger(kickA)); err != nil {
		t.Fatal(err)
	}
	// Through ForResource as well (the garbage collector's and quota's way in).
	gen, err := a.ForResource(corev1.SchemeGroupVersion.WithResource("services"))
	if err != nil {
		t.Fatal(err)
	}
	kickGen := make(chan struct{}, 1)
	if _, err := gen.Informer().AddEventHandler(Trigger(kickGen)); err != nil {
		t.Fatal(err)
	}
	if _, err := infB.AddEventHandler(Trigger(kickB)); err != nil {
		t.Fatal(err)
	}
	a.Start(nil)
	b.Start(nil)
	a.WaitForCacheSync(ctx.Done())
	waitKick(t, kickA, true)
	waitKick(t, kickB, true)
	waitKick(t, kickGen, true)

	a.Release()
	if _, err := client.CoreV1().Services("default").Create(ctx, svc("after"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitKick(t, kickB, true)
	waitKick(t, kickA, false)
	waitKick(t, kickGen, false)

	// A new run (the part restarted) sees what the cache holds at once.
	c := shared.Scope()
	defer c.Release()
	if n := len(c.Core().V1().Services().Informer().GetStore().List()); n != 2 {
		t.Fatalf("the new run's informer holds %d Services, want 2", n)
	}
}
