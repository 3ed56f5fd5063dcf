package serviceaccount

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

func newFixture(t *testing.T, objs ...runtime.Object) (*Controller, *fake.Clientset) {
	t.Helper()
	client := fake.NewSimpleClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory.Core().V1().Namespaces(), factory.Core().V1().ServiceAccounts(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Namespace:
			_ = factory.Core().V1().Namespaces().Informer().GetIndexer().Add(o)
		case *corev1.ServiceAccount:
			_ = factory.Core().V1().ServiceAccounts().Informer().GetIndexer().Add(o)
		}
	}
	return c, client
}

func namespace(name string, phase corev1.NamespacePhase, deleting bool) *corev1.Namespace {
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NamespaceStatus{Phase: phase}}
	if deleting {
		ts := metav1.Now()
		n.DeletionTimestamp = &ts
	}
	return n
}

func account(ns, name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func TestSync(t *testing.T) {
	for _, tc := range []struct {
		name       string
		objs       []runtime.Object
		wantCreate bool
	}{
		{"active namespace without default", []runtime.Object{namespace("app", corev1.NamespaceActive, false), account("app", "builder"), account("other", "default")}, true},
		{"active namespace with default", []runtime.Object{namespace("app", corev1.NamespaceActive, false), account("app", "default")}, false},
		{"terminating namespace", []runtime.Object{namespace("app", corev1.NamespaceTerminating, true)}, false},
		{"deleted but phase not updated yet", []runtime.Object{namespace("app", corev1.NamespaceActive, true)}, false},
		{"namespace without phase", []runtime.Object{namespace("app", "", false)}, false},
		{"missing namespace", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, client := newFixture(t, tc.objs...)
			if err := c.sync(context.Background(), "app"); err != nil {
				t.Fatal(err)
			}
			acts := client.Actions()
			if !tc.wantCreate {
				if len(acts) != 0 {
					t.Fatalf("actions %v", acts)
				}
				return
			}
			if len(acts) != 1 || acts[0].GetVerb() != "create" || acts[0].GetResource().Resource != "serviceaccounts" || acts[0].GetNamespace() != "app" {
				t.Fatalf("actions %v, want one service account creation in app", acts)
			}
			sa := acts[0].(ktesting.CreateAction).GetObject().(*corev1.ServiceAccount)
			if sa.Name != "default" {
				t.Fatalf("created %q, want default", sa.Name)
			}
			if _, err := client.CoreV1().ServiceAccounts("app").Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
				t.Fatal(err)
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
		{"created meanwhile", apierrors.NewAlreadyExists(corev1.Resource("serviceaccounts"), "default"), false},
		{"namespace terminating meanwhile", apierrors.NewForbidden(corev1.Resource("serviceaccounts"), "default", errors.New("namespace is terminating")), false},
		{"other failure is retried", errors.New("etcd unavailable"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, client := newFixture(t, namespace("app", corev1.NamespaceActive, false))
			client.PrependReactor("create", "serviceaccounts", func(ktesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.err
			})
			err := c.sync(context.Background(), "app")
			if (err != nil) != tc.wantErr {
				t.Fatalf("sync error %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}
