package serverjoin

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/skiff-sh/skiff/internal/bootstraptoken"
	"github.com/skiff-sh/skiff/internal/layout"
)

var token = bootstraptoken.Token{ID: "abcdef", Secret: "0123456789abcdef"}

// oneMember is an embedded etcd of one started member, "first".
type oneMember struct{ added []string }

func (m *oneMember) MemberList(context.Context, ...clientv3.OpOption) (*clientv3.MemberListResponse, error) {
	return &clientv3.MemberListResponse{Members: []*etcdserverpb.Member{{ID: 1, Name: "first", PeerURLs: []string{"https://10.0.0.1:2380"}}}}, nil
}

func (m *oneMember) MemberAddAsLearner(_ context.Context, peers []string) (*clientv3.MemberAddResponse, error) {
	m.added = append(m.added, peers...)
	nm := &etcdserverpb.Member{ID: 2, PeerURLs: peers, IsLearner: true}
	return &clientv3.MemberAddResponse{Member: nm, Members: []*etcdserverpb.Member{{ID: 1, Name: "first", PeerURLs: []string{"https://10.0.0.1:2380"}}, nm}}, nil
}

func (m *oneMember) MemberRemove(context.Context, uint64) (*clientv3.MemberRemoveResponse, error) {
	return &clientv3.MemberRemoveResponse{}, nil
}

func (m *oneMember) MemberUpdate(context.Context, uint64, []string) (*clientv3.MemberUpdateResponse, error) {
	return &clientv3.MemberUpdateResponse{}, nil
}

func (m *oneMember) MemberPromote(context.Context, uint64) (*clientv3.MemberPromoteResponse, error) {
	return &clientv3.MemberPromoteResponse{}, nil
}

// serverDir is a data directory with every shared file but the encryption configuration.
func serverDir(t *testing.T) layout.Server {
	t.Helper()
	dirs := layout.Server{Dir: t.TempDir()}
	for _, p := range dirs.Shared() {
		if p == dirs.EncryptionConfig() {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("content of "+filepath.Base(p)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dirs
}

func post(h http.Handler, auth, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(body))
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestHandler(t *testing.T) {
	dirs := serverDir(t)
	members := &oneMember{}
	h := Handler{Token: token, Dirs: dirs, Members: members, ServiceCIDR: "10.96.0.0/12"}
	good := `{"name":"second","peerURL":"https://10.0.0.2:2380"}`

	for _, c := range []struct{ name, auth, body string }{
		{"no token", "", good},
		{"another token", "Bearer abcdef.0123456789abcdee", good},
		{"not bearer", "Basic abcdef.0123456789abcdef", good},
	} {
		if w := post(h, c.auth, c.body); w.Code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", c.name, w.Code)
		}
	}
	if len(members.added) != 0 {
		t.Fatalf("an unauthorised request added a member: %v", members.added)
	}
	if w := post(h, "Bearer "+token.String(), `{"name":"second","peerURL":"http://10.0.0.2:2380"}`); w.Code != http.StatusBadRequest ||
		!strings.Contains(w.Body.String(), "want https://") {
		t.Errorf("plain-HTTP peer URL: %d %s", w.Code, w.Body)
	}
	w := post(h, "Bearer "+token.String(), good)
	if w.Code != http.StatusOK {
		t.Fatalf("join: %d %s", w.Code, w.Body)
	}
	if len(members.added) != 1 || members.added[0] != "https://10.0.0.2:2380" {
		t.Errorf("members added %v", members.added)
	}
	if !strings.Contains(w.Body.String(), `"initialCluster":"first=https://10.0.0.1:2380,second=https://10.0.0.2:2380"`) {
		t.Errorf("answer lacks the initial cluster: %s", w.Body)
	}

	// A server whose etcd runs alone turns joins away; GET is not a join.
	alone := h
	alone.Refuse = "runs alone"
	if w := post(alone, "Bearer "+token.String(), good); w.Code != http.StatusConflict {
		t.Errorf("a server alone answered %d, want 409", w.Code)
	}
	r := httptest.NewRequest(http.MethodGet, Path, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", rec.Code)
	}
}

// TestJoinRoundTrip joins over TLS: the files land in a new data directory, and a second
// write of the same files is a no-op while another cluster's files are refused.
func TestJoinRoundTrip(t *testing.T) {
	dirs := serverDir(t)
	srv := httptest.NewTLSServer(Handler{Token: token, Dirs: dirs, Members: &oneMember{}, ServiceCIDR: "10.96.0.0/12"})
	defer srv.Close()
	caPEM := pemOf(srv.Certificate().Raw)
	resp, err := Join(context.Background(), srv.URL, caPEM, token, Request{Name: "second", PeerURL: "https://10.0.0.2:2380"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ServiceCIDR != "10.96.0.0/12" || len(resp.Files) != len(dirs.Shared())-1 {
		t.Errorf("answer: %q, %d files", resp.ServiceCIDR, len(resp.Files))
	}
	to := layout.Server{Dir: t.TempDir()}
	if err := WriteFiles(to, resp.Files); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(to.PKI().CA().Key)
	if err != nil || string(b) != "content of ca.key" {
		t.Errorf("ca.key: %q %v", b, err)
	}
	if err := WriteFiles(to, resp.Files); err != nil {
		t.Errorf("writing the same files again: %v", err)
	}
	resp.Files["pki/ca.key"] = []byte("another cluster")
	if err := WriteFiles(to, resp.Files); err == nil || !strings.Contains(err.Error(), "another cluster") {
		t.Errorf("another cluster's CA key written over: %v", err)
	}
	if err := WriteFiles(to, map[string][]byte{"../../etc/passwd": []byte("x")}); err == nil {
		t.Error("a path outside the shared files was written")
	}
	_, err = Join(context.Background(), srv.URL, caPEM, bootstraptoken.Token{ID: "abcdef", Secret: "ffffffffffffffff"}, Request{Name: "x", PeerURL: "https://10.0.0.3:2380"})
	var refused *RefusedError
	if !asRefused(err, &refused) || refused.Status != http.StatusUnauthorized || !refused.Final() {
		t.Errorf("a wrong token: %v", err)
	}
}

func TestDecodeRequest(t *testing.T) {
	for _, c := range []struct {
		body     string
		embedded bool
		err      string
	}{
		{`{"name":"a","peerURL":"https://[fd00::1]:2380"}`, true, ""},
		{`{"name":"a"}`, false, ""},
		{`{"name":"a","peerURL":"https://10.0.0.1:2380"}`, false, "external"},
		{`{"name":"A_b","peerURL":"https://10.0.0.1:2380"}`, true, "name"},
		{`{"name":"a","peerURL":"https://10.0.0.1"}`, true, "want https://"},
		{`{"name":"a","peerURL":"https://u@10.0.0.1:2380"}`, true, "want https://"},
		{`{"name":"a","extra":1}`, false, "unknown field"},
		{`{`, false, "unexpected EOF"},
	} {
		_, err := DecodeRequest(strings.NewReader(c.body), c.embedded)
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: %v, want %q", c.body, err, c.err)
		}
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add(`{"name":"a","peerURL":"https://10.0.0.1:2380"}`, true)
	f.Add(`{"name":""}`, false)
	f.Fuzz(func(t *testing.T, body string, embedded bool) {
		req, err := DecodeRequest(strings.NewReader(body), embedded)
		if err == nil && (req.Name == "" || (embedded && !strings.HasPrefix(req.PeerURL, "https://"))) {
			t.Errorf("accepted %q as %+v", body, req)
		}
	})
}

func pemOf(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func asRefused(err error, target **RefusedError) bool { return errors.As(err, target) }
