package controlplane

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestLeaderElection runs two `skiff server`s against one etcd: exactly one scheduler and one
// controller manager act, and when the leader's server dies the other takes over within the
// lease duration.
func TestLeaderElection(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	framework.Certs(t, dirA)
	if out, err := exec.Command("cp", "-a", filepath.Join(dirA, "pki"), dirB).CombinedOutput(); err != nil {
		t.Fatalf("copy PKI: %v %s", err, out)
	}
	cluster := framework.StartEtcdCluster(t, filepath.Join(dirA, "pki"), 1)
	etcd := "--etcd-servers=" + strings.Join(cluster.Endpoints(), ",")
	a := framework.NewServer(t, dirA, etcd)
	a.Start()
	b := framework.NewServer(t, dirB, etcd)
	b.Start()
	c := a.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	holder := func(lease string) string {
		l, err := c.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	// owner says which server's log announced leadership under identity id.
	owner := func(id string) *framework.Server {
		for _, s := range []*framework.Server{a, b} {
			if id != "" && strings.Contains(s.Log(), "became leader") && strings.Contains(s.Log(), "identity="+id) {
				return s
			}
		}
		return nil
	}
	leaders := map[string]*framework.Server{}
	for _, lease := range []string{"kube-scheduler", "kube-controller-manager"} {
		eventually(t, 60*time.Second, "leader of "+lease, func() (bool, string) {
			id := holder(lease)
			leaders[lease] = owner(id)
			return leaders[lease] != nil, id
		})
		// Exactly one process announced leadership of this lease.
		n := strings.Count(a.Log(), "lease=kube-system/"+lease+" identity=") + strings.Count(b.Log(), "lease=kube-system/"+lease+" identity=")
		became := 0
		for _, s := range []*framework.Server{a, b} {
			for _, line := range strings.Split(s.Log(), "\n") {
				if strings.Contains(line, "became leader") && strings.Contains(line, "lease=kube-system/"+lease+" ") {
					became++
				}
			}
		}
		if became != 1 {
			t.Fatalf("%d processes became leader of %s (%d log lines)", became, lease, n)
		}
	}

	// The acting controller manager creates exactly the replicas asked for, once.
	if _, err := c.AppsV1().Deployments("default").Create(ctx, deployment("ha", 3, 300), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "3 pods for ha", func() (bool, string) {
		_, live, _ := placement(ctx, c, "default", "ha")
		return live == 3, fmt.Sprint(live)
	})
	time.Sleep(2 * time.Second)
	if _, live, _ := placement(ctx, c, "default", "ha"); live != 3 {
		t.Fatalf("%d pods for a Deployment of 3: more than one controller manager acted", live)
	}

	// Kill the controller manager's leader (SIGKILL: no graceful release of the Lease); the
	// other server's takes over once the 15 s lease runs out.
	dead := leaders["kube-controller-manager"]
	survivor := a
	if dead == a {
		survivor = b
		c = b.Client(t)
	}
	old := holder("kube-controller-manager")
	killedAt := time.Now()
	dead.Kill()
	for _, lease := range []string{"kube-controller-manager", "kube-scheduler"} {
		eventually(t, 45*time.Second, "takeover of "+lease, func() (bool, string) {
			id := holder(lease)
			return owner(id) == survivor, id
		})
	}
	took := time.Since(killedAt)
	t.Logf("controller manager leadership moved from %s to %s in %s", old, holder("kube-controller-manager"), took.Round(time.Millisecond))
	if _, err := c.AppsV1().Deployments("default").Create(ctx, deployment("after", 2, 300), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the new leader acts", func() (bool, string) {
		_, live, _ := placement(ctx, c, "default", "after")
		return live == 2, fmt.Sprint(live)
	})
}
