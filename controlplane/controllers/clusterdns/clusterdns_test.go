package clusterdns

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func node(name, addr string, ready bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if addr != "" {
		n.Annotations = map[string]string{AddressAnnotation: addr}
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
	return n
}

func TestDesired(t *testing.T) {
	got := Desired([]*corev1.Node{
		node("a", "198.18.0.2:53", true),
		node("b", "198.18.0.3:5353", false),
		node("v6", "[fd00::3]:53", true),
		node("none", "", true),
		node("bad-port", "198.18.0.4:0", true),
		node("bad-ip", "nowhere:53", true),
		node("no-port", "198.18.0.5", true),
	})
	if len(got) != 3 {
		t.Fatalf("slices for %d nodes, want a, b and v6: %v", len(got), got)
	}
	a := got["a"]
	if a.Name != "kube-dns-a" || a.Labels[discoveryv1.LabelServiceName] != ServiceName || a.Endpoints[0].Addresses[0] != "198.18.0.2" ||
		!*a.Endpoints[0].Conditions.Ready || *a.Endpoints[0].NodeName != "a" || *a.Ports[0].Port != 53 || *a.Ports[1].Protocol != corev1.ProtocolTCP {
		t.Errorf("node a: %+v", a)
	}
	if b := got["b"]; *b.Endpoints[0].Conditions.Ready || *b.Ports[0].Port != 5353 {
		t.Errorf("node b (NotReady, port 5353): %+v", b)
	}
	if got["v6"].AddressType != discoveryv1.AddressTypeIPv6 {
		t.Errorf("an IPv6 resolver: %s", got["v6"].AddressType)
	}
}

func TestController(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewSimpleClientset(node("n1", "198.18.0.2:53", true), node("n2", "198.18.0.3:53", true),
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns-gone", Namespace: "kube-system",
			Labels: map[string]string{discoveryv1.LabelManagedBy: ManagedBy, discoveryv1.LabelServiceName: ServiceName}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"198.18.0.9"}, NodeName: ptr.To("gone")}}})
	f := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, f.Core().V1().Nodes(), f.Core().V1().Services(), f.Discovery().V1().EndpointSlices(), "10.96.0.10",
		slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	go c.Run(ctx)
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10 s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	slices := func() map[string]discoveryv1.EndpointSlice {
		l, _ := client.DiscoveryV1().EndpointSlices("kube-system").List(ctx, metav1.ListOptions{})
		out := map[string]discoveryv1.EndpointSlice{}
		for _, s := range l.Items {
			out[s.Name] = s
		}
		return out
	}
	eventually("the Service and a slice per node, the stale one gone", func() bool {
		svc, err := client.CoreV1().Services("kube-system").Get(ctx, ServiceName, metav1.GetOptions{})
		s := slices()
		_, gone := s["kube-dns-gone"]
		return err == nil && svc.Spec.ClusterIP == "10.96.0.10" && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal &&
			len(s) == 2 && !gone
	})
	// n1 goes NotReady: its endpoint is no longer ready. n2 is deleted: its slice goes.
	if _, err := client.CoreV1().Nodes().Update(ctx, node("n1", "198.18.0.2:53", false), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Nodes().Delete(ctx, "n2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("n1 not ready, n2's slice gone", func() bool {
		s := slices()
		n1, ok := s["kube-dns-n1"]
		return ok && len(s) == 1 && !*n1.Endpoints[0].Conditions.Ready
	})
	// The Service deleted by hand comes back.
	if err := client.CoreV1().Services("kube-system").Delete(ctx, ServiceName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("the Service recreated", func() bool {
		_, err := client.CoreV1().Services("kube-system").Get(ctx, ServiceName, metav1.GetOptions{})
		return err == nil
	})
	if _, err := New(client, f.Core().V1().Nodes(), f.Core().V1().Services(), f.Discovery().V1().EndpointSlices(), "ten", slog.Default()); err == nil {
		t.Error("a cluster DNS address that is no IP accepted")
	}
}
