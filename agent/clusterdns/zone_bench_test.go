package clusterdns

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scaleInputs is a cluster of services Services (every tenth headless, with 10 endpoints in a
// slice) and pods pods.
func scaleInputs(services, pods int) Inputs {
	in := Inputs{Domain: "cluster.local", Nameserver: "10.96.0.10"}
	for i := range services {
		ns, name := fmt.Sprintf("ns%d", i%100), fmt.Sprintf("svc%d", i)
		if i%10 == 0 {
			in.Services = append(in.Services, service(ns, name, corev1.ClusterIPNone, corev1.ServicePort{Name: "http", Port: 80}))
			var eps []discoveryv1.Endpoint
			for e := range 10 {
				eps = append(eps, endpoint(fmt.Sprintf("10.%d.%d.%d", 100+i/65536, i/256%256, e), true, ""))
			}
			in.Slices = append(in.Slices, slice(ns, name, name+"-a", nil, eps...))
			continue
		}
		in.Services = append(in.Services, service(ns, name, fmt.Sprintf("10.96.%d.%d", i/256, i%256), corev1.ServicePort{Name: "http", Port: 80}))
	}
	for i := range pods {
		in.Pods = append(in.Pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", i%100), Name: fmt.Sprintf("p%d", i)},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.%d.%d.%d", 244+i/65536, i/256%256, i%256)}})
	}
	return in
}

// BenchmarkPodChange is the agent's DNS work for one pod changing address in a cluster of
// 3,000 Services and 30,000 pods: "incremental" replaces that pod's records (what the server
// does), "rebuild" builds the whole zone again (what it did until issue 41). Compare the two
// in one run: go test -bench PodChange -benchmem ./agent/clusterdns
func BenchmarkPodChange(b *testing.B) {
	in := scaleInputs(3000, 30000)
	b.Run("incremental", func(b *testing.B) {
		z := Build(in)
		p := in.Pods[0].DeepCopy()
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			p.Status.PodIP = fmt.Sprintf("10.250.%d.%d", i/256%256, i%256)
			z.SetPod(p.Namespace+"/"+p.Name, p)
		}
	})
	b.Run("rebuild", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			Build(in)
		}
	})
}

// BenchmarkHeadlessReplace replaces every endpoint of one headless Service of n endpoints:
// the work grows with n, not n² (4x the endpoints should cost about 4x, not 16x).
func BenchmarkHeadlessReplace(b *testing.B) {
	for _, n := range []int{1000, 4000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			svc := service("data", "big", corev1.ClusterIPNone, corev1.ServicePort{Name: "http", Port: 80})
			gen := func(round int) []*discoveryv1.EndpointSlice {
				eps := make([]discoveryv1.Endpoint, n)
				for i := range eps {
					eps[i] = endpoint(fmt.Sprintf("10.%d.%d.%d", 100+round%2, i/256, i%256), true, "")
				}
				return []*discoveryv1.EndpointSlice{slice("data", "big", "big-a", nil, eps...)}
			}
			z := NewZone("cluster.local", "")
			rounds := [][]*discoveryv1.EndpointSlice{gen(0), gen(1)}
			z.SetService("data/big", svc, rounds[0])
			b.ResetTimer()
			for i := range b.N {
				z.SetService("data/big", svc, rounds[(i+1)%2])
			}
		})
	}
}
