package openapiv2

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	listers "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// testStatic is a small but real built-in document: one path, two definitions (ObjectMeta is
// one a CRD's schema refers to).
func testStatic() *spec.Swagger {
	return &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger: "2.0",
		Info:    &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: "v1.37.2"}},
		Paths: &spec.Paths{Paths: map[string]spec.PathItem{
			"/api/v1/gadgets": {PathItemProps: spec.PathItemProps{Get: &spec.Operation{OperationProps: spec.OperationProps{
				ID: "listGadget", Responses: &spec.Responses{ResponsesProps: spec.ResponsesProps{StatusCodeResponses: map[int]spec.Response{
					200: {ResponseProps: spec.ResponseProps{Description: "OK"}}}}}}}}},
		}},
		Definitions: spec.Definitions{
			"io.k8s.api.core.v1.Gadget":                       {SchemaProps: spec.SchemaProps{Type: []string{"object"}, Description: "A gadget."}},
			"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {SchemaProps: spec.SchemaProps{Type: []string{"object"}}},
		},
	}}
}

func testCRD(description string, generation int64, established bool) *apiextensionsv1.CustomResourceDefinition {
	status := apiextensionsv1.ConditionFalse
	if established {
		status = apiextensionsv1.ConditionTrue
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", UID: types.UID("uid-1"), Generation: generation},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", ListKind: "WidgetList", Plural: "widgets", Singular: "widget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: &apiextensionsv1.CustomResourceValidation{
					OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Description: description,
						Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object",
							Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}}}}}},
				{Name: "v0", Served: false, Storage: false, Schema: &apiextensionsv1.CustomResourceValidation{
					OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}},
			},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.Established, Status: status}}},
	}
}

func get(t *testing.T, h http.Handler, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, Path, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// With no CRDs the document is upstream's handler's, byte for byte, ETag included, in each
// media type, and in both encodings.
func TestServesWhatUpstreamServes(t *testing.T) {
	upMux := mux.NewPathRecorderMux("upstream")
	handler.NewOpenAPIService(testStatic()).RegisterOpenAPIVersionedService(Path, upMux)
	ours, err := New(testStatic(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, accept := range []string{"", "application/json", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
		"application/com.github.proto-openapi.spec.v2.v1.0+protobuf", "text/html, application/json;q=0.5"} {
		want := get(t, upMux, map[string]string{"Accept": accept})
		got := get(t, ours, map[string]string{"Accept": accept})
		if got.Code != http.StatusOK || want.Code != http.StatusOK {
			t.Fatalf("Accept %q: status %d, upstream %d", accept, got.Code, want.Code)
		}
		if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
			t.Errorf("Accept %q: body differs from upstream's (%d vs %d bytes)", accept, got.Body.Len(), want.Body.Len())
		}
		for _, h := range []string{"Etag", "Content-Type"} {
			if got.Header().Get(h) != want.Header().Get(h) {
				t.Errorf("Accept %q: %s %q, upstream %q", accept, h, got.Header().Get(h), want.Header().Get(h))
			}
		}
		zipped := get(t, ours, map[string]string{"Accept": accept, "Accept-Encoding": "gzip"})
		if zipped.Header().Get("Content-Encoding") != "gzip" || !bytes.Equal(gunzip(t, zipped.Body.Bytes()), want.Body.Bytes()) {
			t.Errorf("Accept %q with gzip: Content-Encoding %q, body not the same document", accept, zipped.Header().Get("Content-Encoding"))
		}
	}
	etag := get(t, ours, nil).Header().Get("Etag")
	if rec := get(t, ours, map[string]string{"If-None-Match": etag}); rec.Code != http.StatusNotModified {
		t.Errorf("If-None-Match the current ETag: %d, want 304", rec.Code)
	}
	if rec := get(t, ours, map[string]string{"Accept": "text/html"}); rec.Code != http.StatusNotAcceptable {
		t.Errorf("Accept text/html: %d, want 406", rec.Code)
	}
	if got := ours.CompressedBytes(); got == 0 {
		t.Error("CompressedBytes is 0")
	}
}

// definitions reads the served JSON's definitions.
func definitions(t *testing.T, s *Service) (map[string]spec.Schema, string) {
	t.Helper()
	rec := get(t, s, nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", Path, rec.Code, rec.Body)
	}
	var doc struct {
		Definitions map[string]spec.Schema `json:"definitions"`
		Paths       map[string]any         `json:"paths"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if _, ok := doc.Paths["/api/v1/gadgets"]; !ok {
		t.Fatalf("the built-in path is gone: %v", doc.Paths)
	}
	if _, ok := doc.Definitions["io.k8s.api.core.v1.Gadget"]; !ok {
		t.Fatal("the built-in definition is gone")
	}
	etag, err := strconv.Unquote(rec.Header().Get("Etag"))
	if err != nil {
		t.Fatal(err)
	}
	return doc.Definitions, etag
}

// A CRD's served versions appear once it is Established, change with its generation, and go
// with it; the ETag moves with each, and a status-only update rebuilds nothing.
func TestMergesEstablishedCRDs(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	s, err := New(testStatic(), listers.NewCustomResourceDefinitionLister(indexer))
	if err != nil {
		t.Fatal(err)
	}
	const widget, old = "com.example.v1.Widget", "com.example.v0.Widget"
	_, bare := definitions(t, s)

	if err := indexer.Add(testCRD("A widget.", 1, false)); err != nil {
		t.Fatal(err)
	}
	if defs, etag := definitions(t, s); defs[widget].Description != "" || etag != bare {
		t.Fatalf("a CRD not yet Established is published (ETag moved: %v)", etag != bare)
	}

	if err := indexer.Update(testCRD("A widget.", 1, true)); err != nil {
		t.Fatal(err)
	}
	defs, first := definitions(t, s)
	if defs[widget].Description != "A widget." || first == bare {
		t.Fatalf("established CRD: definition %q, ETag moved %v", defs[widget].Description, first != bare)
	}
	if _, ok := defs[old]; ok {
		t.Error("a version that is not served is published")
	}
	modified := s.current.modified

	// A status update (same generation) keeps the document as it is.
	status := testCRD("A widget.", 1, true)
	status.Status.AcceptedNames = status.Spec.Names
	if err := indexer.Update(status); err != nil {
		t.Fatal(err)
	}
	if _, etag := definitions(t, s); etag != first || !s.current.modified.Equal(modified) {
		t.Error("a status-only update rebuilt the document")
	}

	if err := indexer.Update(testCRD("A bigger widget.", 2, true)); err != nil {
		t.Fatal(err)
	}
	if defs, etag := definitions(t, s); defs[widget].Description != "A bigger widget." || etag == first {
		t.Fatalf("after a schema change: definition %q, ETag moved %v", defs[widget].Description, etag != first)
	}

	if err := indexer.Delete(testCRD("", 2, true)); err != nil {
		t.Fatal(err)
	}
	if defs, etag := definitions(t, s); defs[widget].Description != "" || etag != bare {
		t.Fatalf("after the CRD's deletion: still published %v, ETag back to the bare document's %v", defs[widget].Description != "", etag == bare)
	}
}

// A merge that fails leaves the last good document served; with none yet, 503.
func TestKeepsLastGoodDocument(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	s, err := New(testStatic(), listers.NewCustomResourceDefinitionLister(indexer))
	if err != nil {
		t.Fatal(err)
	}
	_, bare := definitions(t, s)
	s.static = []byte("not gzip") // every merge from now on fails
	if err := indexer.Add(testCRD("A widget.", 1, true)); err != nil {
		t.Fatal(err)
	}
	if _, etag := definitions(t, s); etag != bare {
		t.Error("a failed merge replaced the document")
	}
	s.current = nil
	if rec := get(t, s, nil); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("no document and a failing merge: %d, want 503", rec.Code)
	}
}

// extraDoc is what kube-aggregator serves in the lab: another group's path and definition, and
// a definition the built-in document has too, differently (to be renamed, not to replace it).
func extraDoc(description string) *spec.Swagger {
	return &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger: "2.0",
		Info:    &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: "v1.37.2"}},
		Paths: &spec.Paths{Paths: map[string]spec.PathItem{
			"/apis/wardle.example.com/v1alpha1/flunders": {PathItemProps: spec.PathItemProps{Get: &spec.Operation{OperationProps: spec.OperationProps{
				ID: "listFlunder", Responses: &spec.Responses{ResponsesProps: spec.ResponsesProps{StatusCodeResponses: map[int]spec.Response{
					200: {ResponseProps: spec.ResponseProps{Description: "OK"}}}}}}}}},
		}},
		Definitions: spec.Definitions{
			"com.example.wardle.v1alpha1.Flunder": {SchemaProps: spec.SchemaProps{Type: []string{"object"}, Description: description}},
			"io.k8s.api.core.v1.Gadget":           {SchemaProps: spec.SchemaProps{Type: []string{"object"}, Description: "Another gadget."}},
		},
	}}
}

// The document MergeFrom names is merged in as kube-aggregator merges, and followed: a change
// there moves the ETag, an unchanged one (304) rebuilds nothing, and one that fails to load
// leaves the last good document served.
func TestMergesFrom(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	s, err := New(testStatic(), listers.NewCustomResourceDefinitionLister(indexer))
	if err != nil {
		t.Fatal(err)
	}
	other := handler.NewOpenAPIService(extraDoc("A flunder."))
	otherMux := mux.NewPathRecorderMux("other")
	other.RegisterOpenAPIVersionedService(Path, otherMux)
	failing := false
	s.MergeFrom(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		otherMux.ServeHTTP(w, r)
	}))

	defs, first := definitions(t, s)
	if defs["com.example.wardle.v1alpha1.Flunder"].Description != "A flunder." {
		t.Fatalf("the merged-in definition is missing: %v", defs["com.example.wardle.v1alpha1.Flunder"])
	}
	if defs["io.k8s.api.core.v1.Gadget"].Description != "A gadget." {
		t.Errorf("a conflicting merged-in definition replaced the built-in one: %q", defs["io.k8s.api.core.v1.Gadget"].Description)
	}
	var doc struct{ Paths map[string]any }
	if err := json.Unmarshal(get(t, s, nil).Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if _, ok := doc.Paths["/apis/wardle.example.com/v1alpha1/flunders"]; !ok {
		t.Errorf("the merged-in path is missing: %v", doc.Paths)
	}

	modified := s.current.modified
	if _, etag := definitions(t, s); etag != first || !s.current.modified.Equal(modified) {
		t.Error("an unchanged merged-in document rebuilt the document")
	}

	// The CRDs change while the merged-in document does not (it answers 304): it is read whole.
	if err := indexer.Add(testCRD("A widget.", 1, true)); err != nil {
		t.Fatal(err)
	}
	defs, second := definitions(t, s)
	if defs["com.example.v1.Widget"].Description != "A widget." || defs["com.example.wardle.v1alpha1.Flunder"].Description != "A flunder." || second == first {
		t.Fatalf("after a CRD: widget %q, flunder %q, ETag moved %v", defs["com.example.v1.Widget"].Description,
			defs["com.example.wardle.v1alpha1.Flunder"].Description, second != first)
	}

	if err := other.UpdateSpec(extraDoc("A fluffier flunder.")); err != nil {
		t.Fatal(err)
	}
	defs, third := definitions(t, s)
	if defs["com.example.wardle.v1alpha1.Flunder"].Description != "A fluffier flunder." || third == second {
		t.Fatalf("after the merged-in document changed: %q, ETag moved %v", defs["com.example.wardle.v1alpha1.Flunder"].Description, third != second)
	}

	failing = true
	if _, etag := definitions(t, s); etag != third {
		t.Error("a merged-in document that failed to load replaced the document")
	}
}

// The placeholder is a document with no paths and an ETag that never moves, so kube-aggregator
// keeps next to nothing of it and never downloads it twice.
func TestPlaceholder(t *testing.T) {
	p := Placeholder(testStatic().Info)
	rec := get(t, p, map[string]string{"Accept": "application/json"})
	var doc spec.Swagger
	if err := doc.UnmarshalJSON(rec.Body.Bytes()); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusOK || doc.Swagger != "2.0" || doc.Info.Title != "Kubernetes" || len(doc.Paths.Paths) != 0 || len(doc.Definitions) != 0 {
		t.Fatalf("placeholder: %d %s", rec.Code, rec.Body)
	}
	if again := get(t, p, map[string]string{"If-None-Match": rec.Header().Get("Etag")}); again.Code != http.StatusNotModified {
		t.Errorf("placeholder with its own ETag: %d, want 304", again.Code)
	}
}
