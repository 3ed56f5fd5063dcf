package lab

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// writeLoad creates ConfigMaps <prefix>-0, -1, … in default, one every interval, until
// stopped, and keeps the names the API server acknowledged: what a test that kills or
// upgrades servers under load checks for loss.
type writeLoad struct {
	mu    sync.Mutex
	acked []string
	stop  chan struct{}
	done  chan struct{}
}

func startWriteLoad(ctx context.Context, client kubernetes.Interface, prefix string, interval time.Duration) *writeLoad {
	w := &writeLoad{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			name := fmt.Sprintf("%s-%d", prefix, i)
			_, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if err == nil || apierrors.IsAlreadyExists(err) {
				w.mu.Lock()
				w.acked = append(w.acked, name)
				w.mu.Unlock()
			}
			time.Sleep(interval)
		}
	}()
	return w
}

// acknowledged is how many writes were acknowledged so far.
func (w *writeLoad) acknowledged() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// finish stops the load and returns the acknowledged writes that the API no longer holds
// (there must be none) and the ConfigMaps it holds.
func (w *writeLoad) finish(ctx context.Context, client kubernetes.Interface) (lost []string, have map[string]bool, err error) {
	close(w.stop)
	<-w.done
	list, err := client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	have = map[string]bool{}
	for _, cm := range list.Items {
		have[cm.Name] = true
	}
	for _, n := range w.acked {
		if !have[n] {
			lost = append(lost, n)
		}
	}
	return lost, have, nil
}
