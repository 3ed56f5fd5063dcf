package apiserver

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/skiff-sh/skiff/controlplane/bootstraptoken"
)

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
