package apiserver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestEnsureServiceCIDR: the default ServiceCIDR is made Ready from --service-cidr (host bits
// dropped), and one with other CIDRs is replaced.
func TestEnsureServiceCIDR(t *testing.T) {
	ctx := context.Background()
	check := func(client *fake.Clientset) {
		t.Helper()
		sc, err := client.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(sc.Spec.CIDRs) != 1 || sc.Spec.CIDRs[0] != "10.96.0.0/12" {
			t.Errorf("CIDRs %v, want [10.96.0.0/12]", sc.Spec.CIDRs)
		}
		if len(sc.Status.Conditions) != 1 || sc.Status.Conditions[0].Type != "Ready" || sc.Status.Conditions[0].Status != metav1.ConditionTrue {
			t.Errorf("conditions %+v, want Ready", sc.Status.Conditions)
		}
	}
	b := bootstrap{serviceCIDR: "10.96.0.1/12", log: slog.New(slog.NewTextHandler(io.Discard, nil))}

	b.client = fake.NewClientset()
	if err := b.ensureServiceCIDR(ctx); err != nil {
		t.Fatal(err)
	}
	check(b.client.(*fake.Clientset))

	b.client = fake.NewClientset(&networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", UID: "old"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.100.0.0/16"}}})
	if err := b.ensureServiceCIDR(ctx); err != nil {
		t.Fatal(err)
	}
	check(b.client.(*fake.Clientset))
}

// A reconcile of a settled cluster writes nothing: no POST refused as AlreadyExists for each
// system namespace, class, priority level and FlowSchema every 10 s (issue 41 counted 264
// FlowSchema POSTs and 868 4xx answers in one scale run), no update. A deleted object still
// comes back at the next reconcile.
func TestReconcileSettledWritesNothing(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	b := bootstrap{client: client, advertise: net.ParseIP("127.0.0.1"), port: 6443, serviceIP: "10.96.0.1",
		serviceCIDR: "10.96.0.0/12", log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := b.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	created := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "create" {
			created++
		}
	}
	if created < 20 {
		t.Fatalf("the first reconcile created %d objects, want the namespaces, classes, priority levels, FlowSchemas and more", created)
	}
	for round := range 2 {
		client.ClearActions()
		if err := b.reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		for _, a := range client.Actions() {
			switch a.GetVerb() {
			case "get", "list":
			default:
				t.Errorf("round %d: a settled reconcile sent %s %s %s", round, a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
			}
		}
	}
	if err := client.FlowcontrolV1().FlowSchemas().Delete(ctx, "system-nodes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Namespaces().Delete(ctx, "kube-public", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.FlowcontrolV1().FlowSchemas().Get(ctx, "system-nodes", metav1.GetOptions{}); err != nil {
		t.Errorf("a deleted FlowSchema did not come back: %v", err)
	}
	if _, err := client.CoreV1().Namespaces().Get(ctx, "kube-public", metav1.GetOptions{}); err != nil {
		t.Errorf("a deleted system namespace did not come back: %v", err)
	}
}

// TestKubernetesEndpointsIPv6: on an IPv6-only cluster the API server advertises an IPv6
// address, and the kubernetes EndpointSlice is of that address type (an IPv4 slice holding an
// IPv6 address is refused by validation and ignored by every Service proxy).
func TestKubernetesEndpointsIPv6(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	b := bootstrap{client: client, advertise: net.ParseIP("2001:2::1"), port: 6443, serviceIP: "fd00:10:96::1",
		serviceCIDR: "fd00:10:96::/108", log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := b.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	slice, err := client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if slice.AddressType != "IPv6" || len(slice.Endpoints) != 1 || slice.Endpoints[0].Addresses[0] != "2001:2::1" {
		t.Errorf("kubernetes EndpointSlice: %s %v, want IPv6 [2001:2::1]", slice.AddressType, slice.Endpoints)
	}
	if addressType(net.ParseIP("198.18.0.1")) != "IPv4" {
		t.Error("an IPv4 address's slice is not IPv4")
	}
}
