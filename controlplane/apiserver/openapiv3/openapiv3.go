// Package openapiv3 serves the API server's /openapi/v3 documents while keeping the built-in
// groups' documents only as compressed JSON.
//
// Upstream's InstallV3 keeps every group-version's document twice for the life of the server:
// as the spec3.OpenAPI object it was built from and as the JSON it serves. For skiff's ~60
// built-in group-versions that is ~20 MB of live heap (a quarter of an idle server's), though
// the documents never change while the binary runs. They are built with upstream's own
// InstallV3, so the bytes and ETags are exactly upstream's; Add reads each one back once, keeps it
// gzipped (~10x smaller) and drops the rest. Add is called with one group-version's
// documents at a time, so they are not all in memory even while they are built. The groups that do change, those of custom
// resources, stay in an upstream handler3.OpenAPIService (Dynamic), which apiextensions'
// controller updates; the discovery document at /openapi/v3 lists both.
package openapiv3

import (
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/munnerz/goautoneg"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/handler3"
)

// Path is where the documents are served.
const Path = "/openapi/v3"

// The media types upstream's handler serves (k8s.io/kube-openapi/pkg/handler3): JSON, and the
// gnostic protobuf under its current and deprecated names.
const (
	subTypeJSON               = "json"
	subTypeProtobuf           = "com.github.proto-openapi.spec.v3.v1.0+protobuf"
	subTypeProtobufDeprecated = "com.github.proto-openapi.spec.v3@v1.0+protobuf"
)

// document is one group-version's document as served: gzipped JSON and its ETag.
type document struct {
	gz       []byte
	etag     string
	modified time.Time
}

func (d *document) json() ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(d.gz))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// Service serves /openapi/v3: the fixed documents Add read, and Dynamic's.
type Service struct {
	fixed map[string]*document
	// Dynamic holds the group-versions that change while the server runs (custom resources').
	Dynamic *handler3.OpenAPIService
}

// New returns a Service with no fixed documents and an empty Dynamic.
func New() *Service {
	return &Service{fixed: map[string]*document{}, Dynamic: handler3.NewOpenAPIService()}
}

// Add reads every group-version's document from source, an /openapi/v3 handler such as
// upstream's InstallV3 registers, and serves the same bytes from then on: source can be
// dropped. Adding one source per group-version keeps only one document's objects alive at a
// time while the documents are built.
func (s *Service) Add(source http.Handler) error {
	disc, err := get(source, Path, "application/json")
	if err != nil {
		return err
	}
	var root handler3.OpenAPIV3Discovery
	if err := json.Unmarshal(disc.Body.Bytes(), &root); err != nil {
		return fmt.Errorf("%s: %w", Path, err)
	}
	for gv := range root.Paths {
		rec, err := get(source, Path+"/"+gv, "application/json")
		if err != nil {
			return err
		}
		etag, err := strconv.Unquote(rec.Header().Get("Etag"))
		if err != nil {
			return fmt.Errorf("%s/%s: ETag %q: %w", Path, gv, rec.Header().Get("Etag"), err)
		}
		modified, _ := http.ParseTime(rec.Header().Get("Last-Modified"))
		var gz bytes.Buffer
		w := gzip.NewWriter(&gz)
		if _, err := w.Write(rec.Body.Bytes()); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		s.fixed[gv] = &document{gz: bytes.Clone(gz.Bytes()), etag: etag, modified: modified}
	}
	return nil
}

// get makes one in-process GET of source.
func get(source http.Handler, target, accept string) (*httptest.ResponseRecorder, error) {
	req := httptest.NewRequest(http.MethodGet, target, nil)
	req.Header.Set("Accept", accept)
	rec := httptest.NewRecorder()
	source.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", target, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	return rec, nil
}

// Install registers the discovery document and the group-versions' documents on mux.
func (s *Service) Install(mux common.PathHandlerByGroupVersion) {
	mux.Handle(Path, http.HandlerFunc(s.serveDiscovery))
	mux.HandlePrefix(Path+"/", http.HandlerFunc(s.serveGroupVersion))
}

// serveDiscovery lists every group-version with its document's URL, hash included, as
// upstream's discovery document does.
func (s *Service) serveDiscovery(w http.ResponseWriter, r *http.Request) {
	root := handler3.OpenAPIV3Discovery{Paths: map[string]handler3.OpenAPIV3DiscoveryGroupVersion{}}
	dyn := httptest.NewRecorder()
	s.Dynamic.HandleDiscovery(dyn, httptest.NewRequest(http.MethodGet, Path, nil))
	if dyn.Code != http.StatusOK || json.Unmarshal(dyn.Body.Bytes(), &root) != nil {
		http.Error(w, "the custom resources' OpenAPI v3 discovery document is not available", http.StatusInternalServerError)
		return
	}
	// Last-Modified moves with the custom resources' documents too (If-Modified-Since).
	latest, _ := http.ParseTime(dyn.Header().Get("Last-Modified"))
	for gv, d := range s.fixed {
		root.Paths[gv] = handler3.OpenAPIV3DiscoveryGroupVersion{ServerRelativeURL: relativeURL(gv, d.etag)}
		if d.modified.After(latest) {
			latest = d.modified
		}
	}
	body, err := json.Marshal(root)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Etag", strconv.Quote(etagOf(body)))
	w.Header().Set("Content-Type", "application/json")
	http.ServeContent(w, r, Path, latest, bytes.NewReader(body))
}

// serveGroupVersion serves one document as upstream's handler does: the media type the Accept
// header prefers, its ETag, and with ?hash= either an immutable response (the hash is current)
// or a redirect to the current one.
func (s *Service) serveGroupVersion(w http.ResponseWriter, r *http.Request) {
	gv := strings.TrimPrefix(r.URL.Path, Path+"/")
	d, ok := s.fixed[gv]
	if !ok {
		s.Dynamic.HandleGroupVersion(w, r)
		return
	}
	accept := r.Header.Get("Accept")
	if accept == "" {
		accept = "*/*"
	}
	w.Header().Add("Vary", "Accept")
	for _, clause := range goautoneg.ParseAccept(accept) {
		for _, offer := range []struct{ subType, contentType string }{
			{subTypeJSON, "application/" + subTypeJSON},
			{subTypeProtobuf, "application/" + subTypeProtobuf},
			{subTypeProtobufDeprecated, "application/" + subTypeProtobuf},
		} {
			if (clause.Type != "application" && clause.Type != "*") || (clause.SubType != offer.subType && clause.SubType != "*") {
				continue
			}
			body, err := d.json()
			if err == nil && offer.subType != subTypeJSON {
				// Rarely asked for (kubectl and client-go read JSON): made on demand, not kept.
				body, err = handler3.ToV3ProtoBinary(body)
			}
			if err != nil {
				http.Error(w, fmt.Sprintf("OpenAPI v3 document of %s: %v", gv, err), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", offer.contentType)
			w.Header().Set("Etag", strconv.Quote(d.etag))
			if hash := r.URL.Query().Get("hash"); hash != "" {
				if hash != d.etag {
					http.Redirect(w, r, relativeURL(gv, d.etag), http.StatusMovedPermanently)
					return
				}
				w.Header().Set("Cache-Control", "public, immutable")
				w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).Format(time.RFC1123))
			}
			http.ServeContent(w, r, "", d.modified, bytes.NewReader(body))
			return
		}
	}
	w.WriteHeader(http.StatusNotAcceptable)
}

// GroupVersions lists the fixed documents' group-versions ("api/v1", "apis/apps/v1", ...).
func (s *Service) GroupVersions() []string {
	out := make([]string, 0, len(s.fixed))
	for gv := range s.fixed {
		out = append(out, gv)
	}
	sort.Strings(out)
	return out
}

// CompressedBytes is what the fixed documents take in memory.
func (s *Service) CompressedBytes() int {
	n := 0
	for _, d := range s.fixed {
		n += len(d.gz)
	}
	return n
}

func relativeURL(gv, etag string) string {
	return (&url.URL{Path: path.Join(Path, gv), RawQuery: url.Values{"hash": {etag}}.Encode()}).String()
}

// etagOf hashes a body as upstream's handlers do (SHA-512, upper-case hex).
func etagOf(body []byte) string { return fmt.Sprintf("%X", sha512.Sum512(body)) }
