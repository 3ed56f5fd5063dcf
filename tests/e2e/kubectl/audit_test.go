package kubectl

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestAuditLog runs the server with upstream's audit flags: every request the policy
// selects is written to the log backend as an audit.k8s.io/v1 Event naming its user.
func TestAuditLog(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*"]
- level: RequestResponse
  resources: [{group: "", resources: [configmaps]}]
- level: Metadata
`), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "audit.log")
	s := framework.StartServer(t, "--audit-policy-file", policy, "--audit-log-path", logPath, "--audit-log-maxage", "1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := s.Run(ctx, framework.Kubectl(t, 33), "create", "configmap", "audited", "--from-literal=k=v"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	type event struct {
		Level, Verb, Stage string
		User               struct{ Username string }
		ObjectRef          *struct{ Resource, Name string }
		RequestObject      json.RawMessage
		ResponseStatus     struct{ Code int }
	}
	framework.Eventually(t, 30*time.Second, "the create in the audit log", func() (bool, string) {
		f, err := os.Open(logPath)
		if err != nil {
			return false, err.Error()
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		n := 0
		for sc.Scan() {
			n++
			var e event
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.ObjectRef == nil {
				continue
			}
			if e.Verb == "create" && e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Name == "audited" && e.Stage == "ResponseComplete" {
				ok := e.User.Username == "kubernetes-admin" && e.Level == "RequestResponse" && len(e.RequestObject) > 0 && e.ResponseStatus.Code == 201
				return ok, string(sc.Bytes())
			}
		}
		return false, fmt.Sprintf("%d events, none the create", n)
	})
}
