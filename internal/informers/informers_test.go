package informers

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func svc(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
}

func waitKick(t *testing.T, kick chan struct{}, want bool) {
	t.Helper()
	select {
	case <-kick:
		if !want {
			t.Fatal("a handler whose part ended still fired")
		}
	case <-time.After(300 * time.Millisecond):
		if want {
			t.Fatal("no event reached the handler")
		}
	}
}

// A part that restarts takes its handler with it; the shared watch and the other part's
// handler go on.
func TestSharedSurvivesAPartsRestart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(svc("before"))
	shared := NewShared(ctx, client)

	partA, endA := context.WithCancel(ctx)
	kickA := make(chan struct{}, 1)
	infA := shared.Core().V1().Services().Informer()
	shared.Start()
	releaseA, err := Watch(partA, Trigger(kickA), infA)
	if err != nil {
		t.Fatal(err)
	}
	waitKick(t, kickA, true) // the initial list

	partB, endB := context.WithCancel(ctx)
	defer endB()
	kickB := make(chan struct{}, 1)
	infB := shared.Core().V1().Services().Informer()
	if infA.GetStore() != infB.GetStore() { // each call wraps the one shared informer anew
		t.Fatalf("two parts got two Service informers from one shared factory: %p %p", infA, infB)
	}
	shared.Start()
	releaseB, err := Watch(partB, Trigger(kickB), infB)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseB()
	waitKick(t, kickB, true)

	releaseA() // part A returned, as before a restart
	endA()
	if _, err := client.CoreV1().Services("default").Create(ctx, svc("after"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitKick(t, kickB, true)
	waitKick(t, kickA, false)
	if infB.IsStopped() {
		t.Fatal("the shared informer stopped with the part that asked for it first")
	}
	if n := len(shared.Core().V1().Services().Informer().GetStore().List()); n != 2 {
		t.Fatalf("shared store holds %d services, want 2", n)
	}
}

// A shared factory's informers end with the context it was made with (the agent's).
func TestSharedEndsWithItsOwner(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(svc("a"))
	shared := NewShared(ctx, client)
	inf := shared.Core().V1().Services().Informer()
	shared.Start()
	kick := make(chan struct{}, 1)
	release, err := Watch(ctx, Trigger(kick), inf)
	if err != nil {
		t.Fatal(err)
	}
	release()
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for !inf.IsStopped() {
		if time.Now().After(deadline) {
			t.Fatal("the part's own informer did not stop with it")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Watch returns the context's error when the part ends before the caches sync.
func TestWatchEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset()
	shared := NewShared(context.Background(), client)
	inf := shared.Core().V1().Services().Informer() // never started: never syncs
	cancel()
	if _, err := Watch(ctx, Trigger(make(chan struct{}, 1)), inf); err == nil {
		t.Fatal("Watch on an ended context returned nil")
	}
}
