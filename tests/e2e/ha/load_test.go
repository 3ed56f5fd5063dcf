package ha

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// writeLoad creates ConfigMaps one after another through a client and records every name the
// API acknowledged, so a test can check afterwards that none was lost.
type writeLoad struct {
	mu       sync.Mutex
	prefix   string
	acked    []string
	failures int
	lastAck  time.Time
	stop     context.CancelFunc
	done     chan struct{}
}

func startWriteLoad(ctx context.Context, client kubernetes.Interface, prefix string) *writeLoad {
	ctx, stop := context.WithCancel(ctx)
	l := &writeLoad{prefix: prefix, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for i := 0; ctx.Err() == nil; i++ {
			name := fmt.Sprintf("%s-%d", prefix, i)
			_, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
				Data: map[string]string{"i": strconv.Itoa(i)}}, metav1.CreateOptions{})
			l.mu.Lock()
			if err == nil || apierrors.IsAlreadyExists(err) { // AlreadyExists: a retried create that had landed
				l.acked = append(l.acked, name)
				l.lastAck = time.Now()
			} else {
				l.failures++
			}
			l.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return l
}

// Count is how many writes were acknowledged so far.
func (l *writeLoad) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// Stop ends the load and waits for its last write.
func (l *writeLoad) Stop() {
	l.stop()
	<-l.done
}

// CheckNoneLost lists the ConfigMaps through client and fails t for each acknowledged write
// that is not there.
func (l *writeLoad) CheckNoneLost(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	t.Helper()
	list, err := client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, cm := range list.Items {
		have[cm.Name] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var lost []string
	for _, name := range l.acked {
		if !have[name] {
			lost = append(lost, name)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d acknowledged writes lost: %v", len(lost), len(l.acked), lost)
	}
	t.Logf("%s: %d writes acknowledged, %d failed while failing over, none lost", l.prefix, len(l.acked), l.failures)
}
