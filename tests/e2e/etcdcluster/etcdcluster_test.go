// Package etcdcluster runs skiff's API server against a real three-member cluster of Debian's
// etcd-server, kills one member while writing, then a second (quorum lost) and brings both
// back.
package etcdcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

func TestExternalEtcdSurvivesMemberLoss(t *testing.T) {
	dir := t.TempDir()
	framework.Certs(t, dir)
	cluster := framework.StartEtcdCluster(t, filepath.Join(dir, "pki"), 3)
	s := framework.NewServer(t, dir, "--etcd-servers", strings.Join(cluster.Endpoints(), ","))
	s.Start()
	client := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	create := func(i int) error {
		_, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"i": fmt.Sprint(i)}}, metav1.CreateOptions{})
		return err
	}
	for i := 0; i < 5; i++ {
		if err := create(i); err != nil {
			t.Fatal(err)
		}
	}
	// The objects are in the external cluster, under upstream's keys.
	out, err := cluster.Etcdctl(cluster.Endpoints(), "get", "/registry/configmaps/default/", "--prefix", "--keys-only")
	if err != nil || !strings.Contains(out, "/registry/configmaps/default/cm-4") {
		t.Fatalf("configmaps not in the external etcd: %v\n%s", err, out)
	}

	// Kill the member the API server most likely talks to, then keep writing.
	cluster.Kill(cluster.Members[0])
	deadline := time.Now().Add(60 * time.Second)
	for i := 5; i < 15; i++ {
		for {
			err := create(i)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("writes did not continue after losing one of three members: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	list, err := client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, cm := range list.Items {
		if strings.HasPrefix(cm.Name, "cm-") {
			n++
		}
	}
	if n != 15 {
		t.Fatalf("%d configmaps after member loss, want 15", n)
	}
	readyz := func() (string, error) {
		return s.Run(ctx, framework.Kubectl(t, 33), "get", "--raw", "/readyz?verbose")
	}
	if out, err := readyz(); err != nil || !strings.Contains(out, "[+]etcd ok") {
		t.Fatalf("readyz with two of three members: %v\n%s", err, out)
	}

	// A second member down: no quorum. The server stays up and says so — /readyz fails naming
	// etcd, a write fails with an error rather than hanging — and recovers by itself once the
	// members are back.
	cluster.Kill(cluster.Members[1])
	framework.Eventually(t, 90*time.Second, "readyz failing on etcd without quorum", func() (bool, string) {
		out, err := readyz()
		return err != nil && strings.Contains(out, "[-]etcd failed"), out
	})
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	_, err = client.CoreV1().ConfigMaps("default").Create(wctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "no-quorum"}}, metav1.CreateOptions{})
	wcancel()
	if err == nil {
		t.Fatal("a write without etcd quorum succeeded")
	}
	if !s.Running() {
		t.Fatal("the server exited when etcd lost quorum; it should wait for it")
	}
	cluster.Restart(t, cluster.Members[0])
	cluster.Restart(t, cluster.Members[1])
	framework.Eventually(t, 90*time.Second, "readyz ok with the members back", func() (bool, string) {
		out, err := readyz()
		return err == nil && strings.Contains(out, "[+]etcd ok"), out
	})
	back := time.Now()
	framework.Eventually(t, 30*time.Second, "writes again", func() (bool, string) {
		err := create(100)
		return err == nil, fmt.Sprint(err)
	})
	// The scheduler and the controllers lost their leases without quorum; they were restarted
	// and lead again (their leases renewed since), not left idle.
	for _, name := range []string{"kube-scheduler", "kube-controller-manager"} {
		framework.Eventually(t, 60*time.Second, name+" leading again", func() (bool, string) {
			l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(back), fmt.Sprint(l.Spec.RenewTime)
		})
	}
	if !s.Running() {
		t.Fatal("the server exited")
	}
}
