package controlplane

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestEtcdConnectionsShared: the API server's storage for every built-in resource, and for
// custom resources, shares one etcd client. Upstream's storage factory dials etcd once per resource: some sixty
// connections in a skiff server, each with its TLS session, buffers and goroutines at both
// ends. skiff's own keys (allocators, API server leases) use the shared client too. What
// remains beside it is a handful: the health and readiness probes, upstream's compactor
// client, the apiextensions and aggregator stores (upstream's factory still dials those).
func TestEtcdConnectionsShared(t *testing.T) {
	s := framework.StartServer(t)
	n, err := establishedTo(s.EtcdPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d connections to etcd (port %d)", n, s.EtcdPort)
	// Every built-in resource is served: were each dialling its own, this would be 60+.
	if n == 0 || n > 15 {
		t.Errorf("%d etcd connections, want a handful (1..15): resources are not sharing one client", n)
	}

	// Custom resources too: three CRDs, each served (its store is made at the first
	// request), add no connection.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := s.RESTConfig(t)
	crds := apiextensionsclient.NewForConfigOrDie(cfg).ApiextensionsV1().CustomResourceDefinitions()
	dyn := dynamic.NewForConfigOrDie(cfg)
	for _, kind := range []string{"Alpha", "Beta", "Gamma"} {
		plural := strings.ToLower(kind) + "s"
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".conn.skiff.test"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "conn.skiff.test", Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
			},
		}
		if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		gvr := schema.GroupVersionResource{Group: "conn.skiff.test", Version: "v1", Resource: plural}
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "conn.skiff.test/v1", "kind": kind,
			"metadata": map[string]any{"name": "one"}}}
		// The CRD is served once it is Established and discovery has it: retry briefly.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			_, err := dyn.Resource(gvr).Namespace("default").Create(ctx, obj, metav1.CreateOptions{})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("create a %s: %v", kind, err)
			}
		}
	}
	after, err := establishedTo(s.EtcdPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d connections to etcd with three custom resources served", after)
	if after > n {
		t.Errorf("%d etcd connections with three custom resources served, %d before: custom resources dial their own", after, n)
	}
}

// establishedTo counts the established TCP connections (IPv4 and IPv6) whose remote port
// is port, in this network namespace.
func establishedTo(port int) (int, error) {
	n := 0
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			return 0, err
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "01" { // ESTABLISHED
				continue
			}
			_, hexPort, ok := strings.Cut(fields[2], ":")
			if !ok {
				continue
			}
			p, err := strconv.ParseUint(hexPort, 16, 16)
			if err != nil {
				f.Close()
				return 0, fmt.Errorf("%s: %q: %w", file, fields[2], err)
			}
			if int(p) == port {
				n++
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return 0, err
		}
	}
	return n, nil
}
