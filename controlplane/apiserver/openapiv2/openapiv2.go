// Package openapiv2 serves the API server's /openapi/v2 document while keeping its built-in part
// only as compressed JSON.
//
// Upstream keeps the built-in types' document for the life of the server as the spec.Swagger
// object it was built from (~11 MB of live heap for skiff's types, a fifth of an idle server's),
// because apiextensions' OpenAPI controller merges every CustomResourceDefinition's schema into
// that object whenever one changes. That part never changes while the binary runs. Service keeps
// it as gzipped JSON (~10x smaller) and does the merge itself, with apiextensions' own builder, on
// the first request after the set of established CRDs changed; the merged document is kept
// gzipped too, so between changes a request costs a copy of compressed bytes. The objects a merge
// needs are garbage as soon as it is done.
//
// In front of it all, kube-aggregator merges the delegate servers' documents with the extension
// API servers' and keeps each one it downloads parsed: given the built-in document, another
// ~16 MB from the first GET on. So the aggregator is given a placeholder (Placeholder) where it
// looks for the built-in document, and Service serves the aggregator's /openapi/v2 itself,
// merging in what kube-aggregator serves (MergeFrom): its own types', apiextensions' and the
// extension servers' documents, all small.
package openapiv2

import (
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/munnerz/goautoneg"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	listers "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	apiextensionsfeatures "k8s.io/apiextensions-apiserver/pkg/features"
	"k8s.io/apimachinery/pkg/labels"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kube-openapi/pkg/aggregator"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Path is where the document is served.
const Path = "/openapi/v2"

// The media types upstream's handler serves (k8s.io/kube-openapi/pkg/handler): JSON, and the
// gnostic protobuf under its current and deprecated names.
const (
	subTypeJSON               = "json"
	subTypeProtobuf           = "com.github.proto-openapi.spec.v2.v1.0+protobuf"
	subTypeProtobufDeprecated = "com.github.proto-openapi.spec.v2@v1.0+protobuf"
)

// document is the merged document as served: gzipped JSON, its protobuf form (gzipped, made on
// the first request for it), the ETag (the JSON's hash, as upstream's) and when it was built. It
// was merged from the CRDs fingerprint names and the merged-in document of ETag mergedETag.
type document struct {
	fingerprint string
	mergedETag  string
	json        []byte
	proto       []byte
	etag        string
	modified    time.Time
}

// Service serves /openapi/v2: the built-in document merged with every established CRD's and
// with the document of the handler MergeFrom gave, if any.
type Service struct {
	static []byte // the built-in document, gzipped JSON
	crds   listers.CustomResourceDefinitionLister
	from   http.Handler

	mu      sync.Mutex
	current *document
}

// New keeps static, the built-in types' document (as upstream's InstallV2 builds it), as
// gzipped JSON; static itself can be dropped. crds lists the CRDs to merge in; nil serves the
// built-in document alone.
func New(static *spec.Swagger, crds listers.CustomResourceDefinitionLister) (*Service, error) {
	body, err := static.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("OpenAPI v2 document: %w", err)
	}
	gz, err := compress(body)
	if err != nil {
		return nil, err
	}
	return &Service{static: gz, crds: crds}, nil
}

// MergeFrom merges the document another /openapi/v2 handler serves into this one's, as
// kube-aggregator merges its delegates' (definitions that differ under one name are renamed,
// paths already present are kept). It is read on every request (with If-None-Match, so an
// unchanged document costs no copy) and must be set before the first.
func (s *Service) MergeFrom(h http.Handler) { s.from = h }

// Placeholder serves an OpenAPI v2 document with info and nothing else, with a fixed ETag: what
// kube-aggregator finds where it would otherwise download, parse and keep the built-in document
// (see the package documentation).
func Placeholder(info *spec.Info) http.Handler {
	svc := handler.NewOpenAPIService(&spec.Swagger{SwaggerProps: spec.SwaggerProps{Swagger: "2.0", Info: info,
		Paths: &spec.Paths{Paths: map[string]spec.PathItem{}}}})
	mux := http.NewServeMux()
	svc.RegisterOpenAPIVersionedService(Path, mux)
	return mux
}

// CompressedBytes is what the built-in document takes in memory.
func (s *Service) CompressedBytes() int { return len(s.static) }

// ServeHTTP serves the document as upstream's handler does: the media type the Accept header
// prefers, its ETag (If-None-Match answers 304), gzipped to clients that accept it.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	accept := r.Header.Get("Accept")
	if accept == "" {
		accept = "*/*"
	}
	w.Header().Add("Vary", "Accept")
	w.Header().Add("Vary", "Accept-Encoding")
	for _, clause := range goautoneg.ParseAccept(accept) {
		for _, offer := range []struct{ subType, contentType string }{
			{subTypeJSON, "application/" + subTypeJSON},
			{subTypeProtobufDeprecated, "application/" + subTypeProtobuf},
			{subTypeProtobuf, "application/" + subTypeProtobuf},
		} {
			if (clause.Type != "application" && clause.Type != "*") || (clause.SubType != offer.subType && clause.SubType != "*") {
				continue
			}
			d, body, err := s.body(offer.subType != subTypeJSON)
			if err != nil {
				http.Error(w, fmt.Sprintf("OpenAPI v2 document: %v", err), http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", offer.contentType)
			w.Header().Set("Etag", strconv.Quote(d.etag))
			if acceptsGzip(r) {
				w.Header().Set("Content-Encoding", "gzip")
			} else if body, err = decompress(body); err != nil {
				http.Error(w, fmt.Sprintf("OpenAPI v2 document: %v", err), http.StatusInternalServerError)
				return
			}
			http.ServeContent(w, r, "", d.modified, bytes.NewReader(body))
			return
		}
	}
	w.WriteHeader(http.StatusNotAcceptable)
}

// body returns the current document and its gzipped JSON or protobuf, merging first if the
// established CRDs or the merged-in document changed since the last merge. A failed merge
// leaves the last good document served, as upstream's handler does; with none there is nothing
// to serve.
func (s *Service) body(proto bool) (*document, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refresh(); err != nil && s.current == nil {
		return nil, nil, err
	}
	if !proto {
		return s.current, s.current.json, nil
	}
	if s.current.proto == nil {
		// Rarely asked for (kubectl and client-go read v3 or JSON): made once per document.
		body, err := decompress(s.current.json)
		if err != nil {
			return nil, nil, err
		}
		pb, err := handler.ToProtoBinary(body)
		if err != nil {
			return nil, nil, err
		}
		if s.current.proto, err = compress(pb); err != nil {
			return nil, nil, err
		}
	}
	return s.current, s.current.proto, nil
}

// refresh merges a new current document if what it is made of changed.
func (s *Service) refresh() error {
	crds, fingerprint, err := s.established()
	if err != nil {
		return err
	}
	var from []byte
	var fromETag string
	if s.from != nil {
		lastETag := ""
		if s.current != nil {
			lastETag = s.current.mergedETag
		}
		if from, fromETag, err = s.fetch(lastETag); err != nil {
			return err
		}
	}
	if s.current != nil && s.current.fingerprint == fingerprint && s.current.mergedETag == fromETag {
		return nil
	}
	if s.from != nil && from == nil { // unchanged (304), but the CRDs changed: the body is needed
		if from, fromETag, err = s.fetch(""); err != nil {
			return err
		}
	}
	d, err := s.merge(crds, from)
	if err != nil {
		return err
	}
	d.fingerprint, d.mergedETag = fingerprint, fromETag
	s.current = d
	return nil
}

// fetch GETs the merged-in document as JSON, conditionally on ifNoneMatch: a nil body with the
// same ETag if it has not changed.
func (s *Service) fetch(ifNoneMatch string) ([]byte, string, error) {
	req := httptest.NewRequest(http.MethodGet, Path, nil)
	req.Header.Set("Accept", "application/json")
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", strconv.Quote(ifNoneMatch))
	}
	rec := httptest.NewRecorder()
	s.from.ServeHTTP(rec, req)
	switch rec.Code {
	case http.StatusNotModified:
		return nil, ifNoneMatch, nil
	case http.StatusOK:
		etag, err := strconv.Unquote(rec.Header().Get("Etag"))
		if err != nil {
			etag = etagOf(rec.Body.Bytes())
		}
		return rec.Body.Bytes(), etag, nil
	default:
		return nil, "", fmt.Errorf("the merged-in document: %d %s", rec.Code, strings.TrimSpace(rec.Body.String()))
	}
}

// established lists the CRDs whose schemas are published (upstream publishes a CRD once it is
// Established), in name order, and a fingerprint of the set: each one's name, UID and
// generation (a schema change bumps the generation; status updates do not).
func (s *Service) established() ([]*apiextensionsv1.CustomResourceDefinition, string, error) {
	if s.crds == nil {
		return nil, "", nil
	}
	all, err := s.crds.List(labels.Everything())
	if err != nil {
		return nil, "", err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range all {
		if apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
			out = append(out, crd)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	var fp strings.Builder
	for _, crd := range out {
		fmt.Fprintf(&fp, "%s/%s/%d;", crd.Name, crd.UID, crd.Generation)
	}
	return out, fp.String(), nil
}

// merge builds the document: the built-in part decoded from its compressed JSON, each CRD's
// served versions as apiextensions' OpenAPI controller builds them, and the JSON document from,
// if not nil, as kube-aggregator merges.
func (s *Service) merge(crds []*apiextensionsv1.CustomResourceDefinition, from []byte) (*document, error) {
	raw, err := decompress(s.static)
	if err != nil {
		return nil, err
	}
	static := &spec.Swagger{}
	if err := static.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("built-in document: %w", err)
	}
	raw = nil
	opts := builder.Options{V2: true,
		IncludeSelectableFields: utilfeature.DefaultFeatureGate.Enabled(apiextensionsfeatures.CustomResourceFieldSelectors)}
	specs := make([]*spec.Swagger, 0, len(crds))
	for _, crd := range crds {
		merged := &spec.Swagger{}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			one, err := builder.BuildOpenAPIV2(crd, v.Name, opts)
			if err != nil {
				return nil, fmt.Errorf("CustomResourceDefinition %s version %s: %w", crd.Name, v.Name, err)
			}
			one.Definitions = handler.PruneDefaults(one.Definitions)
			if merged, err = builder.MergeSpecs(merged, one); err != nil {
				return nil, fmt.Errorf("CustomResourceDefinition %s: %w", crd.Name, err)
			}
		}
		specs = append(specs, merged)
	}
	all, err := builder.MergeSpecs(static, specs...)
	if err != nil {
		return nil, fmt.Errorf("merge the custom resources' documents: %w", err)
	}
	if from != nil {
		other := &spec.Swagger{}
		if err := other.UnmarshalJSON(from); err != nil {
			return nil, fmt.Errorf("the merged-in document: %w", err)
		}
		if err := aggregator.MergeSpecsIgnorePathConflictRenamingDefinitionsAndParameters(all, other); err != nil {
			return nil, fmt.Errorf("merge the merged-in document: %w", err)
		}
	}
	body, err := all.MarshalJSON()
	if err != nil {
		return nil, err
	}
	gz, err := compress(body)
	if err != nil {
		return nil, err
	}
	return &document{json: gz, etag: etagOf(body), modified: time.Now()}, nil
}

func acceptsGzip(r *http.Request) bool {
	for _, clause := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(clause), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") {
			return strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0"
		}
	}
	return false
}

func compress(body []byte) ([]byte, error) {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(body); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil
}

func decompress(gz []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// etagOf hashes a body as upstream's handler does (SHA-512, upper-case hex).
func etagOf(body []byte) string { return fmt.Sprintf("%X", sha512.Sum512(body)) }
