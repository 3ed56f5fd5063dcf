package apiserver

import (
	"context"
	"io"
	"log/slog"
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
