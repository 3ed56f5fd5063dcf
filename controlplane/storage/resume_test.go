package storage

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
)

func expired() watch.Event {
	return watch.Event{Type: watch.Error, Object: &apierrors.NewResourceExpired("too old resource version: 5 (9)").ErrStatus}
}

func recv(t *testing.T, w watch.Interface) (watch.Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		return ev, ok
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return watch.Event{}, false
}

func TestFallbackOnFirstExpired(t *testing.T) {
	cached := watch.NewFake()
	etcd := watch.NewFake()
	w := newFallbackWatcher(cached, func() (watch.Interface, error) { return etcd, nil })
	defer w.Stop()
	go cached.Action(watch.Error, expired().Object)
	go etcd.Add(&corev1.ConfigMap{})
	ev, ok := recv(t, w)
	if !ok || ev.Type != watch.Added {
		t.Fatalf("got %v %v, want the etcd watch's ADDED event", ev.Type, ok)
	}
	if !cached.IsStopped() {
		t.Error("the cache's watch was not stopped after falling back")
	}
}

func TestNoFallbackAfterFirstEvent(t *testing.T) {
	cached := watch.NewFake()
	called := false
	w := newFallbackWatcher(cached, func() (watch.Interface, error) { called = true; return watch.NewFake(), nil })
	defer w.Stop()
	go func() {
		cached.Add(&corev1.ConfigMap{})
		cached.Action(watch.Error, expired().Object)
	}()
	if ev, _ := recv(t, w); ev.Type != watch.Added {
		t.Fatalf("first event %v", ev.Type)
	}
	if ev, _ := recv(t, w); !IsExpired(ev) {
		t.Fatalf("a later 410 must reach the client, got %v", ev.Type)
	}
	if called {
		t.Error("fell back after the first event")
	}
}

func TestFallbackFailurePassesErrorOn(t *testing.T) {
	cached := watch.NewFake()
	w := newFallbackWatcher(cached, func() (watch.Interface, error) { return nil, errors.New("etcd down") })
	defer w.Stop()
	go cached.Action(watch.Error, expired().Object)
	if ev, _ := recv(t, w); !IsExpired(ev) {
		t.Fatalf("want the 410 passed on, got %v", ev.Type)
	}
}

func TestStopClosesResult(t *testing.T) {
	cached := watch.NewFake()
	w := newFallbackWatcher(cached, func() (watch.Interface, error) { return watch.NewFake(), nil })
	w.Stop()
	if _, ok := recv(t, w); ok {
		t.Fatal("result channel still open after Stop")
	}
}
