package policy

import (
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// BenchmarkCompile is the agent's work on each policy, pod or namespace change: compiling
// 1000 pods in 20 namespaces against 100 or 1000 policies (each selecting an app's pods and
// admitting those of an app in any namespace and of another in its own, on a named port). What a node enforces lags a change by this plus the
// informer's delivery and the map writes.
func BenchmarkCompile(b *testing.B) {
	var pods []Pod
	var nss []Namespace
	for n := 0; n < 20; n++ {
		nss = append(nss, Namespace{Name: fmt.Sprint("ns", n), Labels: map[string]string{"team": fmt.Sprint(n % 4)}})
	}
	for i := 0; i < 1000; i++ {
		pods = append(pods, Pod{Namespace: fmt.Sprint("ns", i%20), Name: fmt.Sprint("p", i),
			Labels: map[string]string{"app": fmt.Sprint("app", i%50)}, IPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 244, byte(i / 250), byte(i % 250)})},
			Ports: []NamedPort{{Name: "http", Protocol: TCP, Port: 8080}}})
	}
	for _, n := range []int{100, 1000} {
		var nps []*networkingv1.NetworkPolicy
		tcp := corev1.ProtocolTCP
		for i := 0; i < n; i++ {
			nps = append(nps, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprint("ns", i%20), Name: fmt.Sprint("np", i)},
				Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprint("app", i%50)}},
					Ingress: []networkingv1.NetworkPolicyIngressRule{{
						From: []networkingv1.NetworkPolicyPeer{
							{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprint("app", (i+1)%50)}}},
							{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprint("app", (i+20)%50)}}},
						},
						Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromString("http"))}}}}}})
		}
		b.Run(fmt.Sprintf("policies=%d", n), func(b *testing.B) {
			alloc := NewAllocator()
			var entries int
			for i := 0; i < b.N; i++ {
				res, errs := Compile(alloc, nps, pods, nss)
				if len(errs) > 0 {
					b.Fatal(errs)
				}
				entries = len(res.Entries)
			}
			if entries == 0 {
				b.Fatal("the policies admit nothing: the benchmark would measure no work")
			}
			b.ReportMetric(float64(entries), "entries")
		})
	}
}
