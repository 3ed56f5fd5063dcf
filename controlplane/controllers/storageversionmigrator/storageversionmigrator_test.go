package storageversionmigrator

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

type mapper map[string]schema.GroupVersionResource

func (m mapper) ResourceFor(in schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	if gvr, ok := m[in.Group+"/"+in.Resource]; ok {
		return gvr, nil
	}
	return schema.GroupVersionResource{}, errors.New("no matches")
}

func TestMigrate(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	var objs []runtime.Object
	for _, n := range []string{"a", "b", "c"} {
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "ns" + n}})
	}
	dyn := dynamicfake.NewSimpleDynamicClient(scheme, objs...)
	ok := &storagemigrationv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "cms"},
		Spec: storagemigrationv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Resource: "configmaps"}}}
	missing := &storagemigrationv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "nope"},
		Spec: storagemigrationv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: "example.com", Resource: "widgets"}}}
	client := fake.NewClientset(ok, missing)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, dyn, mapper{"/configmaps": corev1.SchemeGroupVersion.WithResource("configmaps")},
		factory.Storagemigration().V1().StorageVersionMigrations(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	if err := c.sync(ctx, "cms"); err != nil {
		t.Fatal(err)
	}
	patched := 0
	for _, a := range dyn.Actions() {
		if p, isPatch := a.(k8stesting.PatchAction); isPatch && string(p.GetPatch()) == "{}" {
			patched++
		}
	}
	if patched != 3 {
		t.Errorf("%d objects written back, want 3 (%v)", patched, dyn.Actions())
	}
	got, _ := client.StoragemigrationV1().StorageVersionMigrations().Get(ctx, "cms", metav1.GetOptions{})
	if !meta.IsStatusConditionTrue(got.Status.Conditions, "Succeeded") || meta.IsStatusConditionTrue(got.Status.Conditions, "Running") || !Finished(got) {
		t.Errorf("conditions %+v", got.Status.Conditions)
	}

	if err := c.sync(ctx, "nope"); err != nil {
		t.Fatal(err)
	}
	got, _ = client.StoragemigrationV1().StorageVersionMigrations().Get(ctx, "nope", metav1.GetOptions{})
	if c := meta.FindStatusCondition(got.Status.Conditions, "Failed"); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "ResourceNotFound" {
		t.Errorf("a migration of an unserved resource: %+v", got.Status.Conditions)
	}
}
