package agent

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// testNode is a server with its agent in a network namespace of the test's: the setup most
// tests here share.
type testNode struct {
	t    *testing.T
	ctx  context.Context
	dir  string
	s    *framework.Server
	c    kubernetes.Interface
	name string // the Node's
}

// newTestNode starts the server (its agent's data under dir, extra flags appended) and waits
// until the node is Ready and the default namespace's service account exists; the test's
// context ends after 4 minutes.
func newTestNode(t *testing.T, dir, nsPath string, extra ...string) *testNode {
	t.Helper()
	s := framework.NewServerWithAgent(t, dir, nsPath, extra...)
	s.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	n := &testNode{t: t, ctx: ctx, dir: dir, s: s, c: s.Client(t)}
	eventually(t, 90*time.Second, "the agent's node Ready and the default service account", func() (bool, string) {
		list, err := n.c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			return false, fmt.Sprint(err)
		}
		if _, err := n.c.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		n.name = list.Items[0].Name
		return condition(&list.Items[0], corev1.NodeReady) == corev1.ConditionTrue, fmt.Sprint(list.Items[0].Status.Conditions)
	})
	return n
}

// untaint lets every pod onto the server's own node.
func (n *testNode) untaint() {
	n.t.Helper()
	n.kubectl("", "taint", "nodes", n.name, "node-role.kubernetes.io/control-plane-")
}

// kubectl runs the real kubectl 1.33 against the server with stdin, failing the test on error.
func (n *testNode) kubectl(stdin string, args ...string) string {
	n.t.Helper()
	cmd := exec.CommandContext(n.ctx, framework.Kubectl(n.t, 33), append([]string{"--kubeconfig", n.s.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		n.t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// waitPhase waits for the default namespace's pod to reach the phase.
func (n *testNode) waitPhase(name string, phase corev1.PodPhase) {
	n.t.Helper()
	eventually(n.t, 60*time.Second, name+" "+string(phase), func() (bool, string) {
		p, err := n.c.CoreV1().Pods("default").Get(n.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == phase, string(p.Status.Phase)
	})
}

func condition(n *corev1.Node, t corev1.NodeConditionType) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// registryNode is a test node with an empty registry on loopback in its namespace, which the
// agent's containerd is pointed at (certs.d): the setup of the tests that pull.
type registryNode struct {
	*testNode
	reg *framework.Registry
}

// newRegistryNode starts the node and the registry.
func newRegistryNode(t *testing.T) *registryNode {
	t.Helper()
	_, nsPath := framework.Netns(t)
	dir := t.TempDir()
	n := &registryNode{testNode: newTestNode(t, dir, nsPath)}
	n.reg = framework.StartRegistry(t, nsPath)
	n.reg.WriteHostsTOML(t, filepath.Join(dir, "agent", "containerd", "certs.d"))
	return n
}
