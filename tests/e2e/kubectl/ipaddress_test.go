package kubectl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/tests/e2e/framework"
)

// TestIPAddresses: every ClusterIP is an IPAddress (networking.k8s.io/v1) with its Service as
// parent, made when the address is allocated and deleted with the Service; an IPAddress made
// by hand reserves its address; bad ones are refused with upstream's messages; and a Service
// from before IPAddresses (its reservation an etcd key) gets its IPAddress at the next start,
// the old key removed, its address still taken in between.
func TestIPAddresses(t *testing.T) {
	s := framework.StartServer(t)
	kc := framework.Kubectl(t, 33)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client := s.Client(t)
	run := func(args ...string) string {
		t.Helper()
		out, err := s.Run(ctx, kc, args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	// The kubernetes Service's address, from the bootstrap.
	if out := run("get", "ipaddresses"); !strings.Contains(out, "PARENTREF") || !strings.Contains(out, "10.96.0.1 ") || !strings.Contains(out, "services/default/kubernetes") {
		t.Fatalf("kubectl get ipaddresses:\n%s", out)
	}

	svc := func(name, ip string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": name}}}
	}
	web, err := client.CoreV1().Services("default").Create(ctx, svc("web", ""), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := client.NetworkingV1().IPAddresses().Get(ctx, web.Spec.ClusterIP, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the IPAddress of web's ClusterIP %s: %v", web.Spec.ClusterIP, err)
	}
	if r := addr.Spec.ParentRef; r == nil || r.Resource != "services" || r.Namespace != "default" || r.Name != "web" ||
		addr.Labels[networkingv1.LabelManagedBy] != "ipallocator.k8s.io" || addr.Labels[networkingv1.LabelIPAddressFamily] != "IPv4" {
		t.Fatalf("web's IPAddress: %+v", addr)
	}

	// An address reserved by hand is not handed to a Service.
	if _, err := client.NetworkingV1().IPAddresses().Create(ctx, &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.96.0.50"},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Group: "mygroup", Resource: "myresources", Name: "bar"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = client.CoreV1().Services("default").Create(ctx, svc("taken", "10.96.0.50"), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "failed to allocate 10.96.0.50: provided value is already allocated") {
		t.Fatalf("a Service on an address reserved by hand: %v", err)
	}
	// Bad IPAddresses are refused with the reason.
	for _, bad := range []struct{ manifest, want string }{
		{`{"apiVersion":"networking.k8s.io/v1","kind":"IPAddress","metadata":{"name":"10.096.0.9"},"spec":{"parentRef":{"resource":"services","name":"x"}}}`, "metadata.name: Invalid value"},
		{`{"apiVersion":"networking.k8s.io/v1","kind":"IPAddress","metadata":{"name":"10.96.0.9"},"spec":{}}`, "spec.parentRef: Required value"},
	} {
		file := filepath.Join(t.TempDir(), "bad.json")
		if err := os.WriteFile(file, []byte(bad.manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := s.Run(ctx, kc, "create", "-f", file); err == nil || !strings.Contains(out, bad.want) {
			t.Errorf("kubectl create %s: %v\n%s\nwant %q", bad.manifest, err, out, bad.want)
		}
	}

	// Deleting the Service frees its address.
	if err := client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.NetworkingV1().IPAddresses().Get(ctx, web.Spec.ClusterIP, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("web's IPAddress after web was deleted: %v", err)
	}

	// A Service as skiff stored it before IPAddresses: no IPAddress, an etcd key instead.
	old, err := client.CoreV1().Services("default").Create(ctx, svc("old", ""), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip := old.Spec.ClusterIP
	s.Etcdctl(t, "del", "/registry/ipaddresses/"+ip)
	s.Etcdctl(t, "put", "/registry/skiff/ranges/serviceips/"+ip, "default")
	framework.Eventually(t, 30*time.Second, "the IPAddress gone from the API", func() (bool, string) {
		_, err := client.NetworkingV1().IPAddresses().Get(ctx, ip, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "get: " + errString(err)
	})
	// The legacy reservation still holds the address.
	_, err = client.CoreV1().Services("default").Create(ctx, svc("again", ip), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "provided value is already allocated") {
		t.Fatalf("a Service on an address held by a legacy reservation: %v", err)
	}
	s.Stop()
	s.Start()
	framework.Eventually(t, time.Minute, "the repair to make old's IPAddress and remove the etcd key", func() (bool, string) {
		a, err := client.NetworkingV1().IPAddresses().Get(ctx, ip, metav1.GetOptions{})
		if err != nil {
			return false, "get: " + err.Error()
		}
		if a.Spec.ParentRef == nil || a.Spec.ParentRef.Name != "old" {
			return false, "parent: " + a.Spec.ParentRef.String()
		}
		keys := s.Etcdctl(t, "get", "--prefix", "--keys-only", "/registry/skiff/ranges/serviceips/")
		return strings.TrimSpace(keys) == "", "legacy keys: " + keys
	})
	if !strings.Contains(s.Log(), "ClusterIP repair: made the missing IPAddress") {
		t.Errorf("the server did not log the repair:\n%s", s.Log())
	}
}

func errString(err error) string {
	if err == nil {
		return "found"
	}
	return err.Error()
}
