package apiserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/skiff-sh/skiff/controlplane/bootstraptoken"
)

func TestAuthorize(t *testing.T) {
	admin := &user.DefaultInfo{Name: "kubernetes-admin", Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}}
	node := &user.DefaultInfo{Name: "system:node:n1", Groups: []string{"system:nodes", user.AllAuthenticated}}
	boot := &user.DefaultInfo{Name: "system:bootstrap:abcdef", Groups: []string{bootstraptoken.Group, bootstraptoken.NodeGroup, user.AllAuthenticated}}
	csr := func(u user.Info, verb, sub string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: "certificates.k8s.io", APIVersion: "v1",
			Resource: "certificatesigningrequests", Subresource: sub, ResourceRequest: true}
	}
	res := func(u user.Info, verb, group, resource string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: group, Resource: resource, ResourceRequest: true}
	}
	path := func(u user.Info, verb, p string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: verb, Path: p}
	}
	for _, tc := range []struct {
		name  string
		attrs authorizer.AttributesRecord
		want  authorizer.Decision
	}{
		{"admin lists secrets", res(admin, "list", "", "secrets"), authorizer.DecisionAllow},
		{"node lists pods", res(node, "list", "", "pods"), authorizer.DecisionAllow},
		{"bootstrap creates a CSR", csr(boot, "create", ""), authorizer.DecisionAllow},
		{"bootstrap watches CSRs", csr(boot, "watch", ""), authorizer.DecisionAllow},
		{"bootstrap may not approve", csr(boot, "update", "approval"), authorizer.DecisionDeny},
		{"bootstrap may not delete CSRs", csr(boot, "delete", ""), authorizer.DecisionDeny},
		{"bootstrap may not read secrets", res(boot, "get", "", "secrets"), authorizer.DecisionDeny},
		{"bootstrap may not create nodes", res(boot, "create", "", "nodes"), authorizer.DecisionDeny},
		{"bootstrap reads discovery", path(boot, "get", "/apis/certificates.k8s.io/v1"), authorizer.DecisionAllow},
		{"bootstrap may not read metrics", path(boot, "get", "/metrics"), authorizer.DecisionDeny},
		{"bootstrap may not post to /api", path(boot, "post", "/api"), authorizer.DecisionDeny},
		{"no groups", res(&user.DefaultInfo{Name: "x"}, "get", "", "pods"), authorizer.DecisionNoOpinion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reason, err := authorize(context.Background(), tc.attrs)
			if err != nil || got != tc.want {
				t.Errorf("decision %v (%q, %v), want %v", got, reason, err, tc.want)
			}
		})
	}
}

func TestCACertsHandler(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
	h := withCACerts(next, ca)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/cacerts", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != string(ca) {
		t.Errorf("/cacerts = %d %q", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/cacerts", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /cacerts = %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api", nil))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("/api bypassed the chain: %d", rec.Code)
	}
}

func TestEnsureJoinToken(t *testing.T) {
	dir := t.TempDir()
	caFile, tokenFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
	if err := os.WriteFile(caFile, []byte("ca one"), 0o644); err != nil {
		t.Fatal(err)
	}
	first, err := ensureJoinToken(tokenFile, caFile, "")
	if err != nil {
		t.Fatal(err)
	}
	if first.CAHash != bootstraptoken.CAHash([]byte("ca one")) {
		t.Errorf("hash %s", first.CAHash)
	}
	if st, _ := os.Stat(tokenFile); st == nil || st.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v", st)
	}
	again, err := ensureJoinToken(tokenFile, caFile, "")
	if err != nil || again != first {
		t.Fatalf("second call changed the token: %v, %v", again, err)
	}
	if err := os.WriteFile(caFile, []byte("ca two"), 0o644); err != nil {
		t.Fatal(err)
	}
	rotated, err := ensureJoinToken(tokenFile, caFile, "")
	if err != nil || rotated.Token != first.Token || rotated.CAHash != bootstraptoken.CAHash([]byte("ca two")) {
		t.Fatalf("after a CA change: %v, %v", rotated, err)
	}
	preset, err := ensureJoinToken(tokenFile, caFile, "abcdef.0123456789abcdef")
	if err != nil || preset.Token.String() != "abcdef.0123456789abcdef" || preset.CAHash != rotated.CAHash {
		t.Fatalf("preset token: %v, %v", preset, err)
	}
	if _, err := ensureJoinToken(tokenFile, caFile, "short"); err == nil {
		t.Error("a malformed --token was accepted")
	}
	if err := os.WriteFile(tokenFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ensureJoinToken(tokenFile, caFile, ""); err == nil {
		t.Error("a malformed token file was accepted")
	}
}
