package loop

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestResync(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	Resync(ctx, 5*time.Millisecond, func() { n.Add(1) })
	deadline := time.Now().Add(2 * time.Second)
	for n.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("enqueue ran %d times", n.Load())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	time.Sleep(20 * time.Millisecond)
	stopped := n.Load()
	time.Sleep(30 * time.Millisecond)
	if n.Load() != stopped {
		t.Errorf("enqueue ran after the context ended")
	}
}
