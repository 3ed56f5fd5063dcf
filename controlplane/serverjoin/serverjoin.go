// Package serverjoin lets a new server join a running one, as k3s's `--server` does for
// servers: the new server proves it holds the cluster's join token, and receives the files
// every server shares (the CAs, the service-account keys, the encryption configuration) and,
// when the cluster's etcd is embedded, its place in etcd — added as a learner, with the
// initial cluster it starts its member with. Everything else (its serving certificates, its
// kubeconfigs) the new server issues itself from the shared CAs.
//
// The endpoint sits in front of the API server's authentication, like /cacerts: the token is
// its credential, compared in constant time, and the joining side trusts the answer only
// over TLS verified by the CA its token pins.
package serverjoin

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/skiff-sh/skiff/controlplane/etcd"
	"github.com/skiff-sh/skiff/internal/bootstraptoken"
	"github.com/skiff-sh/skiff/internal/layout"
	"github.com/skiff-sh/skiff/internal/version"
)

// Path is where a server answers joining servers.
const Path = "/v1-skiff/server-join"

// Request is what a joining server sends: its etcd member's name and peer URL (empty when the
// cluster's etcd is external).
type Request struct {
	Name    string `json:"name"`
	PeerURL string `json:"peerURL,omitempty"`
}

// Response is what it gets back.
type Response struct {
	// Files are the shared files by their path under the data directory ("pki/ca.key").
	Files map[string][]byte `json:"files"`
	// InitialCluster is the etcd initial cluster of the new member (embedded etcd only).
	InitialCluster string `json:"initialCluster,omitempty"`
	// ServiceCIDR and SecretsEncryption are settings every server must share; the joining
	// server refuses to start with others.
	ServiceCIDR       string `json:"serviceCIDR"`
	SecretsEncryption bool   `json:"secretsEncryption"`
	// Version is the answering server's Kubernetes version (internal/version.Kubernetes):
	// the joining server checks the skew between them ("" from a build before it was sent).
	Version string `json:"version,omitempty"`
}

// Handler answers joining servers.
type Handler struct {
	// Token is the cluster's join token; a request must carry it as its bearer token.
	Token bootstraptoken.Token
	Dirs  layout.Server
	// Members is the embedded etcd's member API; nil when etcd is external.
	Members           etcd.Membership
	ServiceCIDR       string
	SecretsEncryption bool
	// Refuse, if set, turns every join away with this reason (a server whose embedded etcd
	// runs alone, its peers on loopback).
	Refuse string
	// Timeout bounds the etcd calls of one join.
	Timeout time.Duration
}

// ServeHTTP adds the caller's member as a learner and returns the shared files.
func (h Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed: POST a join request", http.StatusMethodNotAllowed)
		return
	}
	if !h.authorized(r.Header.Get("Authorization")) {
		http.Error(w, "unauthorized: the join token (Authorization: Bearer <id>.<secret>) is required", http.StatusUnauthorized)
		return
	}
	if h.Refuse != "" {
		http.Error(w, h.Refuse, http.StatusConflict)
		return
	}
	req, err := DecodeRequest(io.LimitReader(r.Body, 64<<10), h.Members != nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp := Response{Files: map[string][]byte{}, ServiceCIDR: h.ServiceCIDR, SecretsEncryption: h.SecretsEncryption,
		Version: version.Kubernetes()}
	if resp.Files, err = ReadFiles(h.Dirs); err != nil {
		http.Error(w, "reading the shared files: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if h.Members != nil {
		ctx, cancel := context.WithTimeout(r.Context(), h.timeout())
		defer cancel()
		if resp.InitialCluster, err = etcd.AddLearner(ctx, h.Members, req.Name, req.PeerURL); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func (h Handler) timeout() time.Duration {
	if h.Timeout == 0 {
		return 30 * time.Second
	}
	return h.Timeout
}

func (h Handler) authorized(header string) bool {
	got, ok := strings.CutPrefix(header, "Bearer ")
	want := h.Token.String()
	return ok && want != "." && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// DecodeRequest reads a join request, refusing unknown fields, a name that is no DNS
// subdomain (it becomes the etcd member's name, the server's node name), and a peer URL that
// is not https://host:port — or any peer URL when the cluster's etcd is external.
func DecodeRequest(r io.Reader, embedded bool) (Request, error) {
	var req Request
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("join request: %w", err)
	}
	if errs := validation.IsDNS1123Subdomain(req.Name); len(errs) > 0 {
		return req, fmt.Errorf("join request: name %q: %s", req.Name, strings.Join(errs, "; "))
	}
	if !embedded {
		if req.PeerURL != "" {
			return req, errors.New("join request: this cluster's etcd is external: join with --etcd-servers, not as an etcd member")
		}
		return req, nil
	}
	u, err := url.Parse(req.PeerURL)
	if err != nil || u.Scheme != "https" || u.Port() == "" || u.Hostname() == "" || u.Path != "" || u.User != nil {
		return req, fmt.Errorf("join request: peerURL %q: want https://<address>:<port>", req.PeerURL)
	}
	return req, nil
}

// Join asks the server at serverURL (whose CA is caPEM, already checked against the token's
// pin) to admit this server.
func Join(ctx context.Context, serverURL string, caPEM []byte, token bootstraptoken.Token, req Request) (Response, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return Response{}, errors.New("the cluster CA holds no certificate")
	}
	body, err := json.Marshal(req)
	if err != nil {
		return Response{}, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(serverURL, "/")+Path, bytes.NewReader(body))
	if err != nil {
		return Response{}, err
	}
	hr.Header.Set("Authorization", "Bearer "+token.String())
	hr.Header.Set("Content-Type", "application/json")
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(hr)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return Response{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return Response{}, &RefusedError{Server: serverURL, Status: resp.StatusCode, Message: strings.TrimSpace(string(b))}
	}
	var out Response
	if err := json.Unmarshal(b, &out); err != nil {
		return Response{}, fmt.Errorf("%s answered the join with %w", serverURL, err)
	}
	return out, nil
}

// RefusedError is a join the server answered with an error.
type RefusedError struct {
	Server  string
	Status  int
	Message string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s refused to admit this server: %d %s: %s", e.Server, e.Status, http.StatusText(e.Status), e.Message)
}

// Final says whether asking again cannot help: the server refused the request itself (a
// wrong token, a bad request, a server that runs alone), rather than being unable to add the
// member just now (503).
func (e *RefusedError) Final() bool {
	return e.Status != http.StatusServiceUnavailable && e.Status < 500
}

// ReadFiles reads the shared files under dirs, by their slash-separated paths under it.
func ReadFiles(dirs layout.Server) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, path := range dirs.Shared() {
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // no encryption configuration without --secrets-encryption
		} else if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(dirs.Dir, path)
		files[filepath.ToSlash(rel)] = b
	}
	return files, nil
}

// WriteFiles writes the shared files a join returned under dirs, refusing any path that is
// not one of layout's shared files. A file already there with other content is an error: a
// data directory of another cluster is never overwritten.
func WriteFiles(dirs layout.Server, files map[string][]byte) error {
	shared := dirs.Shared()
	for rel, content := range files {
		path := filepath.Join(dirs.Dir, filepath.FromSlash(rel))
		if !slices.Contains(shared, path) {
			return fmt.Errorf("the server sent %q, which is not a shared file", rel)
		}
		if old, err := os.ReadFile(path); err == nil {
			if !bytes.Equal(old, content) {
				return fmt.Errorf("%s exists and differs from the cluster's: this data directory belongs to another cluster (remove it to join)", path)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		mode := os.FileMode(0o600)
		if strings.HasSuffix(path, ".crt") || strings.HasSuffix(path, ".pub") {
			mode = 0o644
		}
		if err := os.WriteFile(path, content, mode); err != nil {
			return err
		}
	}
	return nil
}
