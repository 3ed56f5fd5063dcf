package registry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSplitProxyName(t *testing.T) {
	for _, tc := range []struct {
		id, scheme, name, port string
		err                    bool
	}{
		{id: "web", scheme: "http", name: "web"},
		{id: "web:8080", scheme: "http", name: "web", port: "8080"},
		{id: "web:http", scheme: "http", name: "web", port: "http"},
		{id: "https:web:443", scheme: "https", name: "web", port: "443"},
		{id: ":web:80", scheme: "http", name: "web", port: "80"},
		{id: "ftp:web:21", err: true},
		{id: "a:b:c:d", err: true},
	} {
		scheme, name, port, err := splitProxyName(tc.id)
		if (err != nil) != tc.err || (!tc.err && (scheme != tc.scheme || name != tc.name || port != tc.port)) {
			t.Errorf("splitProxyName(%q) = %q %q %q %v", tc.id, scheme, name, port, err)
		}
	}
}

func TestPodProxyPort(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "a"}, {Name: "b", Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}}}}}}
	for port, want := range map[string]int{"": 8080, "81": 81, "web": 8080, "metrics": 9090} {
		if got, err := podProxyPort(pod, port); err != nil || got != want {
			t.Errorf("podProxyPort(%q) = %d, %v; want %d", port, got, err, want)
		}
	}
	for _, bad := range []string{"nope", "0", "70000"} {
		if _, err := podProxyPort(pod, bad); err == nil {
			t.Errorf("podProxyPort(%q) accepted", bad)
		}
	}
	if got, _ := podProxyPort(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}}, ""); got != 80 {
		t.Errorf("no container ports: %d, want 80", got)
	}
}

func TestServiceBackend(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Name: "http", Port: 80}, {Name: "admin", Port: 81}}}}
	eps := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "10.244.1.5"}},
		Ports:     []corev1.EndpointPort{{Name: "http", Port: 8080}, {Name: "admin", Port: 9000}}}}}
	for port, want := range map[string]string{"http": "10.244.1.5:8080", "80": "10.244.1.5:8080", "admin": "10.244.1.5:9000", "81": "10.244.1.5:9000"} {
		if got, err := serviceBackend(svc, eps, port); err != nil || got != want {
			t.Errorf("serviceBackend(%q) = %q, %v; want %q", port, got, err, want)
		}
	}
	if _, err := serviceBackend(svc, eps, ""); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("no port named on a two-port Service: %v", err)
	}
	one := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "one"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	oneEps := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.244.1.6"}}, Ports: []corev1.EndpointPort{{Port: 8080}}}}}
	if got, err := serviceBackend(one, oneEps, ""); err != nil || got != "10.244.1.6:8080" {
		t.Errorf("the only port: %q %v", got, err)
	}
	if _, err := serviceBackend(one, &corev1.Endpoints{}, ""); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("no endpoints: %v", err)
	}
}

func TestProxyPath(t *testing.T) {
	for in, want := range map[string]string{"": "", "/": "/", "hostname": "/hostname", "/a/b": "/a/b"} {
		if got := proxyPath(in); got != want {
			t.Errorf("proxyPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// Links in HTML a backend returns go through the proxy again, as upstream's proxy rewrites
// them (the conformance "Proxy version v1" specs check it).
func TestProxyRewritesLinks(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, `<a href="/rewriteme">test</a>`)
	}))
	defer backend.Close()
	loc, _ := url.Parse(backend.URL + "/")
	h := proxyTo(loc, nil)
	req := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/ns/pods/p:80/proxy/", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if got, want := rec.Body.String(), `<a href="/api/v1/namespaces/ns/pods/p:80/proxy/rewriteme">test</a>`; got != want {
		t.Errorf("proxied page %q, want %q", got, want)
	}
}
