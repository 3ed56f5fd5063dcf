package lbipam

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

func lb(name, requested string, created int) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: "uid-" + "name",
		CreationTimestamp: metav1.NewTime(time.Unix(int64(created), 0))},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerIP: requested,
			Ports: []corev1.ServicePort{{Port: 80}}}}
}

func TestController(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	other := lb("other-class", "", 1)
	other.Spec.LoadBalancerClass = ptr.To("example.com/lb")
	client := fake.NewSimpleClientset(lb("a", "", 1), lb("b", "198.18.200.5", 2), lb("c", "198.18.200.5", 3), other,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: ConfigMapName},
			Data: map[string]string{"config.yaml": "loadBalancerPools: [{cidr: 10.9.0.0/24}]"}})
	f := informers.NewSharedInformerFactory(client, 0)
	events := record.NewFakeRecorder(100)
	c, err := New(client, f.Core().V1().Services(), f.Core().V1().ConfigMaps(), []string{"198.18.200.0/24", "2001:2:0:200::/120"}, events,
		slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	go c.Run(ctx)
	status := func(name string) string {
		s, err := client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return ""
		}
		return s.Status.LoadBalancer.Ingress[0].IP
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: a=%q b=%q c=%q other=%q", what, status("a"), status("b"), status("c"), status("other-class"))
			}
		}
	}
	eventually("a the lowest, b its request, c refused, another class untouched", func() bool {
		return status("a") == "198.18.200.1" && status("b") == "198.18.200.5" && status("c") == "" && status("other-class") == ""
	})
	found := false
	for len(events.Events) > 0 {
		if e := <-events.Events; e == "Warning AllocationFailed loadBalancerIP 198.18.200.5 is already allocated to default/b" {
			found = true
		}
	}
	if !found {
		t.Error("no AllocationFailed event for c")
	}
	// b goes: c gets the address. a stops being a LoadBalancer: its status is cleared.
	if err := client.CoreV1().Services("default").Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s, _ := client.CoreV1().Services("default").Get(ctx, "a", metav1.GetOptions{})
	s.Spec.Type = corev1.ServiceTypeClusterIP
	if _, err := client.CoreV1().Services("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("c given the released address, a's cleared", func() bool { return status("c") == "198.18.200.5" && status("a") == "" })
	// The ConfigMap's pool serves once the flag's is used up: a request inside it is granted.
	if _, err := client.CoreV1().Services("default").Create(ctx, lb("d", "10.9.0.7", 4), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("d in the ConfigMap's pool", func() bool { return status("d") == "10.9.0.7" })
	// A dual-stack Service gets an address of each family, in its ipFamilies order; a request
	// of a family the Service lacks is refused.
	dual := lb("e", "", 5)
	dual.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
	six := lb("f", "198.18.200.9", 6)
	six.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	for _, svc := range []*corev1.Service{dual, six} {
		if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ingress := func(name string) string {
		s, _ := client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		var ips []string
		for _, in := range s.Status.LoadBalancer.Ingress {
			ips = append(ips, in.IP)
		}
		return strings.Join(ips, " ")
	}
	eventually("e an IPv6 address then an IPv4 one", func() bool { return ingress("e") == "2001:2:0:200::1 198.18.200.1" })
	eventually("f refused", func() bool {
		for len(events.Events) > 0 {
			if e := <-events.Events; strings.Contains(e, "loadBalancerIP 198.18.200.9 is not of the Service's ipFamilies [IPv6]") {
				return ingress("f") == ""
			}
		}
		return false
	})
	if _, err := New(client, f.Core().V1().Services(), f.Core().V1().ConfigMaps(), []string{"198.18.200.7/24"}, events, slog.Default()); err == nil {
		t.Error("a --loadbalancer-cidr with host bits accepted")
	}
}
