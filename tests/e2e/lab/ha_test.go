package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	skifflab "github.com/skiff-sh/skiff/lab"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestLabThreeServers is `skiff lab up --servers 3`: the master with --cluster-init, node1 and
// node2 running `skiff server` joined to it (each with its etcd member and its node agent),
// node3 an agent that fails over between the three. Under a write load through the host's
// kubeconfig (the master), node2's server is killed as a crashed machine: writes go on, none
// acknowledged is lost, and every other node stays Ready; node2 comes back with `skiff lab restart-agent`
// and its node is Ready again.
func TestLabThreeServers(t *testing.T) {
	const name = "e2eha"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	framework.AgentArtifacts(t)
	l := &lab{t: t, name: name, bin: framework.Binary(t), ctx: ctx}
	t.Cleanup(func() {
		if t.Failed() {
			for _, f := range []string{"master.log", "node1.log", "node2.log", "node3.log"} {
				b, _ := os.ReadFile(filepath.Join(skifflab.Root, name, f))
				if len(b) > 3000 {
					b = b[len(b)-3000:]
				}
				t.Logf("--- %s\n%s", f, b)
			}
		}
		if out, err := exec.Command(l.bin, "lab", "down", "--name", name).CombinedOutput(); err != nil {
			t.Errorf("skiff lab down: %v\n%s", err, out)
		}
	})
	out := l.skiff("up", "--servers", "3", "--nodes", "3", "--tor", "none", "--timeout", "4m")
	if strings.Count(out, "skiff server (joined to the master's)") != 2 {
		t.Errorf("lab up did not start two joining servers:\n%s", out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", skifflab.Kubeconfig(name))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 5 * time.Second
	l.client = kubernetes.NewForConfigOrDie(cfg)

	// Three voting etcd members, named after their nodes; the servers' nodes are control plane.
	members := func() string {
		pki := filepath.Join(skifflab.Root, name, "master", "pki", "etcd")
		out, err := l.in("master", "etcdctl", "--endpoints=https://127.0.0.1:2379", "--cacert="+pki+"/ca.crt",
			"--cert="+pki+"/healthcheck-client.crt", "--key="+pki+"/healthcheck-client.key", "member", "list")
		if err != nil {
			return err.Error() + out
		}
		return out
	}
	framework.Eventually(t, time.Minute, "three voting etcd members", func() (bool, string) {
		out := members()
		return strings.Count(out, ", started, ") == 3 && !strings.Contains(out, ", true") &&
			strings.Contains(out, name+"-node1") && strings.Contains(out, name+"-node2"), out
	})
	for _, node := range []string{"master", "node1", "node2"} {
		n, err := l.client.CoreV1().Nodes().Get(ctx, name+"-"+node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; !ok {
			t.Errorf("%s is not labelled control plane: %v", n.Name, n.Labels)
		}
	}

	// A write load through the master; node2's server dies.
	var mu sync.Mutex
	var acked []string
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("ha-%d", i)
			_, err := l.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if err == nil || apierrors.IsAlreadyExists(err) {
				mu.Lock()
				acked = append(acked, name)
				mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	time.Sleep(3 * time.Second)
	pid, err := skifflab.PID(name, "node2")
	if err != nil {
		t.Fatal(err)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	atKill := count()
	framework.Eventually(t, 30*time.Second, "writes acknowledged after node2's server was killed", func() (bool, string) {
		return count() > atKill+30, fmt.Sprint(count() - atKill)
	})
	close(stop)
	<-done
	t.Logf("%d writes acknowledged, %d of them after node2's server was killed", count(), count()-atKill)
	list, err := l.client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, cm := range list.Items {
		have[cm.Name] = true
	}
	for _, n := range acked {
		if !have[n] {
			t.Errorf("acknowledged write %s lost", n)
		}
	}
	// The other nodes stay Ready (node3's agent talks to whichever server answers).
	time.Sleep(5 * time.Second)
	for _, node := range []string{"master", "node1", "node3"} {
		n, err := l.client.CoreV1().Nodes().Get(ctx, name+"-"+node, metav1.GetOptions{})
		if err != nil || !nodeReady(n) {
			t.Errorf("%s not Ready with node2's server down: %v", node, err)
		}
	}
	// node2 comes back with its data and its node is Ready again.
	l.skiff("restart-agent", "node2")
	framework.Eventually(t, 2*time.Minute, "node2 Ready again", func() (bool, string) {
		n, err := l.client.CoreV1().Nodes().Get(ctx, name+"-node2", metav1.GetOptions{})
		return err == nil && nodeReady(n), fmt.Sprint(err)
	})
	framework.Eventually(t, time.Minute, "three voting etcd members again", func() (bool, string) {
		out := members()
		return strings.Count(out, ", started, ") == 3 && !strings.Contains(out, ", true"), out
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
