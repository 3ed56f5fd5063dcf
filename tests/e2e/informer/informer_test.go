// Package informer checks that client-go informers work against skiff unchanged: list then
// watch, a watch that resumes across an API server restart without relisting, and a relist
// after the resource version it would resume from was compacted.
package informer

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// countingInformer is a ConfigMap informer in namespace default that counts its lists: plain
// LISTs, and the streaming lists (watches with sendInitialEvents) that client-go's reflector
// uses where the server supports them.
type countingInformer struct {
	lists    atomic.Int32
	informer cache.SharedIndexInformer
}

func startInformer(t *testing.T, client kubernetes.Interface) *countingInformer {
	t.Helper()
	c := &countingInformer{}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			c.lists.Add(1)
			return client.CoreV1().ConfigMaps("default").List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				c.lists.Add(1)
			}
			return client.CoreV1().ConfigMaps("default").Watch(ctx, o)
		},
	}
	c.informer = cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, cache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go c.informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), c.informer.HasSynced) {
		t.Fatal("informer never synced")
	}
	return c
}

func (c *countingInformer) waitFor(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if _, ok, _ := c.informer.GetStore().GetByKey("default/" + name); ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("informer never saw configmap %s", name)
}

func create(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := client.CoreV1().ConfigMaps("default").Create(context.Background(),
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("create %s: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestInformerResumesAfterRestart(t *testing.T) {
	s := framework.StartServer(t)
	client := s.Client(t)
	inf := startInformer(t, client)
	create(t, client, "before")
	inf.waitFor(t, "before")
	// Writes the informer does not watch move etcd's revision past the informer's, so after the
	// restart the fresh watch cache starts later than the informer's resume point.
	for i := 0; i < 3; i++ {
		if _, err := client.CoreV1().Secrets("default").Create(context.Background(),
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("other-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	s.Stop()
	ready := s.Start()
	t.Logf("restarted, ready after %s", ready)
	create(t, client, "after")
	inf.waitFor(t, "after")
	if n := inf.lists.Load(); n != 1 {
		t.Fatalf("informer listed %d times; after a restart its watch should resume, not relist", n)
	}
	// Objects survive the restart.
	if _, err := client.CoreV1().ConfigMaps("default").Get(context.Background(), "before", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestInformerRelistsAfterCompaction(t *testing.T) {
	dir := t.TempDir()
	framework.Certs(t, dir)
	cluster := framework.StartEtcdCluster(t, filepath.Join(dir, "pki"), 1)
	s := framework.NewServer(t, dir, "--etcd-servers", strings.Join(cluster.Endpoints(), ","))
	s.Start()
	client := s.Client(t)
	inf := startInformer(t, client)
	create(t, client, "one")
	inf.waitFor(t, "one")
	stale := inf.informer.LastSyncResourceVersion()

	// While the API server is down, move etcd on and compact away the informer's revision.
	s.Stop()
	for i := 0; i < 3; i++ {
		if _, err := cluster.Etcdctl(cluster.Endpoints(), "put", fmt.Sprintf("/skiff-e2e/bump-%d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	rev := cluster.Revision(t)
	if _, err := cluster.Etcdctl(cluster.Endpoints(), "compact", fmt.Sprint(rev)); err != nil {
		t.Fatal(err)
	}
	s.Start()

	// A raw watch from the compacted revision gets 410 Expired.
	w, err := client.CoreV1().ConfigMaps("default").Watch(context.Background(), metav1.ListOptions{ResourceVersion: stale})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		st, ok := ev.Object.(*metav1.Status)
		if ev.Type != watch.Error || !ok || st.Code != 410 {
			t.Fatalf("watch from compacted revision %s: got %s %+v, want a 410 error", stale, ev.Type, ev.Object)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no 410 for a watch from a compacted revision")
	}
	w.Stop()

	create(t, client, "two")
	inf.waitFor(t, "two")
	if n := inf.lists.Load(); n < 2 {
		t.Fatalf("informer listed %d times; a compacted resume point must lead to a relist", n)
	}
	if _, ok, _ := inf.informer.GetStore().GetByKey("default/one"); !ok {
		t.Fatal("relisted informer lost configmap one")
	}
}
