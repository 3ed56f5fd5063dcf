package framework

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// Registry is a minimal, read-only OCI distribution registry over plain HTTP on loopback, for
// tests that pull: it serves /v2/, /v2/<name>/manifests/<tag|digest> and /v2/<name>/blobs/<digest>
// (GET and HEAD) of images loaded from OCI image-layout archives (what images/oci writes).
type Registry struct {
	// Addr is the registry's host:port (127.0.0.1:PORT), the first component of its image
	// references.
	Addr string

	mu sync.RWMutex
	// blobs holds every blob by digest (manifests, configs, layers).
	blobs map[string][]byte
	// repos maps a repository name to its tags (tag -> manifest digest) and to the digests
	// its images reach, the only blobs served under that name.
	repos    map[string]*repository
	requests []string
	// login, when set (RequireLogin), is the one user:password every request must carry.
	login string
}

type repository struct {
	tags  map[string]string
	blobs map[string]bool
}

// StartRegistry serves an empty registry on 127.0.0.1:<free port> inside the network namespace
// at netnsPath ("" for the test's own) until the test ends. The listening socket is made in that
// namespace, so only processes there (such as a node's containerd) reach it.
func StartRegistry(tb testing.TB, netnsPath string) *Registry {
	tb.Helper()
	l, err := listenIn(netnsPath, "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("registry listen in %q: %v", netnsPath, err)
	}
	r := &Registry{Addr: l.Addr().String(), blobs: map[string][]byte{}, repos: map[string]*repository{}}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	tb.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return r
}

// listenIn listens on addr with a socket made in the network namespace at path ("" here), on a
// thread switched into it and back (containernetworking's ns).
func listenIn(path, addr string) (net.Listener, error) {
	if path == "" {
		return net.Listen("tcp", addr)
	}
	var l net.Listener
	err := ns.WithNetNSPath(path, func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

// Ref is the reference of repo:tag on this registry (127.0.0.1:PORT/repo:tag).
func (r *Registry) Ref(repo, tag string) string { return r.Addr + "/" + repo + ":" + tag }

// AddArchive loads the single image of an OCI image-layout archive (index.json naming one
// manifest or index, blobs/<alg>/<hex>) and serves it as repo:tag, whatever name it was built
// with. It returns the manifest's digest.
func (r *Registry) AddArchive(file, repo, tag string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", file, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return "", fmt.Errorf("%s: %s: %w", file, h.Name, err)
		}
		files[strings.TrimPrefix(h.Name, "./")] = b
	}
	var index struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		return "", fmt.Errorf("%s: index.json: %w", file, err)
	}
	if len(index.Manifests) != 1 {
		return "", fmt.Errorf("%s: index.json names %d images, want 1", file, len(index.Manifests))
	}
	blobs := map[string][]byte{}
	reached := map[string]bool{}
	// Walk the manifest (or index) down to its config and layers, checking every digest.
	var walk func(d descriptor) error
	walk = func(d descriptor) error {
		alg, hexDigest, ok := strings.Cut(d.Digest, ":")
		if !ok || alg != "sha256" {
			return fmt.Errorf("unsupported digest %q", d.Digest)
		}
		b, ok := files["blobs/sha256/"+hexDigest]
		if !ok {
			return fmt.Errorf("blob %s missing", d.Digest)
		}
		if digestOf(b) != d.Digest {
			return fmt.Errorf("blob %s has digest %s", d.Digest, digestOf(b))
		}
		blobs[d.Digest], reached[d.Digest] = b, true
		var m struct {
			Config    *descriptor  `json:"config"`
			Layers    []descriptor `json:"layers"`
			Manifests []descriptor `json:"manifests"`
		}
		if !isManifest(d.MediaType) {
			return nil
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("manifest %s: %w", d.Digest, err)
		}
		children := append(m.Layers, m.Manifests...)
		if m.Config != nil {
			children = append(children, *m.Config)
		}
		for _, c := range children {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	top := index.Manifests[0]
	if err := walk(top); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for d, b := range blobs {
		r.blobs[d] = b
	}
	rp := r.repos[repo]
	if rp == nil {
		rp = &repository{tags: map[string]string{}, blobs: map[string]bool{}}
		r.repos[repo] = rp
	}
	rp.tags[tag] = top.Digest
	for d := range reached {
		rp.blobs[d] = true
	}
	return top.Digest, nil
}

// WriteHostsTOML makes a containerd whose CRI registry config_path is certsDir pull this
// registry's images over plain HTTP: it writes certsDir/<Addr>/hosts.toml (containerd's
// certs.d layout), removed when the test ends.
func (r *Registry) WriteHostsTOML(tb testing.TB, certsDir string) string {
	tb.Helper()
	dir := filepath.Join(certsDir, r.Addr)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	file := filepath.Join(dir, "hosts.toml")
	if err := os.WriteFile(file, []byte(r.HostsTOML()), 0o644); err != nil {
		tb.Fatal(err)
	}
	return file
}

// HostsTOML is the hosts.toml that points containerd at this registry over plain HTTP.
func (r *Registry) HostsTOML() string {
	u := "http://" + r.Addr
	return fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", u, u)
}

// RequireLogin makes the registry private: every request must carry HTTP Basic credentials
// for user and password, or is answered 401 with a Basic challenge, as a registry with
// htpasswd authentication does.
func (r *Registry) RequireLogin(user, password string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.login = user + ":" + password
}

// Requests lists the requests served so far ("GET /v2/...").
func (r *Registry) Requests() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]string(nil), r.requests...)
}

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

func isManifest(mediaType string) bool {
	switch mediaType {
	case "application/vnd.oci.image.manifest.v1+json", "application/vnd.oci.image.index.v1+json",
		"application/vnd.docker.distribution.manifest.v2+json", "application/vnd.docker.distribution.manifest.list.v2+json":
		return true
	}
	return false
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// ServeHTTP implements the read side of the OCI distribution API.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests = append(r.requests, req.Method+" "+req.URL.Path)
	login := r.login
	r.mu.Unlock()
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	if user, pass, ok := req.BasicAuth(); login != "" && (!ok || user+":"+pass != login) {
		w.Header().Set("WWW-Authenticate", `Basic realm="skiff-test-registry"`)
		registryError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required")
		return
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		registryError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "this registry is read-only")
		return
	}
	p := req.URL.Path
	if p == "/v2/" || p == "/v2" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "{}")
		return
	}
	rest, ok := strings.CutPrefix(p, "/v2/")
	if !ok {
		http.NotFound(w, req)
		return
	}
	// The repository name may hold slashes: split at the last /manifests/ or /blobs/.
	var name, kind, ref string
	at := -1
	for _, k := range []string{"manifests", "blobs"} {
		if i := strings.LastIndex(rest, "/"+k+"/"); i > at {
			at, name, kind, ref = i, rest[:i], k, rest[i+len(k)+2:]
		}
	}
	if name == "" || ref == "" || strings.Contains(ref, "/") {
		http.NotFound(w, req)
		return
	}
	r.mu.RLock()
	rp := r.repos[name]
	var digest string
	var body []byte
	if rp != nil {
		digest = ref
		if kind == "manifests" && !strings.Contains(ref, ":") {
			digest = rp.tags[ref]
		}
		if rp.blobs[digest] {
			body = r.blobs[digest]
		}
	}
	r.mu.RUnlock()
	switch {
	case rp == nil:
		registryError(w, http.StatusNotFound, "NAME_UNKNOWN", "repository name not known to registry")
		return
	case body == nil && kind == "manifests":
		registryError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "manifest unknown")
		return
	case body == nil:
		registryError(w, http.StatusNotFound, "BLOB_UNKNOWN", "blob unknown to registry")
		return
	}
	ctype := "application/octet-stream"
	if kind == "manifests" {
		var m struct {
			MediaType string `json:"mediaType"`
		}
		if json.Unmarshal(body, &m) != nil || m.MediaType == "" {
			registryError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "blob is not a manifest with a mediaType")
			return
		}
		ctype = m.MediaType
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Docker-Content-Digest", digest)
	w.Header().Set("Etag", `"`+digest+`"`)
	// ServeContent answers HEAD without a body and honours Range, with the right Content-Length.
	http.ServeContent(w, req, "", time.Time{}, bytes.NewReader(body))
}

// registryError writes an error in the distribution API's format.
func registryError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": msg}}})
}
