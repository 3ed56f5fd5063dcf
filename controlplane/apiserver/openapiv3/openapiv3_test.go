package openapiv3

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// testDocument makes a small but real OpenAPI v3 document: one path, one schema.
func testDocument(kind, description string) *spec3.OpenAPI {
	return &spec3.OpenAPI{
		Version: "3.0.0",
		Info:    &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: "v1.37.2"}},
		Paths: &spec3.Paths{Paths: map[string]*spec3.Path{
			"/apis/example.com/v1/" + strings.ToLower(kind) + "s": {PathProps: spec3.PathProps{
				Description: "list " + kind,
				Get: &spec3.Operation{OperationProps: spec3.OperationProps{OperationId: "list" + kind, Tags: []string{"example_v1"},
					Responses: &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{
						200: {ResponseProps: spec3.ResponseProps{Description: "OK"}}}}}}},
			}},
		}},
		Components: &spec3.Components{Schemas: map[string]*spec.Schema{
			"com.example.v1." + kind: {SchemaProps: spec.SchemaProps{
				Type: []string{"object"}, Description: description,
				Properties: map[string]spec.Schema{"size": {SchemaProps: spec.SchemaProps{Type: []string{"integer"}, Format: "int32"}}},
			}},
		}},
	}
}

// fixture is upstream's handler serving one group-version, and a Service snapshotted from it.
func fixture(t *testing.T) (upstream, ours http.Handler, s *Service) {
	t.Helper()
	up := handler3.NewOpenAPIService()
	up.UpdateGroupVersion("apis/example.com/v1", testDocument("Widget", "A widget."))
	up.UpdateGroupVersion("api/v1", testDocument("Gadget", "A gadget."))
	upMux := mux.NewPathRecorderMux("upstream")
	if err := up.RegisterOpenAPIV3VersionedService(Path, upMux); err != nil {
		t.Fatal(err)
	}
	s = New()
	if err := s.Add(upMux); err != nil {
		t.Fatal(err)
	}
	ourMux := mux.NewPathRecorderMux("ours")
	s.Install(ourMux)
	return upMux, ourMux, s
}

func serve(h http.Handler, target string, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestServesWhatUpstreamServes compares every response for a fixed group-version with
// upstream's handler's, byte for byte, for each media type and caching header a client sends.
func TestServesWhatUpstreamServes(t *testing.T) {
	upstream, ours, s := fixture(t)
	if got := s.GroupVersions(); strings.Join(got, ",") != "api/v1,apis/example.com/v1" {
		t.Fatalf("group-versions %v", got)
	}
	etag := serve(upstream, Path+"/apis/example.com/v1", map[string]string{"Accept": "application/json"}).Header().Get("Etag")
	if etag == "" {
		t.Fatal("upstream sent no ETag")
	}
	hash := strings.Trim(etag, `"`)
	for _, c := range []struct {
		name   string
		target string
		header map[string]string
	}{
		{"json", "/apis/example.com/v1", map[string]string{"Accept": "application/json"}},
		{"core group", "/api/v1", map[string]string{"Accept": "application/json"}},
		{"protobuf", "/apis/example.com/v1", map[string]string{"Accept": "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"}},
		{"deprecated protobuf name", "/apis/example.com/v1", map[string]string{"Accept": "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"}},
		{"any", "/apis/example.com/v1", map[string]string{"Accept": "*/*"}},
		{"no Accept", "/apis/example.com/v1", nil},
		{"preference order", "/apis/example.com/v1", map[string]string{"Accept": "application/com.github.proto-openapi.spec.v3.v1.0+protobuf;q=0.5, application/json"}},
		{"not acceptable", "/apis/example.com/v1", map[string]string{"Accept": "text/html"}},
		{"current hash", "/apis/example.com/v1?hash=" + hash, map[string]string{"Accept": "application/json"}},
		{"stale hash", "/apis/example.com/v1?hash=0123", map[string]string{"Accept": "application/json"}},
		{"If-None-Match", "/apis/example.com/v1", map[string]string{"Accept": "application/json", "If-None-Match": etag}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := serve(upstream, Path+c.target, c.header)
			got := serve(ours, Path+c.target, c.header)
			if got.Code != want.Code {
				t.Fatalf("status %d, upstream %d: %s", got.Code, want.Code, got.Body.String())
			}
			if got.Body.String() != want.Body.String() {
				t.Errorf("body differs from upstream's (%d and %d bytes)", got.Body.Len(), want.Body.Len())
			}
			for _, h := range []string{"Content-Type", "Etag", "Cache-Control", "Location", "Vary"} {
				if got.Header().Get(h) != want.Header().Get(h) {
					t.Errorf("%s %q, upstream %q", h, got.Header().Get(h), want.Header().Get(h))
				}
			}
		})
	}
}

// TestDiscoveryListsFixedAndDynamic checks that /openapi/v3 lists the fixed group-versions with
// upstream's URLs and the custom resources' as they come and change.
func TestDiscoveryListsFixedAndDynamic(t *testing.T) {
	upstream, ours, s := fixture(t)
	discovery := func(h http.Handler) handler3.OpenAPIV3Discovery {
		t.Helper()
		rec := serve(h, Path, nil)
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Etag") == "" {
			t.Fatalf("discovery: %d %v", rec.Code, rec.Header())
		}
		var d handler3.OpenAPIV3Discovery
		if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	want := discovery(upstream)
	got := discovery(ours)
	if len(got.Paths) != 2 {
		t.Fatalf("discovery lists %v", got.Paths)
	}
	for gv, u := range want.Paths {
		if got.Paths[gv] != u {
			t.Errorf("%s: %q, upstream %q", gv, got.Paths[gv].ServerRelativeURL, u.ServerRelativeURL)
		}
	}

	// A custom resource's group appears, is served by the dynamic service, and its URL
	// follows its changes.
	s.Dynamic.UpdateGroupVersion("apis/stable.example.com/v1", testDocument("CronTab", "A crontab."))
	first := discovery(ours).Paths["apis/stable.example.com/v1"].ServerRelativeURL
	if !strings.HasPrefix(first, Path+"/apis/stable.example.com/v1?hash=") {
		t.Fatalf("custom resource group listed as %q", first)
	}
	rec := serve(ours, first, map[string]string{"Accept": "application/json"})
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "A crontab.") {
		t.Fatalf("custom resource document: %d %s", rec.Code, rec.Body.String())
	}
	s.Dynamic.UpdateGroupVersion("apis/stable.example.com/v1", testDocument("CronTab", "A crontab, changed."))
	second := discovery(ours).Paths["apis/stable.example.com/v1"].ServerRelativeURL
	if second == first {
		t.Error("the custom resource group's URL did not change with its document")
	}
	if rec := serve(ours, first, map[string]string{"Accept": "application/json"}); rec.Code != http.StatusMovedPermanently {
		t.Errorf("the stale URL: %d, want a redirect", rec.Code)
	}
	s.Dynamic.DeleteGroupVersion("apis/stable.example.com/v1")
	if _, ok := discovery(ours).Paths["apis/stable.example.com/v1"]; ok {
		t.Error("a deleted custom resource group is still listed")
	}
}

// TestKeepsDocumentsCompressed checks what the point is: the fixed documents take less memory
// than their JSON.
func TestKeepsDocumentsCompressed(t *testing.T) {
	upstream, _, s := fixture(t)
	plain := 0
	for _, gv := range s.GroupVersions() {
		plain += serve(upstream, Path+"/"+gv, map[string]string{"Accept": "application/json"}).Body.Len()
	}
	if s.CompressedBytes() <= 0 || s.CompressedBytes() >= plain {
		t.Errorf("%d compressed bytes for %d bytes of JSON", s.CompressedBytes(), plain)
	}
}

// TestAddErrors checks that a source that cannot serve its documents is an error naming
// what failed, not an empty service.
func TestAddErrors(t *testing.T) {
	broken := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == Path {
			_, _ = w.Write([]byte(`{"paths":{"apis/example.com/v1":{"serverRelativeURL":"/openapi/v3/apis/example.com/v1?hash=1"}}}`))
			return
		}
		http.Error(w, "builder failed", http.StatusInternalServerError)
	})
	if err := New().Add(broken); err == nil || !strings.Contains(err.Error(), "apis/example.com/v1: 500 builder failed") {
		t.Errorf("error %v", err)
	}
	garbage := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("not json")) })
	if err := New().Add(garbage); err == nil || !strings.Contains(err.Error(), Path) {
		t.Errorf("error %v", err)
	}
}
