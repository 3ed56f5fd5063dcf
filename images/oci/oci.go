// Package oci builds small OCI image archives from local files — one layer, an entrypoint —
// so skiff ships its own pause and test images to nodes that reach no registry. The archive
// (oci-layout, index.json, blobs/sha256/...) is what `ctr images import` and containerd's
// import API accept; the image name is recorded in the io.containerd.image.name annotation,
// fully normalized (localhost/skiff/pause:1), because containerd's CRI cannot find images
// imported under short names.
package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// Media types of the OCI image specification.
const (
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
)

// File is one file of the image's single layer: a regular file, or a symbolic link when
// Link is set, or a directory when Dir is set.
type File struct {
	// Path inside the image, e.g. /bin/netutil.
	Path string
	Mode int64
	Data []byte
	// Link is a symbolic link's target (busybox's applets are links to it).
	Link string
	// Dir makes an (empty) directory with Mode, e.g. /tmp with 01777.
	Dir bool
}

// Image describes an image to build.
type Image struct {
	// Name is the fully normalized reference, e.g. localhost/skiff/netutil:1.
	Name  string
	Files []File
	// Layers are more layers above the one of Files, lowest first (tests of layered root
	// filesystems; skiff's own images are one layer).
	Layers     [][]File
	Entrypoint []string
	Cmd        []string
	Env        []string
	// User runs the image's processes as this user ("1234", "65532:65532"), WorkingDir in
	// this directory, as a Dockerfile's USER and WORKDIR; empty means root and /.
	User, WorkingDir string
	// Arch is the GOARCH-style architecture (amd64).
	Arch string
}

// Descriptor points at a blob.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// epoch fixes timestamps so the same inputs give the same digests.
var epoch = time.Unix(0, 0).UTC()

// ValidateName accepts only fully normalized references: registry/path:tag.
func ValidateName(name string) error {
	slash := strings.Index(name, "/")
	colon := strings.LastIndex(name, ":")
	if slash <= 0 || colon < slash || colon == len(name)-1 || strings.ContainsAny(name, " \t\n@") || strings.ToLower(name[:colon]) != name[:colon] {
		return fmt.Errorf("image name %q must be fully normalized, like localhost/skiff/pause:1", name)
	}
	return nil
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// layer returns the gzipped tar of the files and the digest of the uncompressed tar.
func layer(files []File) (gz []byte, diffID string, err error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	dirs := map[string]bool{}
	sorted := append([]File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	for _, f := range sorted {
		p := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
		if p == "" || p == "." {
			return nil, "", fmt.Errorf("bad file path %q", f.Path)
		}
		// Parents first, outermost first, each once. A directory given as a File sorts
		// before everything inside it, so it is written with its own mode before any
		// child could make it with 0755.
		var parents []string
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
		}
		for i := len(parents) - 1; i >= 0; i-- {
			d := parents[i]
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: epoch}); err != nil {
				return nil, "", err
			}
		}
		switch {
		case f.Dir:
			if dirs[p] {
				continue // named twice
			}
			dirs[p] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: f.Mode, ModTime: epoch}); err != nil {
				return nil, "", err
			}
			continue
		case f.Link != "":
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: p, Linkname: f.Link, Mode: 0o777, ModTime: epoch}); err != nil {
				return nil, "", err
			}
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: f.Mode, Size: int64(len(f.Data)), ModTime: epoch}); err != nil {
			return nil, "", err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, "", err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return z.Bytes(), digest(raw.Bytes()), nil
}

// Write builds the image and writes it as an OCI archive to w.
func Write(w io.Writer, img Image) error {
	if err := ValidateName(img.Name); err != nil {
		return err
	}
	if img.Arch == "" {
		img.Arch = "amd64"
	}
	var layers []Descriptor
	var diffIDs []string
	blobs := map[string][]byte{}
	for _, files := range append([][]File{img.Files}, img.Layers...) {
		gz, diffID, err := layer(files)
		if err != nil {
			return err
		}
		layers = append(layers, Descriptor{MediaType: MediaTypeLayer, Digest: digest(gz), Size: int64(len(gz))})
		diffIDs = append(diffIDs, diffID)
		blobs[digest(gz)] = gz
	}
	config, _ := json.Marshal(map[string]any{
		"architecture": img.Arch, "os": "linux", "created": epoch.Format(time.RFC3339),
		"config": imageConfig(img),
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
	})
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": MediaTypeManifest,
		"config": Descriptor{MediaType: MediaTypeConfig, Digest: digest(config), Size: int64(len(config))},
		"layers": layers,
	})
	tag := img.Name[strings.LastIndex(img.Name, ":")+1:]
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": MediaTypeIndex,
		"manifests": []Descriptor{{MediaType: MediaTypeManifest, Digest: digest(manifest), Size: int64(len(manifest)),
			Annotations: map[string]string{"io.containerd.image.name": img.Name, "org.opencontainers.image.ref.name": tag}}},
	})
	tw := tar.NewWriter(w)
	add := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: epoch}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	entries := []struct {
		name string
		b    []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{"blobs/sha256/" + strings.TrimPrefix(digest(config), "sha256:"), config},
		{"blobs/sha256/" + strings.TrimPrefix(digest(manifest), "sha256:"), manifest},
	}
	for _, l := range layers {
		if b, ok := blobs[l.Digest]; ok { // two identical layers are one blob
			entries = append(entries, struct {
				name string
				b    []byte
			}{"blobs/sha256/" + strings.TrimPrefix(l.Digest, "sha256:"), b})
			delete(blobs, l.Digest)
		}
	}
	for _, e := range entries {
		if err := add(e.name, e.b); err != nil {
			return err
		}
	}
	return tw.Close()
}

// imageConfig is the runtime part of the image configuration (omitting what is unset).
func imageConfig(img Image) map[string]any {
	c := map[string]any{"Entrypoint": img.Entrypoint, "Cmd": img.Cmd, "Env": img.Env}
	if img.User != "" {
		c["User"] = img.User
	}
	if img.WorkingDir != "" {
		c["WorkingDir"] = img.WorkingDir
	}
	return c
}

// WriteFile builds the image into an archive file.
func WriteFile(file string, img Image) error {
	var buf bytes.Buffer
	if err := Write(&buf, img); err != nil {
		return err
	}
	return os.WriteFile(file, buf.Bytes(), 0o644)
}
