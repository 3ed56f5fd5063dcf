package apiserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"testing"
)

const (
	acceptKubectl127 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
	acceptKubectl130 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList," +
		"application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
	v2ContentType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
)

func TestWantsV2beta1Only(t *testing.T) {
	for _, tc := range []struct {
		accept string
		want   bool
	}{
		{acceptKubectl127, true},
		{"application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList", true},
		{"application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", true},
		{acceptKubectl130, false},
		{"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json", false},
		{"application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList," +
			"application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList", false},
		{"application/json", false},
		{"*/*", false},
		{"", false},
		// Table and other "as=" kinds are not discovery.
		{"application/json;as=Table;v=v1;g=meta.k8s.io,application/json", false},
	} {
		if got := wantsV2beta1Only(tc.accept); got != tc.want {
			t.Errorf("wantsV2beta1Only(%q) = %v, want %v", tc.accept, got, tc.want)
		}
	}
}

// discoveryDoc is a v2 aggregated discovery document as the generic API server serves it.
const discoveryDoc = `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},` +
	`"items":[{"metadata":{"name":"apps","creationTimestamp":null},"versions":[{"version":"v1","resources":` +
	`[{"resource":"deployments","responseKind":{"group":"","version":"","kind":"Deployment"},"scope":"Namespaced",` +
	`"singularResource":"deployment","verbs":["get","list"]}],"freshness":"Current"}]}]}`

// backend stands in for the generic API server's discovery handler: it answers v2 discovery on
// /api and /apis when asked for it, and echoes anything else.
type backend struct {
	accepts []string
	status  int
	ctype   string
	body    string
}

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.accepts = append(b.accepts, r.Header.Get("Accept"))
	w.Header().Set("ETag", `"abc123"`)
	w.Header().Set("Vary", "Accept")
	ctype, body, status := "application/json", `{"kind":"APIResourceList","groupVersion":"apps/v1"}`, http.StatusOK
	if (r.URL.Path == "/api" || r.URL.Path == "/apis") && r.Header.Get("Accept") == v2ContentType {
		ctype, body = v2ContentType, discoveryDoc
	}
	if b.ctype != "" {
		ctype = b.ctype
	}
	if b.body != "" {
		body = b.body
	}
	if b.status != 0 {
		status = b.status
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

func serve(h http.Handler, path, accept string) (*httptest.ResponseRecorder, *http.Request) {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w, r
}

func TestDiscoveryV2beta1(t *testing.T) {
	for _, path := range []string{"/api", "/apis"} {
		t.Run(path, func(t *testing.T) {
			b := &backend{}
			w, r := serve(withDiscoveryV2beta1(b), path, acceptKubectl127)
			if len(b.accepts) != 1 || b.accepts[0] != v2ContentType {
				t.Errorf("backend was asked for %q, want v2", b.accepts)
			}
			if got := r.Header.Get("Accept"); got != acceptKubectl127 {
				t.Errorf("the caller's request was changed: Accept %q", got)
			}
			if w.Code != http.StatusOK {
				t.Fatalf("status %d", w.Code)
			}
			if got := w.Header().Get("Content-Type"); got != "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList" {
				t.Errorf("Content-Type = %q", got)
			}
			var got, want map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatalf("body %q: %v", w.Body.String(), err)
			}
			if got["apiVersion"] != "apidiscovery.k8s.io/v2beta1" {
				t.Errorf("apiVersion = %v", got["apiVersion"])
			}
			if err := json.Unmarshal([]byte(discoveryDoc), &want); err != nil {
				t.Fatal(err)
			}
			want["apiVersion"] = "apidiscovery.k8s.io/v2beta1"
			if !reflect.DeepEqual(got, want) {
				t.Errorf("document changed beyond apiVersion:\n got %v\nwant %v", got, want)
			}
			if w.Header().Get("ETag") != `"abc123"` || w.Header().Get("Vary") != "Accept" {
				t.Errorf("headers not copied: %v", w.Header())
			}
			if cl := w.Header().Get("Content-Length"); cl == strconv.Itoa(len(discoveryDoc)) {
				t.Errorf("stale Content-Length %s for a %d-byte body", cl, w.Body.Len())
			}
		})
	}
}

func TestDiscoveryPassThrough(t *testing.T) {
	for _, tc := range []struct {
		name, path, accept string
	}{
		{name: "group version path", path: "/apis/apps/v1", accept: acceptKubectl127},
		{name: "v2 client", path: "/apis", accept: acceptKubectl130},
		{name: "v2 only", path: "/apis", accept: v2ContentType},
		{name: "legacy discovery", path: "/api", accept: "application/json"},
		{name: "no Accept", path: "/apis"},
		{name: "sub path", path: "/apis/", accept: acceptKubectl127},
		{name: "resource path", path: "/api/v1/pods", accept: acceptKubectl127},
	} {
		t.Run(tc.name, func(t *testing.T) {
			direct, _ := serve(&backend{}, tc.path, tc.accept)
			b := &backend{}
			w, _ := serve(withDiscoveryV2beta1(b), tc.path, tc.accept)
			if len(b.accepts) != 1 || b.accepts[0] != tc.accept {
				t.Errorf("backend saw Accept %q, want the client's %q", b.accepts, tc.accept)
			}
			if w.Code != direct.Code || w.Body.String() != direct.Body.String() || !reflect.DeepEqual(w.Header(), direct.Header()) {
				t.Errorf("response changed:\n got %d %v %s\nwant %d %v %s", w.Code, w.Header(), w.Body, direct.Code, direct.Header(), direct.Body)
			}
		})
	}
}

func TestDiscoveryV2beta1Fallbacks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backend backend
		ctype   string
	}{
		// Errors and caching answers pass as they are.
		{name: "not modified", backend: backend{status: http.StatusNotModified, body: " "}, ctype: v2ContentType},
		{name: "not acceptable", backend: backend{status: http.StatusNotAcceptable, ctype: "application/json", body: `{"kind":"Status"}`},
			ctype: "application/json"},
		// A body that is not the JSON document (say, compressed) is not rewritten.
		{name: "undecodable body", backend: backend{body: "\x1f\x8b\x08garbage"}, ctype: v2ContentType},
		// The backend fell back to something other than v2.
		{name: "plain JSON answer", backend: backend{ctype: "application/json", body: `{"kind":"APIGroupList","apiVersion":"v1"}`},
			ctype: "application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.backend
			w, _ := serve(withDiscoveryV2beta1(&b), "/apis", acceptKubectl127)
			wantStatus := b.status
			if wantStatus == 0 {
				wantStatus = http.StatusOK
			}
			if w.Code != wantStatus {
				t.Errorf("status %d, want %d", w.Code, wantStatus)
			}
			if got := w.Header().Get("Content-Type"); got != tc.ctype {
				t.Errorf("Content-Type = %q, want %q", got, tc.ctype)
			}
			if w.Code != http.StatusNotModified && w.Body.String() != b.body {
				t.Errorf("body = %q, want %q unchanged", w.Body.String(), b.body)
			}
		})
	}
}
