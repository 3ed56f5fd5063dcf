package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/controlplane/serverjoin"
	"github.com/skiff-sh/skiff/internal/bootstraptoken"
	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestAgentToken runs a server with an agent-only token (--agent-token, as k3s's): an agent
// joins with it and becomes Ready, and the server-join endpoint, which hands a new server the
// CAs' keys, refuses it.
func TestAgentToken(t *testing.T) {
	s := framework.StartServer(t, "--agent-token", "agentx.0123456789abcdef")
	b, err := os.ReadFile(filepath.Join(s.Dir, "agent-token"))
	if err != nil {
		t.Fatal(err)
	}
	agentToken, err := bootstraptoken.ParseJoin(string(b))
	if err != nil || agentToken.Token.ID != "agentx" || agentToken.CAHash == "" {
		t.Fatalf("<data-dir>/agent-token: %q %v, want the given token with the CA pin", b, err)
	}
	serverToken, _ := os.ReadFile(filepath.Join(s.Dir, "token"))
	if strings.Contains(string(serverToken), "agentx.") {
		t.Fatal("the server token is the agent token")
	}

	startAgentWithToken(t, s, framework.Binary(t), "tokened", t.TempDir(), string(b))
	waitNodeReady(t, s, "tokened")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	caPEM, err := os.ReadFile(filepath.Join(s.Dir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = serverjoin.Join(ctx, fmt.Sprintf("https://127.0.0.1:%d", s.Port), caPEM, agentToken.Token, serverjoin.Request{Name: "intruder"})
	var refused *serverjoin.RefusedError
	if !errors.As(err, &refused) || !refused.Final() {
		t.Errorf("a server joining with the agent token: %v, want a final refusal", err)
	}
}

// waitNodeReady waits until the node registered and is Ready, and returns it.
func waitNodeReady(t *testing.T, s *framework.Server, name string) *corev1.Node {
	t.Helper()
	var node *corev1.Node
	eventually(t, 90*time.Second, "node "+name+" registered and Ready", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n, err := s.Client(t).CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		node = n
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, string(c.Status)
			}
		}
		return false, "no Ready condition"
	})
	return node
}
