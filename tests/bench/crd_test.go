package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// BenchmarkCustomResource measures a custom resource's create, get and list (served by
// apiextensions-apiserver behind the main server, JSON, schema-validated and pruned)
// beside a ConfigMap's (the main server's own store) of the same payload, in the same
// server, rounds interleaved so machine noise falls on both.
func BenchmarkCustomResource(b *testing.B) {
	s := framework.StartServer(b)
	ctx := context.Background()
	cfg := rest.CopyConfig(s.RESTConfig(b))
	cfg.QPS, cfg.Burst = -1, 0
	dyn := dynamic.NewForConfigOrDie(cfg)
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.bench.example.com"},
		"spec": map[string]any{"group": "bench.example.com", "scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"data": map[string]any{"type": "object", "properties": map[string]any{"v": map[string]any{"type": "string"}}}}}}}}}}}
	if _, err := dyn.Resource(crds).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	widgets := dyn.Resource(schema.GroupVersionResource{Group: "bench.example.com", Version: "v1", Resource: "widgets"}).Namespace("default")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := widgets.List(ctx, metav1.ListOptions{}); err == nil {
			break
		} else if time.Now().After(deadline) {
			b.Fatalf("the CRD never served: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	core := protobufClient(b, s)
	value := strings.Repeat("x", 200)
	var cmSeq, crSeq int
	ops := []struct {
		name string
		f    func(int) error
	}{
		{"configmap-create", func(int) error {
			cmSeq++
			_, err := core.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", cmSeq)},
				Data: map[string]string{"v": value}}, metav1.CreateOptions{})
			return err
		}},
		{"cr-create", func(int) error {
			crSeq++
			_, err := widgets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "bench.example.com/v1", "kind": "Widget",
				"metadata": map[string]any{"name": fmt.Sprintf("w-%d", crSeq)}, "data": map[string]any{"v": value}}}, metav1.CreateOptions{})
			return err
		}},
		{"configmap-get", func(i int) error {
			_, err := core.CoreV1().ConfigMaps("default").Get(ctx, fmt.Sprintf("cm-%d", i%cmSeq+1), metav1.GetOptions{})
			return err
		}},
		{"cr-get", func(i int) error {
			_, err := widgets.Get(ctx, fmt.Sprintf("w-%d", i%crSeq+1), metav1.GetOptions{})
			return err
		}},
		{"configmap-list", func(int) error {
			_, err := core.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"cr-list", func(int) error {
			_, err := widgets.List(ctx, metav1.ListOptions{})
			return err
		}},
	}
	b.ResetTimer()
	times := make([][]time.Duration, len(ops))
	for round := 0; round < 5; round++ {
		for k, op := range ops {
			d, err := timeN(max(b.N/5, 1), op.f)
			if err != nil {
				b.Fatalf("%s: %v", op.name, err)
			}
			times[k] = append(times[k], d)
		}
	}
	b.StopTimer()
	for k, op := range ops {
		b.ReportMetric(float64(median(times[k]).Microseconds()), op.name+"-µs")
	}
	for k := 0; k < len(ops); k += 2 {
		b.ReportMetric(float64(median(times[k+1]))/float64(median(times[k])), strings.TrimPrefix(ops[k+1].name, "cr-")+"-cr/configmap")
	}
}
