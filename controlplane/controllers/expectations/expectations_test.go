package expectations

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestExpectations(t *testing.T) {
	e := New()
	now := time.Unix(1000, 0)
	e.SetClock(func() time.Time { return now })
	if !e.Satisfied("a") {
		t.Fatal("nothing expected, not satisfied")
	}
	e.Expect("a", 2, []types.UID{"x", "y"})
	e.Created("a", 2)
	e.Deleted("a", "x")
	e.Deleted("a", "x") // seen twice: still one
	e.Deleted("a", "z") // not asked for: changes nothing
	if e.Satisfied("a") {
		t.Fatal("satisfied with y's deletion unseen")
	}
	e.Deleted("a", "y")
	if !e.Satisfied("a") || e.Pending("a") {
		t.Fatal("all seen, still pending")
	}
	e.Expect("b", 1, nil)
	now = now.Add(5*time.Minute + time.Second)
	if !e.Satisfied("b") {
		t.Error("an expired expectation still blocks")
	}
	e.Expect("c", 1, nil)
	e.Forget("c")
	if e.Pending("c") {
		t.Error("Forget kept the expectation")
	}
}
