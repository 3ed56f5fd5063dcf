package openapi_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/skiff-sh/skiff/controlplane/openapi"
	"github.com/skiff-sh/skiff/controlplane/scheme"
)

// TestEveryServedAPIHasDefinitions fails when a row of scheme.APIs is not among the packages
// generate.go gives openapi-gen: its types would be served without OpenAPI definitions (no
// server-side apply, no kubectl explain).
func TestEveryServedAPIHasDefinitions(t *testing.T) {
	src, err := os.ReadFile("generate.go")
	if err != nil {
		t.Fatal(err)
	}
	packages := map[string]bool{}
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "//go:generate") {
			for _, f := range strings.Fields(line) {
				packages[f] = true
			}
		}
	}
	defs := openapi.GetOpenAPIDefinitions(func(string) spec.Ref { return spec.Ref{} })
	for _, a := range scheme.APIs {
		pkg := a.TypesPackage()
		if !packages[pkg] {
			t.Errorf("%v: %s is not in generate.go's openapi-gen packages", a.GroupVersion, pkg)
		}
		if _, ok := defs[modelName(a)]; !ok {
			t.Errorf("%v: no definitions from %s in zz_generated.openapi.go: run make generate", a.GroupVersion, pkg)
		}
	}
}

// modelName is the sample type's definition name: its OpenAPIModelName where the type has
// one, else its Go package and name.
func modelName(a scheme.API) string {
	if n, ok := reflect.New(a.Sample()).Elem().Interface().(interface{ OpenAPIModelName() string }); ok {
		return n.OpenAPIModelName()
	}
	return a.TypesPackage() + "." + a.Sample().Name()
}
