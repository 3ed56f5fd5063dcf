package rootcacert

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
)

const caPEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

func newFixture(t *testing.T, objs ...runtime.Object) (*Controller, *fake.Clientset) {
	t.Helper()
	client := fake.NewSimpleClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory.Core().V1().Namespaces(), factory.Core().V1().ConfigMaps(), []byte(caPEM), slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Namespace:
			_ = factory.Core().V1().Namespaces().Informer().GetIndexer().Add(o)
		case *corev1.ConfigMap:
			_ = factory.Core().V1().ConfigMaps().Informer().GetIndexer().Add(o)
		}
	}
	return c, client
}

func namespace(name string, deleting bool) *corev1.Namespace {
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	if deleting {
		ts := metav1.Now()
		n.DeletionTimestamp = &ts
		n.Status.Phase = corev1.NamespaceTerminating
	}
	return n
}

func configMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"keep": "me"}}, Data: data}
}

func TestSyncCreates(t *testing.T) {
	c, client := newFixture(t, namespace("app", false), configMap("other", ConfigMapName, map[string]string{"ca.crt": caPEM}))
	if err := c.sync(context.Background(), "app"); err != nil {
		t.Fatal(err)
	}
	acts := client.Actions()
	if len(acts) != 1 || acts[0].GetVerb() != "create" || acts[0].GetResource().Resource != "configmaps" || acts[0].GetNamespace() != "app" {
		t.Fatalf("actions %v, want one config map creation in app", acts)
	}
	cm := acts[0].(ktesting.CreateAction).GetObject().(*corev1.ConfigMap)
	if cm.Name != "kube-root-ca.crt" || len(cm.Data) != 1 || cm.Data["ca.crt"] != caPEM {
		t.Fatalf("created %s with data %v", cm.Name, cm.Data)
	}
	if cm.Annotations["kubernetes.io/description"] == "" {
		t.Error("description annotation missing")
	}
}

func TestSyncUpToDateOrTerminating(t *testing.T) {
	for name, objs := range map[string][]runtime.Object{
		"up to date":            {namespace("app", false), configMap("app", ConfigMapName, map[string]string{"ca.crt": caPEM})},
		"terminating namespace": {namespace("app", true)},
		"terminating, stale":    {namespace("app", true), configMap("app", ConfigMapName, map[string]string{"ca.crt": "old"})},
		"missing namespace":     nil,
	} {
		t.Run(name, func(t *testing.T) {
			c, client := newFixture(t, objs...)
			if err := c.sync(context.Background(), "app"); err != nil {
				t.Fatal(err)
			}
			if acts := client.Actions(); len(acts) != 0 {
				t.Fatalf("actions %v", acts)
			}
		})
	}
}

func TestSyncUpdatesWrongContent(t *testing.T) {
	for name, data := range map[string]map[string]string{
		"other CA":   {"ca.crt": "old"},
		"extra keys": {"ca.crt": "old", "junk": "x"},
		"no data":    nil,
	} {
		t.Run(name, func(t *testing.T) {
			c, client := newFixture(t, namespace("app", false), configMap("app", ConfigMapName, data))
			if err := c.sync(context.Background(), "app"); err != nil {
				t.Fatal(err)
			}
			acts := client.Actions()
			if len(acts) != 1 || acts[0].GetVerb() != "update" || acts[0].GetNamespace() != "app" {
				t.Fatalf("actions %v, want one update", acts)
			}
			cm := acts[0].(ktesting.UpdateAction).GetObject().(*corev1.ConfigMap)
			if cm.Name != ConfigMapName || len(cm.Data) != 1 || cm.Data["ca.crt"] != caPEM || cm.Labels["keep"] != "me" {
				t.Fatalf("updated %s: data %v labels %v", cm.Name, cm.Data, cm.Labels)
			}
		})
	}
}

func TestSyncCreateErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"created meanwhile", apierrors.NewAlreadyExists(corev1.Resource("configmaps"), ConfigMapName), false},
		{"namespace terminating meanwhile", apierrors.NewForbidden(corev1.Resource("configmaps"), ConfigMapName, errors.New("terminating")), false},
		{"other failure is retried", errors.New("boom"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, client := newFixture(t, namespace("app", false))
			client.PrependReactor("create", "configmaps", func(ktesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
			if err := c.sync(context.Background(), "app"); (err != nil) != tc.wantErr {
				t.Fatalf("sync error %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}
