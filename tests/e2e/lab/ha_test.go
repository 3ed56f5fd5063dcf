package lab

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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
	downAtCleanup(t, name, l.bin, "master", "node1", "node2", "node3")
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
	load := startWriteLoad(ctx, l.client, "ha", 20*time.Millisecond)
	time.Sleep(3 * time.Second)
	pid, err := skifflab.PID(name, "node2")
	if err != nil {
		t.Fatal(err)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	atKill := load.acknowledged()
	framework.Eventually(t, 30*time.Second, "writes acknowledged after node2's server was killed", func() (bool, string) {
		return load.acknowledged() > atKill+30, fmt.Sprint(load.acknowledged() - atKill)
	})
	lost, _, err := load.finish(ctx, l.client)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d writes acknowledged, %d of them after node2's server was killed", load.acknowledged(), load.acknowledged()-atKill)
	for _, n := range lost {
		t.Errorf("acknowledged write %s lost", n)
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
