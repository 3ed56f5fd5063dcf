package pods

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestBackoffs(t *testing.T) {
	b := newBackoffs()
	t0 := time.Unix(1_000_000, 0)
	// Failures double from 10 s to 5 min.
	now := t0
	for i, want := range []time.Duration{10, 20, 40, 80, 160, 300, 300} {
		b.failed("u1_img", now, imagePullBackoffInitial, imagePullBackoffMax)
		if got := b.delay["u1_img"]; got != want*time.Second {
			t.Fatalf("failure %d: delay %s, want %ds", i, got, want)
		}
		if !b.blocked("u1_img", now.Add(want*time.Second-time.Millisecond)) || b.blocked("u1_img", now.Add(want*time.Second)) {
			t.Fatalf("failure %d: blocked until the wrong time", i)
		}
		now = now.Add(want * time.Second)
	}
	// A failure long after the previous one starts again at 10 s.
	b.failed("u1_img", now.Add(11*time.Minute), imagePullBackoffInitial, imagePullBackoffMax)
	if b.delay["u1_img"] != 10*time.Second {
		t.Errorf("after a long quiet: %s", b.delay["u1_img"])
	}

	// A crash loop: the first restart at once, the next after 10 s, then 20 s; a long run resets.
	if !b.crashed("u1/c", t0, false) || b.crashed("u1/c", t0.Add(5*time.Second), false) {
		t.Fatal("crash backoff: the first restart is at once, the next waits 10 s")
	}
	if !b.crashed("u1/c", t0.Add(10*time.Second), false) || b.delay["u1/c"] != 20*time.Second {
		t.Fatalf("second restart: delay %s", b.delay["u1/c"])
	}
	if !b.crashed("u1/c", t0.Add(30*time.Second), true) || b.delay["u1/c"] != 10*time.Second {
		t.Fatalf("after a long run: delay %s", b.delay["u1/c"])
	}

	// A failed start is reported again while it backs off, and forgotten when one succeeds.
	werr := &waitingError{Reason: "CreateContainerConfigError", Message: "no key"}
	b.startFailed("u1/start/c", t0, werr)
	if b.lastStartErr("u1/start/c") != werr || !b.blocked("u1/start/c", t0) {
		t.Fatal("start failure not kept")
	}
	b.succeeded("u1/start/c")
	if b.lastStartErr("u1/start/c") != nil || b.blocked("u1/start/c", t0) {
		t.Fatal("a success left the failure")
	}

	// A pod that goes takes all of its keys, and no other pod's.
	b.failed("u2/sandbox", t0, startBackoffInitial, startBackoffMax)
	b.startFailed("u1/start/d", t0, werr)
	b.forgetPod(types.UID("u1"))
	for _, k := range []string{"u1_img", "u1/c", "u1/start/d"} {
		if _, ok := b.until[k]; ok || b.lastStartErr(k) != nil {
			t.Errorf("%s kept after its pod went", k)
		}
	}
	if !b.blocked("u2/sandbox", t0) {
		t.Error("another pod's backoff went too")
	}
}

func TestStaticPodsReplace(t *testing.T) {
	pod := func(name, uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, UID: types.UID(uid)}}
	}
	s := &staticPods{byKey: map[string]*corev1.Pod{}}
	if got := s.replace([]*corev1.Pod{pod("a", "1"), pod("b", "1")}); !sameKeys(got, "kube-system/a", "kube-system/b") {
		t.Errorf("added: %v", got)
	}
	// b edited (new UID), a unchanged, c new; then a removed.
	if got := s.replace([]*corev1.Pod{pod("a", "1"), pod("b", "2"), pod("c", "1")}); !sameKeys(got, "kube-system/b", "kube-system/c") {
		t.Errorf("edited and added: %v", got)
	}
	if got := s.replace([]*corev1.Pod{pod("b", "2"), pod("c", "1")}); !sameKeys(got, "kube-system/a") {
		t.Errorf("removed: %v", got)
	}
	if s.get("kube-system/a") != nil || s.get("kube-system/b").UID != "2" || len(s.all()) != 2 {
		t.Errorf("set after the changes: %v", s.all())
	}
}

func sameKeys(got []string, want ...string) bool {
	slices.Sort(got)
	return slices.Equal(got, want)
}
