package restfultrim

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	restful "github.com/emicklei/go-restful/v3"
)

// newContainer routes as the generic API server's does: CurlyRouter, paths with variables,
// a catch-all and a custom verb, documented parameters.
func newContainer() *restful.Container {
	c := restful.NewContainer()
	c.Router(restful.CurlyRouter{})
	reply := func(what string) restful.RouteFunction {
		return func(req *restful.Request, resp *restful.Response) {
			params := req.PathParameters()
			io.WriteString(resp, what+" ns="+params["namespace"]+" name="+params["name"]+" path="+params["path"])
		}
	}
	ws := new(restful.WebService).Path("/api/v1").Produces(restful.MIME_JSON)
	ws.Route(ws.GET("/namespaces/{namespace}/pods").To(reply("list")).
		Param(ws.QueryParameter("labelSelector", "selects")).Returns(200, "OK", nil))
	ws.Route(ws.GET("/namespaces/{namespace}/pods/{name}").To(reply("get")).
		Param(ws.PathParameter("name", "the pod")))
	ws.Route(ws.POST("/namespaces/{namespace}/pods").To(reply("create")).Consumes(restful.MIME_JSON))
	ws.Route(ws.GET("/nodes/{name}/proxy/{path:*}").To(reply("proxy")))
	c.Add(ws)
	apps := new(restful.WebService).Path("/apis/apps/v1")
	apps.Route(apps.GET("/deployments").To(reply("deployments")))
	c.Add(apps)
	return c
}

func serve(t *testing.T, c *restful.Container, method, path string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader("{}"))
	req.Header.Set("Content-Type", restful.MIME_JSON)
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// TestReleaseKeepsRouting checks that every request is routed, with the same path parameters,
// after Release as before, and that the expressions and documentation are gone. It also fails
// when go-restful's unexported layout changes under a dependency bump.
func TestReleaseKeepsRouting(t *testing.T) {
	requests := []struct{ method, path string }{
		{"GET", "/api/v1/namespaces/default/pods"},
		{"GET", "/api/v1/namespaces/default/pods/web-0"},
		{"POST", "/api/v1/namespaces/kube-system/pods"},
		{"GET", "/api/v1/nodes/n1/proxy/metrics/cadvisor"},
		{"GET", "/apis/apps/v1/deployments"},
		{"DELETE", "/api/v1/namespaces/default/pods/web-0"}, // 405
		{"GET", "/api/v1/nothing"},                          // 404
	}
	c := newContainer()
	type answer struct {
		code int
		body string
	}
	before := map[string]answer{}
	for _, r := range requests {
		code, body := serve(t, c, r.method, r.path)
		before[r.method+" "+r.path] = answer{code, body}
	}
	if got := before["GET /api/v1/namespaces/default/pods/web-0"].body; got != "get ns=default name=web-0 path=" {
		t.Fatalf("before Release, the get route answered %q", got)
	}

	st, err := Release(c)
	if err != nil {
		t.Fatal(err)
	}
	if st.Routes != 5 || st.Expressions != 5 {
		t.Errorf("Release dropped %d expressions of %d routes, want 5 of 5", st.Expressions, st.Routes)
	}
	for _, ws := range c.RegisteredWebServices() {
		for _, r := range ws.Routes() {
			if r.ParameterDocs != nil || r.ResponseErrors != nil {
				t.Errorf("%s %s keeps its documentation", r.Method, r.Path)
			}
			m, err := matcherOf(&r)
			if err != nil {
				t.Fatal(err)
			}
			if *m != neverMatches {
				t.Errorf("%s %s keeps its expression %v", r.Method, r.Path, *m)
			}
		}
	}
	for _, r := range requests {
		code, body := serve(t, c, r.method, r.path)
		if want := before[r.method+" "+r.path]; code != want.code || body != want.body {
			t.Errorf("%s %s: after Release %d %q, before %d %q", r.method, r.path, code, body, want.code, want.body)
		}
	}

	// Once more changes nothing and counts no expression twice.
	st, err = Release(c)
	if err != nil || st.Expressions != 0 || st.Routes != 5 {
		t.Errorf("second Release: %+v, %v", st, err)
	}
}

// TestReleaseRefusesJSR311 checks that a container whose router matches routes by their
// expressions is left alone.
func TestReleaseRefusesJSR311(t *testing.T) {
	c := restful.NewContainer()
	c.Router(restful.RouterJSR311{})
	ws := new(restful.WebService).Path("/x")
	ws.Route(ws.GET("/{name}").To(func(*restful.Request, *restful.Response) {}).Param(ws.PathParameter("name", "")))
	c.Add(ws)
	if _, err := Release(c); err == nil || !strings.Contains(err.Error(), "not CurlyRouter") {
		t.Fatalf("Release on a JSR-311 container: %v", err)
	}
	r := c.RegisteredWebServices()[0].Routes()[0]
	m, err := matcherOf(&r)
	if err != nil {
		t.Fatal(err)
	}
	if *m == neverMatches || len(r.ParameterDocs) != 1 {
		t.Error("Release changed a container it refused")
	}
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x/y", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("JSR-311 container answers %d after a refused Release", rec.Code)
	}
}
