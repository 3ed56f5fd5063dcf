package kubectl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Color, type: string, jsonPath: .spec.color}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: What a widget is made of.
            x-kubernetes-validations:
            - {rule: "self.size <= 10", message: "size must be at most 10"}
            properties:
              size: {type: integer, minimum: 1, description: How big the widget is.}
              color: {type: string, default: blue}
              replicas: {type: integer}
          status:
            type: object
            properties:
              replicas: {type: integer}
`

// TestCustomResources installs a CRD with the real kubectl and uses its resource as users
// do: discovery and short names, upstream's validation (schema and CEL, with the rule's
// message), defaulting, pruning, printer columns, the scale subresource, kubectl explain.
func TestCustomResources(t *testing.T) {
	s := framework.StartServer(t)
	kc := framework.Kubectl(t, 33)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := runner(ctx, t, s, kc)
	contains := func(out string, want ...string) { t.Helper(); containsAll(t, out, want...) }
	write := func(name, body string) string {
		f := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	contains(run(false, "apply", "-f", write("crd.yaml", widgetCRD)), "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created")
	run(false, "wait", "--for", "condition=Established", "crd/widgets.example.com", "--timeout=60s")
	framework.Eventually(t, 30*time.Second, "widgets in discovery", func() (bool, string) {
		out, _ := s.Run(ctx, kc, "api-resources", "--api-group", "example.com")
		return strings.Contains(out, "widgets") && strings.Contains(out, "wd") && strings.Contains(out, "example.com/v1"), out
	})

	// Defaulted, and an unknown field pruned (with client-side validation off).
	contains(run(false, "create", "--validate=false", "-f", write("w.yaml",
		"apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: small}\nspec: {size: 3, shape: round}\n")), "widget.example.com/small created")
	got := run(false, "get", "widget", "small", "-o", "jsonpath={.spec.color}/{.spec.shape}/{.spec.size}")
	if got != "blue//3" {
		t.Errorf("defaulted and pruned widget: %q, want blue//3", got)
	}
	// Strict field validation (kubectl's default) names the unknown field.
	contains(run(true, "create", "-f", write("w2.yaml",
		"apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: odd}\nspec: {size: 3, shape: round}\n")), `unknown field "spec.shape"`)
	// The schema and the CEL rule, with their messages.
	contains(run(true, "create", "-f", write("w3.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: huge}\nspec: {size: 20}\n")),
		"size must be at most 10")
	contains(run(true, "create", "-f", write("w4.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: none}\nspec: {size: 0}\n")),
		"spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1")

	contains(run(false, "get", "wd"), "NAME", "SIZE", "COLOR", "small", "3", "blue")
	contains(run(false, "get", "all"), "widget.example.com/small")
	contains(run(false, "scale", "widget", "small", "--replicas=4"), "widget.example.com/small scaled")
	if got := run(false, "get", "widget", "small", "-o", "jsonpath={.spec.replicas}"); got != "4" {
		t.Errorf("replicas after kubectl scale: %q", got)
	}
	framework.Eventually(t, 30*time.Second, "kubectl explain on the custom resource", func() (bool, string) {
		out, err := s.Run(ctx, kc, "explain", "widget.spec")
		return err == nil && strings.Contains(out, "What a widget is made of.") && strings.Contains(out, "How big the widget is."), out
	})
	// The OpenAPI v2 document (the aggregator's, merged from the API server's) publishes it too,
	// for the clients that still read v2.
	framework.Eventually(t, 30*time.Second, "the custom resource in /openapi/v2", func() (bool, string) {
		out, err := s.Run(ctx, kc, "get", "--raw", "/openapi/v2")
		return err == nil && strings.Contains(out, `"com.example.v1.Widget"`) && strings.Contains(out, "What a widget is made of."), out[:min(len(out), 300)]
	})
	// The garbage collector watches the new kind: a widget owned by a ConfigMap goes with it.
	run(false, "create", "configmap", "owner")
	uid := run(false, "get", "configmap", "owner", "-o", "jsonpath={.metadata.uid}")
	run(false, "create", "-f", write("owned.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: owned\n  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: owner, uid: "+uid+"}]\nspec: {size: 1}\n"))
	run(false, "delete", "configmap", "owner")
	framework.Eventually(t, 90*time.Second, "the owned widget collected", func() (bool, string) {
		out, err := s.Run(ctx, kc, "get", "widget", "owned")
		return err != nil && strings.Contains(out, "NotFound"), out
	})
	contains(run(false, "delete", "crd", "widgets.example.com"), `customresourcedefinition.apiextensions.k8s.io "widgets.example.com" deleted`)
	framework.Eventually(t, 30*time.Second, "widgets gone from discovery", func() (bool, string) {
		out, _ := s.Run(ctx, kc, "api-resources", "--api-group", "example.com")
		return !strings.Contains(out, "widgets"), out
	})
	framework.Eventually(t, 30*time.Second, "the custom resource gone from /openapi/v2", func() (bool, string) {
		out, err := s.Run(ctx, kc, "get", "--raw", "/openapi/v2")
		return err == nil && strings.Contains(out, `"io.k8s.api.core.v1.Pod"`) && !strings.Contains(out, `"com.example.v1.Widget"`), out[:min(len(out), 300)]
	})
}
