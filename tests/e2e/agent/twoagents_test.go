package agent

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestTwoAgents runs two `skiff agent`s, each with its own containerd in its own network
// namespace, against one control plane: both nodes become Ready with their own pod CIDRs, and
// a pod on each gets an address from its node's block.
func TestTwoAgents(t *testing.T) {
	s := framework.StartServer(t)
	c := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cni, images := framework.AgentArtifacts(t)
	for _, node := range []string{"agent-a", "agent-b"} {
		_, nsPath := framework.Netns(t)
		dir := t.TempDir()
		t.Cleanup(func() { framework.KillUnder(dir) })
		kubeconfig := filepath.Join(dir, "node.kubeconfig")
		if out, err := exec.Command(framework.Binary(t), "kubeconfig", "--data-dir", s.Dir, "--user", "system:node:"+node,
			"--group", "system:nodes", "--server", fmt.Sprintf("https://127.0.0.1:%d", s.Port), "--out", kubeconfig).CombinedOutput(); err != nil {
			t.Fatalf("skiff kubeconfig: %v %s", err, out)
		}
		agent := exec.Command(framework.Binary(t), "agent", "--kubeconfig", kubeconfig, "--data-dir", dir, "--netns", nsPath,
			"--node-name", node, "--node-ip", "127.0.0.1", "--port", strconv.Itoa(framework.FreePort(t)),
			"--healthz-address", "127.0.0.1:"+strconv.Itoa(framework.FreePort(t)),
			"--cni-plugin", cni, "--images-dir", images, "--pod-log-dir", filepath.Join(dir, "logs"))
		agent.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := agent.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = agent.Process.Signal(syscall.SIGTERM); _ = agent.Wait() })
	}
	cidrs := map[string]netip.Prefix{}
	eventually(t, 90*time.Second, "both agents' nodes Ready", func() (bool, string) {
		for _, node := range []string{"agent-a", "agent-b"} {
			n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil || n.Spec.PodCIDR == "" {
				return false, fmt.Sprint(node, err)
			}
			readyNow := false
			for _, cond := range n.Status.Conditions {
				readyNow = readyNow || (cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue)
			}
			if !readyNow {
				return false, node + " not ready"
			}
			cidrs[node] = netip.MustParsePrefix(n.Spec.PodCIDR)
		}
		return cidrs["agent-a"] != cidrs["agent-b"], fmt.Sprint(cidrs)
	})
	for _, node := range []string{"agent-a", "agent-b"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "on-" + node}, Spec: corev1.PodSpec{NodeName: node,
			Containers: []corev1.Container{{Name: "c", Image: "localhost/skiff/netutil:1", ImagePullPolicy: corev1.PullIfNotPresent}}}}
		if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, node := range []string{"agent-a", "agent-b"} {
		eventually(t, 60*time.Second, "pod on "+node+" Running in its node's block", func() (bool, string) {
			p, err := c.CoreV1().Pods("default").Get(ctx, "on-"+node, metav1.GetOptions{})
			if err != nil || p.Status.Phase != corev1.PodRunning {
				return false, fmt.Sprint(err)
			}
			ip, err := netip.ParseAddr(p.Status.PodIP)
			return err == nil && cidrs[node].Contains(ip), p.Status.PodIP
		})
	}
	for _, node := range []string{"agent-a", "agent-b"} {
		_ = c.CoreV1().Pods("default").Delete(ctx, "on-"+node, metav1.DeleteOptions{})
	}
	eventually(t, 60*time.Second, "pods removed by their agents", func() (bool, string) {
		l, _ := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		return len(l.Items) == 0, fmt.Sprint(len(l.Items))
	})
}
