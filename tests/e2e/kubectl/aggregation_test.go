package kubectl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// extensionServer is a minimal extension API server for wardle.example.com/v1alpha1 on
// loopback: it serves the group version's discovery and a list of flunders, and accepts only
// requests from a client certificate of the front-proxy CA it is given, recording the user
// the aggregator says it acts for.
type extensionServer struct {
	addr  string
	caPEM []byte

	mu    sync.Mutex
	users []string
}

func startExtensionServer(t *testing.T, frontProxyCA []byte) *extensionServer {
	t.Helper()
	pair := framework.NewServingPair(t, []string{"wardle.default.svc"}, []net.IP{net.ParseIP("127.0.0.1")})
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(frontProxyCA) {
		t.Fatal("no front-proxy CA in extension-apiserver-authentication")
	}
	e := &extensionServer{caPEM: pair.CAPEM}
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("/apis/wardle.example.com/v1alpha1", func(w http.ResponseWriter, r *http.Request) {
		reply(w, metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: "wardle.example.com/v1alpha1", APIResources: []metav1.APIResource{{Name: "flunders", SingularName: "flunder",
				Namespaced: true, Kind: "Flunder", Verbs: metav1.Verbs{"get", "list"}}}})
	})
	mux.HandleFunc("/apis/wardle.example.com/v1alpha1/namespaces/default/flunders", func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.users = append(e.users, r.Header.Get("X-Remote-User")+"|"+strings.Join(r.Header.Values("X-Remote-Group"), ","))
		e.mu.Unlock()
		reply(w, map[string]any{"kind": "FlunderList", "apiVersion": "wardle.example.com/v1alpha1", "metadata": map[string]any{},
			"items": []any{map[string]any{"kind": "Flunder", "apiVersion": "wardle.example.com/v1alpha1",
				"metadata": map[string]any{"name": "fluffy", "namespace": "default", "creationTimestamp": time.Now().UTC().Format(time.RFC3339)}}}})
	})
	// Its OpenAPI v2 document, which the aggregator merges into /openapi/v2.
	mux.HandleFunc("/openapi/v2", func(w http.ResponseWriter, r *http.Request) {
		reply(w, map[string]any{"swagger": "2.0", "info": map[string]any{"title": "wardle", "version": "v1alpha1"},
			"paths": map[string]any{"/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders": map[string]any{
				"get": map[string]any{"operationId": "listWardleV1alpha1NamespacedFlunder", "responses": map[string]any{
					"200": map[string]any{"description": "OK", "schema": map[string]any{"$ref": "#/definitions/com.example.wardle.v1alpha1.Flunder"}}}}}},
			"definitions": map[string]any{"com.example.wardle.v1alpha1.Flunder": map[string]any{
				"type": "object", "description": "A flunder, as the extension server describes it."}}})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = ln.Addr().String()
	srv := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair.TLS(t)},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
		VerifyPeerCertificate: func(_ [][]byte, chains [][]*x509.Certificate) error {
			if len(chains) == 0 || chains[0][0].Subject.CommonName != "front-proxy-client" {
				return fmt.Errorf("not the front proxy")
			}
			return nil
		}}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return e
}

// TestAggregationLayer registers an extension API server with an APIService through its
// Service (no selector; an EndpointSlice to the test's loopback server) and uses it with the
// real kubectl: the APIService turns Available, its group is in discovery, `kubectl get
// flunders` is proxied to it with the front-proxy client certificate and the user's name, and
// an APIService whose Service has no endpoints says so. Every built-in group is a local
// APIService.
func TestAggregationLayer(t *testing.T) {
	s := framework.StartServer(t)
	kc := framework.Kubectl(t, 33)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := runner(ctx, t, s, kc)
	client := s.Client(t)

	containsAll(t, run(false, "get", "apiservices"), "v1.apps", "Local", "v1.apiextensions.k8s.io", "v1beta1.metrics.k8s.io", "v2.autoscaling")
	auth, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if auth.Data["requestheader-allowed-names"] != `["front-proxy-client"]` || !strings.Contains(auth.Data["client-ca-file"], "BEGIN CERTIFICATE") {
		t.Errorf("extension-apiserver-authentication: %v", auth.Data)
	}
	ext := startExtensionServer(t, []byte(auth.Data["requestheader-client-ca-file"]))
	_, port, _ := net.SplitHostPort(ext.addr)
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: wardle, namespace: default}
spec:
  ports: [{port: 443, targetPort: %[1]s}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: wardle-1
  namespace: default
  labels: {kubernetes.io/service-name: wardle}
addressType: IPv4
ports: [{name: "", port: %[1]s, protocol: TCP}]
endpoints: [{addresses: [127.0.0.1], conditions: {ready: true}}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1alpha1.wardle.example.com}
spec:
  group: wardle.example.com
  version: v1alpha1
  groupPriorityMinimum: 2000
  versionPriority: 100
  service: {namespace: default, name: wardle, port: 443}
  caBundle: %[2]s
---
apiVersion: v1
kind: Service
metadata: {name: nowhere, namespace: default}
spec:
  ports: [{port: 443}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.nowhere.example.com}
spec:
  group: nowhere.example.com
  version: v1
  groupPriorityMinimum: 2000
  versionPriority: 100
  service: {namespace: default, name: nowhere}
  insecureSkipTLSVerify: true
`, port, base64.StdEncoding.EncodeToString(ext.caPEM))
	f := filepath.Join(t.TempDir(), "wardle.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	run(false, "apply", "-f", f)

	framework.Eventually(t, 60*time.Second, "the wardle APIService Available", func() (bool, string) {
		out := run(false, "get", "apiservice", "v1alpha1.wardle.example.com")
		return strings.Contains(out, "default/wardle") && strings.Contains(out, "True"), out
	})
	framework.Eventually(t, 30*time.Second, "kubectl get flunders through the aggregator", func() (bool, string) {
		out, err := s.Run(ctx, kc, "get", "flunders")
		return err == nil && strings.Contains(out, "fluffy"), out
	})
	containsAll(t, run(false, "api-resources", "--api-group=wardle.example.com"), "flunders", "wardle.example.com/v1alpha1", "Flunder")
	// /openapi/v2 has the extension server's schema beside the built-in types', the
	// aggregator's own and apiextensions'.
	framework.Eventually(t, 60*time.Second, "the extension server's schema in /openapi/v2", func() (bool, string) {
		out, err := s.Run(ctx, kc, "get", "--raw", "/openapi/v2")
		for _, want := range []string{"A flunder, as the extension server describes it.", `"/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders"`,
			`"io.k8s.api.core.v1.Pod"`, `"io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService"`,
			`"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"`} {
			if err != nil || !strings.Contains(out, want) {
				return false, fmt.Sprintf("no %s in %.300s", want, out)
			}
		}
		return true, ""
	})
	ext.mu.Lock()
	users := append([]string(nil), ext.users...)
	ext.mu.Unlock()
	if len(users) == 0 || !strings.HasPrefix(users[0], "kubernetes-admin|") || !strings.Contains(users[0], "system:masters") {
		t.Errorf("the extension server was told the user %v, want kubernetes-admin in system:masters", users)
	}
	framework.Eventually(t, 60*time.Second, "the endpoint-less APIService not Available, saying why", func() (bool, string) {
		out := run(false, "get", "apiservice", "v1.nowhere.example.com", "-o", "jsonpath={.status.conditions[0].status}/{.status.conditions[0].reason}")
		return strings.HasPrefix(out, "False/"), out
	})
	if out, err := s.Run(ctx, kc, "get", "--raw", "/apis/nowhere.example.com/v1"); err == nil || !strings.Contains(out, "503") && !strings.Contains(out, "ServiceUnavailable") {
		t.Errorf("a request to an unavailable APIService: %v\n%s", err, out)
	}
	run(false, "delete", "apiservice", "v1alpha1.wardle.example.com")
	framework.Eventually(t, 30*time.Second, "the wardle group gone from discovery", func() (bool, string) {
		out, _ := s.Run(ctx, kc, "api-resources", "--api-group=wardle.example.com")
		return !strings.Contains(out, "flunders"), out
	})
	framework.Eventually(t, 60*time.Second, "the extension server's schema gone from /openapi/v2", func() (bool, string) {
		out, err := s.Run(ctx, kc, "get", "--raw", "/openapi/v2")
		return err == nil && strings.Contains(out, `"io.k8s.api.core.v1.Pod"`) && !strings.Contains(out, "com.example.wardle.v1alpha1.Flunder"), out[:min(len(out), 300)]
	})
}
