package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func readArchive(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		out[h.Name] = data
	}
}

func TestWriteArchive(t *testing.T) {
	img := Image{Name: "localhost/skiff/netutil:1", Entrypoint: []string{"/bin/netutil"}, Env: []string{"PATH=/bin"},
		Files: []File{{Path: "/bin/netutil", Mode: 0o755, Data: []byte("#!binary")}}}
	var a, b bytes.Buffer
	if err := Write(&a, img); err != nil {
		t.Fatal(err)
	}
	if err := Write(&b, img); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the same inputs gave different archives")
	}
	files := readArchive(t, a.Bytes())
	var index struct {
		Manifests []Descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v %s", err, files["index.json"])
	}
	m := index.Manifests[0]
	if m.Annotations["io.containerd.image.name"] != "localhost/skiff/netutil:1" {
		t.Fatalf("name annotation %v", m.Annotations)
	}
	blob := func(d string) []byte {
		t.Helper()
		b, ok := files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")]
		if !ok || digest(b) != d {
			t.Fatalf("blob %s missing or corrupt", d)
		}
		return b
	}
	var manifest struct {
		Config Descriptor   `json:"config"`
		Layers []Descriptor `json:"layers"`
	}
	if err := json.Unmarshal(blob(m.Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	var config struct {
		Config struct{ Entrypoint []string } `json:"config"`
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(blob(manifest.Config.Digest), &config); err != nil || config.Config.Entrypoint[0] != "/bin/netutil" {
		t.Fatalf("config: %v %+v", err, config)
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(manifest.Layers[0].Digest)))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(zr)
	if digest(raw) != config.RootFS.DiffIDs[0] {
		t.Fatal("diff_id does not match the uncompressed layer")
	}
	layer := readArchive(t, raw)
	if string(layer["bin/netutil"]) != "#!binary" {
		t.Fatalf("layer files %v", layer)
	}
	if _, ok := layer["bin/"]; !ok {
		t.Fatal("layer lacks the bin/ directory entry")
	}
}

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"localhost/skiff/pause:1", "registry.k8s.io/pause:3.10", "localhost:5000/x/y:tag"} {
		if err := ValidateName(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"pause", "pause:1", "skiff/pause", "localhost/skiff/pause:", "Localhost/Skiff/x:1", "a b/c:1", "x/y@sha256:00"} {
		if err := ValidateName(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if err := Write(io.Discard, Image{Name: "pause:1"}); err == nil {
		t.Error("short name accepted by Write")
	}
	if err := Write(io.Discard, Image{Name: "localhost/x:1", Files: []File{{Path: "/"}}}); err == nil {
		t.Error("bad file path accepted")
	}
}

// TestLayerLinksDirsAndUser: symbolic links and directories keep their kind and mode,
// parents come before their children, and USER/WORKDIR reach the configuration.
func TestLayerLinksDirsAndUser(t *testing.T) {
	img := Image{Name: "localhost/skiff/busybox:1", User: "1234", WorkingDir: "/work",
		Files: []File{
			{Path: "/bin/sh", Link: "busybox"},
			{Path: "/bin/busybox", Mode: 0o755, Data: []byte("bb")},
			{Path: "/tmp", Dir: true, Mode: 0o1777},
			{Path: "/tmp/keep", Mode: 0o644, Data: []byte("x")},
			{Path: "/var/lib/x", Dir: true, Mode: 0o700},
		}}
	var buf bytes.Buffer
	if err := Write(&buf, img); err != nil {
		t.Fatal(err)
	}
	files := readArchive(t, buf.Bytes())
	var index struct{ Manifests []Descriptor }
	_ = json.Unmarshal(files["index.json"], &index)
	blob := func(d string) []byte { return files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")] }
	var manifest struct {
		Config Descriptor
		Layers []Descriptor
	}
	_ = json.Unmarshal(blob(index.Manifests[0].Digest), &manifest)
	var config struct {
		Config struct{ User, WorkingDir string } `json:"config"`
	}
	if err := json.Unmarshal(blob(manifest.Config.Digest), &config); err != nil || config.Config.User != "1234" || config.Config.WorkingDir != "/work" {
		t.Fatalf("config %+v, %v", config, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(manifest.Layers[0].Digest)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	seen := map[string]*tar.Header{}
	var order []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if seen[h.Name] != nil {
			t.Fatalf("%s written twice", h.Name)
		}
		seen[h.Name] = h
		order = append(order, h.Name)
	}
	if h := seen["bin/sh"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
		t.Fatalf("bin/sh: %+v", h)
	}
	if h := seen["tmp/"]; h == nil || h.Typeflag != tar.TypeDir || h.Mode != 0o1777 {
		t.Fatalf("tmp/: %+v", h)
	}
	if h := seen["var/lib/x/"]; h == nil || h.Mode != 0o700 {
		t.Fatalf("var/lib/x/: %+v", h)
	}
	pos := map[string]int{}
	for i, n := range order {
		pos[n] = i
	}
	for _, pair := range [][2]string{{"var/", "var/lib/"}, {"var/lib/", "var/lib/x/"}, {"tmp/", "tmp/keep"}, {"bin/", "bin/sh"}} {
		if pos[pair[0]] >= pos[pair[1]] {
			t.Fatalf("%s written after %s: %v", pair[0], pair[1], order)
		}
	}
}

// TestLayers: Layers stack above Files in order, each with its diff_id, and a layer given twice
// is one blob.
func TestLayers(t *testing.T) {
	same := []File{{Path: "/etc/os-release", Mode: 0o644, Data: []byte("ID=test\n")}}
	img := Image{Name: "localhost/skiff/layers:1", Files: []File{{Path: "/a", Mode: 0o644, Data: []byte("a")}},
		Layers: [][]File{same, {{Path: "/b", Mode: 0o644, Data: []byte("b")}}, same}}
	var buf bytes.Buffer
	if err := Write(&buf, img); err != nil {
		t.Fatal(err)
	}
	files := readArchive(t, buf.Bytes())
	var index struct {
		Manifests []Descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	blob := func(d string) []byte { return files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")] }
	var manifest struct {
		Config Descriptor   `json:"config"`
		Layers []Descriptor `json:"layers"`
	}
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	var config struct {
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(blob(manifest.Config.Digest), &config); err != nil {
		t.Fatal(err)
	}
	if len(manifest.Layers) != 4 || len(config.RootFS.DiffIDs) != 4 {
		t.Fatalf("want 4 layers and diff_ids, got %d and %d", len(manifest.Layers), len(config.RootFS.DiffIDs))
	}
	if manifest.Layers[1].Digest != manifest.Layers[3].Digest || manifest.Layers[1].Digest == manifest.Layers[2].Digest {
		t.Fatalf("layer digests %+v", manifest.Layers)
	}
	for i, want := range []string{"a", "etc/os-release", "b", "etc/os-release"} {
		zr, err := gzip.NewReader(bytes.NewReader(blob(manifest.Layers[i].Digest)))
		if err != nil {
			t.Fatalf("layer %d: %v", i, err)
		}
		raw, _ := io.ReadAll(zr)
		if digest(raw) != config.RootFS.DiffIDs[i] {
			t.Fatalf("layer %d: diff_id does not match", i)
		}
		if _, ok := readArchive(t, raw)[want]; !ok {
			t.Fatalf("layer %d lacks %s", i, want)
		}
	}
	if n := strings.Count(strings.Join(keys(files), " "), "blobs/"); n != 5 {
		t.Fatalf("want 5 blobs (manifest, config, 3 distinct layers), got %d", n)
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
