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
package openapiv2

import (
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"fmt"
	"io"
	"net/http"
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
// the first request for it), the ETag (the JSON's hash, as upstream's) and when it was built.
type document struct {
	fingerprint string
	json        []byte
	proto       []byte
	etag        string
	modified    time.Time
}

// Service serves /openapi/v2: the built-in document merged with every established CRD's.
type Service struct {
	static []byte // the built-in document, gzipped JSON
	crds   listers.CustomResourceDefinitionLister

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
// established CRDs changed since the last merge. A failed merge leaves the last good document
// served, as upstream's handler does; with none there is nothing to serve.
func (s *Service) body(proto bool) (*document, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	crds, fingerprint, err := s.established()
	if err == nil && (s.current == nil || s.current.fingerprint != fingerprint) {
		var d *document
		if d, err = s.merge(crds, fingerprint); err == nil {
			s.current = d
		}
	}
	if s.current == nil {
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

// merge builds the document: the built-in part decoded from its compressed JSON, and each CRD's
// served versions as apiextensions' OpenAPI controller builds them.
func (s *Service) merge(crds []*apiextensionsv1.CustomResourceDefinition, fingerprint string) (*document, error) {
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
	body, err := all.MarshalJSON()
	if err != nil {
		return nil, err
	}
	gz, err := compress(body)
	if err != nil {
		return nil, err
	}
	return &document{fingerprint: fingerprint, json: gz, etag: etagOf(body), modified: time.Now()}, nil
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
