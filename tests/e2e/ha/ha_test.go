// Package ha runs a highly available control plane: three `skiff server`s on one external
// three-member cluster of Debian's etcd-server, as a site that outgrew one server runs it.
// Under a steady write load it kills the server whose controller manager leads, then an etcd
// member, and checks that no acknowledged write is lost, that the kubernetes Service lists
// exactly the live servers, that leadership moves, and that a client using the agents'
// failover (agent/apiservers) keeps renewing its node Lease. embedded_test.go runs HA the way
// k3s's users mostly do: three servers whose embedded etcd members join each other.
package ha

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/agent/apiservers"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

func sliceAddresses(ctx context.Context, c kubernetes.Interface) ([]string, error) {
	s, err := c.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range s.Endpoints {
		out = append(out, e.Addresses...)
	}
	return out, nil
}

// leaderOf says which server's controller manager holds the lease: the one whose log says
// it became leader with the lease's holder identity.
func leaderOf(t *testing.T, servers []*framework.Server, holder string) int {
	for i, s := range servers {
		sc := bufio.NewScanner(strings.NewReader(s.Log()))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if l := sc.Text(); strings.Contains(l, "became leader") && strings.Contains(l, holder) {
				return i
			}
		}
	}
	t.Fatalf("no server logged becoming leader as %s", holder)
	return -1
}

func TestHighlyAvailableControlPlane(t *testing.T) {
	first := t.TempDir()
	framework.Certs(t, first)
	cluster := framework.StartEtcdCluster(t, filepath.Join(first, "pki"), 3)
	port := strconv.Itoa(framework.FreePort(t))
	const token = "hasrvr.0123456789abcdef"
	var servers []*framework.Server
	var urls []string
	for i := 0; i < 3; i++ {
		dir := first
		args := []string{"--token", token}
		if i > 0 {
			// The others join the first: they receive its CAs and keys (no etcd place: the
			// cluster's etcd is external), checked against the CA its token pins.
			dir = t.TempDir()
			joinToken, err := os.ReadFile(filepath.Join(first, "token"))
			if err != nil {
				t.Fatal(err)
			}
			args = []string{"--server", urls[0], "--token", strings.TrimSpace(string(joinToken))}
		}
		ip := fmt.Sprintf("127.0.0.%d", i+1)
		s := framework.NewServer(t, dir, append([]string{"--etcd-servers", strings.Join(cluster.Endpoints(), ","),
			"--bind-address", ip, "--advertise-address", ip, "--secure-port", port}, args...)...)
		s.Start()
		servers = append(servers, s)
		urls = append(urls, "https://"+ip+":"+port)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// One client as an agent would have it: the first server's kubeconfig, failing over to
	// the others (admin credentials: every server trusts the same CA).
	cfg, err := clientcmd.BuildConfigFromFlags("", servers[0].Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Timeout = 5 * time.Second
	cfg, dialer, err := apiservers.Config(cfg, urls, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)

	all := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	framework.Eventually(t, 45*time.Second, "the kubernetes Service lists the three servers", func() (bool, string) {
		got, err := sliceAddresses(ctx, client)
		return err == nil && slices.Equal(got, all), fmt.Sprint(got, err)
	})
	var holder string
	framework.Eventually(t, 45*time.Second, "one controller manager and one scheduler lead", func() (bool, string) {
		cm, err1 := client.CoordinationV1().Leases("kube-system").Get(ctx, "kube-controller-manager", metav1.GetOptions{})
		sch, err2 := client.CoordinationV1().Leases("kube-system").Get(ctx, "kube-scheduler", metav1.GetOptions{})
		if err1 != nil || err2 != nil {
			return false, fmt.Sprint(err1, err2)
		}
		holder = ptr.Deref(cm.Spec.HolderIdentity, "")
		return holder != "" && ptr.Deref(sch.Spec.HolderIdentity, "") != "", holder
	})
	leader := leaderOf(t, servers, holder)

	// The load: ConfigMaps written one after another; each acknowledged name is recorded.
	load := startWriteLoad(ctx, client, "load")
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wg.Add(1)
	// The agent's part: its node Lease, renewed every second through the failover client.
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "ha-node", Namespace: "kube-node-lease"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("ha-node"), LeaseDurationSeconds: ptr.To[int32](40)}}
	if _, err := client.CoordinationV1().Leases("kube-node-lease").Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var lastRenew time.Time
	go func() {
		defer wg.Done()
		for loadCtx.Err() == nil {
			l, err := client.CoordinationV1().Leases("kube-node-lease").Get(loadCtx, "ha-node", metav1.GetOptions{})
			if err == nil {
				l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
				if _, err = client.CoordinationV1().Leases("kube-node-lease").Update(loadCtx, l, metav1.UpdateOptions{}); err == nil {
					mu.Lock()
					lastRenew = time.Now()
					mu.Unlock()
				}
			}
			time.Sleep(time.Second)
		}
	}()
	count := load.Count
	framework.Eventually(t, 20*time.Second, "writes flowing", func() (bool, string) { return count() > 20, strconv.Itoa(count()) })

	// Kill the leading controller manager's server, as a crashed machine.
	killedIP := all[leader]
	servers[leader].Kill()
	t.Logf("killed server %d (%s), whose controller manager led", leader+1, killedIP)
	before := count()
	framework.Eventually(t, 45*time.Second, "another controller manager leads", func() (bool, string) {
		cm, err := client.CoordinationV1().Leases("kube-system").Get(ctx, "kube-controller-manager", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		h := ptr.Deref(cm.Spec.HolderIdentity, "")
		return h != "" && h != holder, h
	})
	framework.Eventually(t, 45*time.Second, "the kubernetes Service drops the killed server", func() (bool, string) {
		got, err := sliceAddresses(ctx, client)
		return err == nil && len(got) == 2 && !slices.Contains(got, killedIP), fmt.Sprint(got, err)
	})
	if got := dialer.Current(); strings.HasPrefix(got, killedIP+":") {
		t.Errorf("the failover client still dials the killed server %s", got)
	}
	// The new leader's controllers act: a Deployment gets its ReplicaSet.
	if _, err := client.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "after-failover"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/netutil:1"}}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the Deployment's ReplicaSet made by the new leader", func() (bool, string) {
		rs, err := client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=x"})
		return err == nil && len(rs.Items) == 1, fmt.Sprint(err)
	})

	// Now an etcd member goes too; two of three keep quorum.
	cluster.Kill(cluster.Members[0])
	mid := count()
	framework.Eventually(t, 30*time.Second, "writes continue after an etcd member is killed", func() (bool, string) {
		return count() > mid+20, strconv.Itoa(count() - mid)
	})
	mu.Lock()
	renewed := lastRenew
	mu.Unlock()
	if time.Since(renewed) > 10*time.Second {
		t.Errorf("the node Lease was last renewed %v ago: the failover client did not keep it", time.Since(renewed))
	}
	stopLoad()
	wg.Wait()
	load.Stop()
	if count() <= before {
		t.Errorf("no write was acknowledged after the server was killed (%d before, %d after)", before, count())
	}

	// Every acknowledged write is there, read through a server that stayed up.
	load.CheckNoneLost(ctx, t, servers[(leader+1)%3].Client(t))
}
