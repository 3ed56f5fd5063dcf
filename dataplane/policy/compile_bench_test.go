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

// BenchmarkCompile is the agent's work on each policy, pod or namespace change: pods in 20
// namespaces under 100 or 1000 policies (each selecting an app's pods and admitting those of
// an app in any namespace and of another in its own, on a named port). What a node enforces
// lags a change by this plus the informer's delivery and the map writes.
//
// endpoints=cluster compiles every pod's rules, as the agent did before it compiled its own
// pods' alone (endpoints=node: 30 pods, one node's share at 30 pods per node); at 150,000
// pods (upstream's 5,000-node limit) the ratio of the two is what that change bought.
func BenchmarkCompile(b *testing.B) {
	for _, size := range []struct{ pods, policies int }{{1000, 100}, {1000, 1000}, {150000, 1000}} {
		pods, nss, nps := benchCluster(size.pods, size.policies)
		local := map[netip.Addr]bool{}
		for _, p := range pods[:30] {
			local[p.IPs[0]] = true
		}
		for _, view := range []struct {
			name  string
			local func(netip.Addr) bool
		}{{"cluster", nil}, {"node", func(a netip.Addr) bool { return local[a] }}} {
			if view.local == nil && size.pods > 1000 {
				continue // minutes a run; the 1,000-pod cases give the ratio's trend
			}
			b.Run(fmt.Sprintf("pods=%d/policies=%d/endpoints=%s", size.pods, size.policies, view.name), func(b *testing.B) {
				alloc := NewAllocator()
				var entries int
				for i := 0; i < b.N; i++ {
					res, errs := Compile(alloc, nps, pods, nss, view.local)
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
}

// benchCluster is n pods over 20 namespaces and 50 apps, and p policies.
func benchCluster(n, p int) ([]Pod, []Namespace, []*networkingv1.NetworkPolicy) {
	var pods []Pod
	var nss []Namespace
	for i := 0; i < 20; i++ {
		nss = append(nss, Namespace{Name: fmt.Sprint("ns", i), Labels: map[string]string{"team": fmt.Sprint(i % 4)}})
	}
	for i := 0; i < n; i++ {
		pods = append(pods, Pod{Namespace: fmt.Sprint("ns", i%20), Name: fmt.Sprint("p", i),
			Labels: map[string]string{"app": fmt.Sprint("app", i%50)}, IPs: []netip.Addr{netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})},
			Ports: []NamedPort{{Name: "http", Protocol: TCP, Port: 8080}}})
		pods[i].Key = IdentityKey(pods[i]) // as the agent keeps it, worked out when the pod changed
	}
	var nps []*networkingv1.NetworkPolicy
	tcp := corev1.ProtocolTCP
	for i := 0; i < p; i++ {
		nps = append(nps, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprint("ns", i%20), Name: fmt.Sprint("np", i)},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprint("app", i%50)}},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{
						{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprint("app", (i+1)%50)}}},
						{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprint("app", (i+20)%50)}}},
					},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromString("http"))}}}}}})
	}
	return pods, nss, nps
}
