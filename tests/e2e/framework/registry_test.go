package framework

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/agent/netnsdial"
	"github.com/skiff-sh/skiff/images/oci"
)

// TestRegistry serves an image built by images/oci under another name and checks the
// distribution API's read side as containerd uses it.
func TestRegistry(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "img.tar")
	if err := oci.WriteFile(archive, oci.Image{Name: "localhost/skiff/test:1", Entrypoint: []string{"/hello"},
		Files: []oci.File{{Path: "/hello", Mode: 0o755, Data: []byte("#!/bin/sh\necho hi\n")}}}); err != nil {
		t.Fatal(err)
	}
	r := StartRegistry(t, "")
	dgst, err := r.AddArchive(archive, "team/test", "pulled")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Ref("team/test", "pulled"); got != r.Addr+"/team/test:pulled" {
		t.Errorf("Ref = %q", got)
	}
	get := func(method, path string, hdr ...string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+r.Addr+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}

	if resp, _ := get("GET", "/v2/"); resp.StatusCode != 200 || resp.Header.Get("Docker-Distribution-API-Version") != "registry/2.0" {
		t.Errorf("/v2/: %s %v", resp.Status, resp.Header)
	}
	// A tag resolves by HEAD to the manifest's digest, type and length; GET returns it.
	head, body := get("HEAD", "/v2/team/test/manifests/pulled")
	if head.StatusCode != 200 || head.Header.Get("Docker-Content-Digest") != dgst ||
		head.Header.Get("Content-Type") != oci.MediaTypeManifest || head.ContentLength <= 0 || len(body) != 0 {
		t.Fatalf("HEAD manifest: %s %v len %d body %d", head.Status, head.Header, head.ContentLength, len(body))
	}
	resp, manifest := get("GET", "/v2/team/test/manifests/pulled")
	if resp.StatusCode != 200 || digestOf(manifest) != dgst || int64(len(manifest)) != head.ContentLength {
		t.Fatalf("GET manifest: %s digest %s", resp.Status, digestOf(manifest))
	}
	if resp, b := get("GET", "/v2/team/test/manifests/"+dgst); resp.StatusCode != 200 || digestOf(b) != dgst {
		t.Errorf("manifest by digest: %s", resp.Status)
	}
	// The config and layer blobs, with their digests; a range of a blob.
	var m struct {
		Config oci.Descriptor   `json:"config"`
		Layers []oci.Descriptor `json:"layers"`
	}
	if err := json.Unmarshal(manifest, &m); err != nil || len(m.Layers) != 1 {
		t.Fatalf("manifest %s: %v", manifest, err)
	}
	for _, d := range append(m.Layers, m.Config) {
		resp, b := get("GET", "/v2/team/test/blobs/"+d.Digest)
		if resp.StatusCode != 200 || digestOf(b) != d.Digest || int64(len(b)) != d.Size || resp.Header.Get("Docker-Content-Digest") != d.Digest {
			t.Errorf("blob %s: %s %d bytes", d.Digest, resp.Status, len(b))
		}
	}
	if resp, b := get("GET", "/v2/team/test/blobs/"+m.Layers[0].Digest, "Range", "bytes=2-5"); resp.StatusCode != http.StatusPartialContent || len(b) != 4 {
		t.Errorf("range: %s %d bytes", resp.Status, len(b))
	}

	// Unknown tags, repositories and blobs are the API's errors; nothing can be written.
	for _, c := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/v2/team/test/manifests/missing", 404, "MANIFEST_UNKNOWN"},
		{"HEAD", "/v2/team/test/manifests/missing", 404, ""},
		{"GET", "/v2/localhost/skiff/test/manifests/1", 404, "NAME_UNKNOWN"},
		{"GET", "/v2/team/test/blobs/sha256:" + strings.Repeat("0", 64), 404, "BLOB_UNKNOWN"},
		{"GET", "/v2/team/test/manifests/" + m.Config.Digest, 404, "MANIFEST_UNKNOWN"},
		{"PUT", "/v2/team/test/manifests/pulled", 405, "UNSUPPORTED"},
	} {
		resp, b := get(c.method, c.path)
		if resp.StatusCode != c.status || !strings.Contains(string(b), c.code) {
			t.Errorf("%s %s: %s %s", c.method, c.path, resp.Status, b)
		}
	}
	if got := r.Requests(); len(got) == 0 || got[0] != "GET /v2/" {
		t.Errorf("requests: %v", got)
	}

	// hosts.toml for containerd's certs.d layout, plain HTTP to the registry.
	certs := t.TempDir()
	file := r.WriteHostsTOML(t, certs)
	if file != filepath.Join(certs, r.Addr, "hosts.toml") {
		t.Errorf("hosts.toml at %s", file)
	}
	b, _ := os.ReadFile(file)
	want := "server = \"http://" + r.Addr + "\"\n\n[host.\"http://" + r.Addr + "\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
	if string(b) != want {
		t.Errorf("hosts.toml:\n%s\nwant:\n%s", b, want)
	}

	if _, err := r.AddArchive(filepath.Join(t.TempDir(), "missing.tar"), "x", "y"); err == nil {
		t.Error("a missing archive loaded")
	}
}

// TestRegistryInNetns checks that a registry started in a network namespace listens there only.
func TestRegistryInNetns(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root and network namespaces: make unit (-short) skips it, make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (every machine here has it)")
	}
	_, nsPath := Netns(t)
	r := StartRegistry(t, nsPath)
	// From the namespace the registry answers.
	c := &http.Client{Transport: &http.Transport{DialContext: netnsdial.Dialer(nsPath, 5*time.Second)}, Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + r.Addr + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/v2/ in the namespace: %s", resp.Status)
	}
	// From here nothing answers as the registry (the port is closed, or someone else's).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+r.Addr+"/v2/", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		if resp.Header.Get("Docker-Distribution-API-Version") != "" {
			t.Errorf("the registry at %s answers outside its namespace", r.Addr)
		}
	}
}
