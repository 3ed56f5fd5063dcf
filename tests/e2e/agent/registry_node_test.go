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

// registryNode is a server with its agent in a network namespace of the test's and an empty
// registry on loopback there, which the agent's containerd is pointed at (certs.d): the setup of
// the tests that pull.
type registryNode struct {
	t   *testing.T
	ctx context.Context
	dir string
	s   *framework.Server
	c   kubernetes.Interface
	reg *framework.Registry
}

// newRegistryNode starts the server and the registry and waits until the node is Ready and the
// default namespace's service account exists; the test's context ends after 4 minutes.
func newRegistryNode(t *testing.T) *registryNode {
	t.Helper()
	_, nsPath := framework.Netns(t)
	dir := t.TempDir()
	s := framework.NewServerWithAgent(t, dir, nsPath)
	s.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	n := &registryNode{t: t, ctx: ctx, dir: dir, s: s, c: s.Client(t), reg: framework.StartRegistry(t, nsPath)}
	n.reg.WriteHostsTOML(t, filepath.Join(dir, "agent", "containerd", "certs.d"))
	eventually(t, 90*time.Second, "the agent's node Ready and the default service account", func() (bool, string) {
		list, err := n.c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			return false, fmt.Sprint(err)
		}
		if _, err := n.c.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		for _, cond := range list.Items[0].Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, "not ready"
	})
	return n
}

// kubectl runs the real kubectl 1.33 against the server with stdin, failing the test on error.
func (n *registryNode) kubectl(stdin string, args ...string) string {
	n.t.Helper()
	cmd := exec.CommandContext(n.ctx, framework.Kubectl(n.t, 33), append([]string{"--kubeconfig", n.s.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		n.t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}
