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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	eventually(t, 90*time.Second, "the agent joined with the agent token Ready", func() (bool, string) {
		n, err := s.Client(t).CoreV1().Nodes().Get(ctx, "tokened", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range n.Status.Conditions {
			if c.Type == "Ready" {
				return c.Status == "True", string(c.Status)
			}
		}
		return false, "no Ready condition"
	})

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
