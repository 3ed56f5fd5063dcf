package clusterdns

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// dump is everything a zone answers from, in a canonical order: each owner name's records,
// the reverse names' records and the names that exist.
func dump(z *Zone) string {
	z.mu.RLock()
	defer z.mu.RUnlock()
	var lines []string
	for _, byType := range z.names {
		for _, rrs := range byType {
			for _, rr := range rrs {
				lines = append(lines, rr.String())
			}
		}
	}
	for _, rrs := range z.ptr {
		for _, rr := range rrs {
			lines = append(lines, rr.String())
		}
	}
	for n, c := range z.under {
		if c <= 0 {
			lines = append(lines, fmt.Sprintf("bad count %s %d", n, c))
		}
		lines = append(lines, "exists "+n)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestIncrementalMatchesBuild drives a zone through random histories — Services of every kind
// created, changed and deleted, their slices coming and going, pods starting, changing
// address and finishing, two Services sharing an address, a headless Service's endpoints
// moving between slices — applying each change to the one source it touches, and holds that
// the zone is then exactly what Build makes from the whole cluster, and answers as it does.
func TestIncrementalMatchesBuild(t *testing.T) {
	for seed := int64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewSource(seed))
		services := map[string]*corev1.Service{}
		sliceSet := map[string]*discoveryv1.EndpointSlice{}
		pods := map[string]*corev1.Pod{}
		z := NewZone("cluster.local", "10.96.0.10")
		slicesOf := func(key string) []*discoveryv1.EndpointSlice {
			var out []*discoveryv1.EndpointSlice
			for _, s := range sliceSet {
				if s.Namespace+"/"+s.Labels[discoveryv1.LabelServiceName] == key {
					out = append(out, s)
				}
			}
			return out
		}
		names := []string{"a", "b", "c"}
		namespaces := []string{"default", "data"}
		for step := 0; step < 60; step++ {
			ns, name := namespaces[rng.Intn(2)], names[rng.Intn(3)]
			key := ns + "/" + name
			switch rng.Intn(3) {
			case 0: // a Service
				if rng.Intn(4) == 0 {
					delete(services, key)
				} else {
					var svc *corev1.Service
					switch rng.Intn(4) {
					case 0:
						svc = service(ns, name, corev1.ClusterIPNone, corev1.ServicePort{Name: "http", Port: 80})
						svc.Spec.PublishNotReadyAddresses = rng.Intn(2) == 0
					case 1:
						svc = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
							Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: fmt.Sprintf("db%d.example.com", rng.Intn(2))}}
					default: // addresses from a small pool, so Services share them
						svc = service(ns, name, fmt.Sprintf("10.96.0.%d", rng.Intn(3)+1), corev1.ServicePort{Name: []string{"http", "web"}[rng.Intn(2)], Port: 80})
					}
					services[key] = svc
				}
				z.SetService(key, services[key], slicesOf(key))
			case 1: // a slice of a Service (its endpoints move between two slices)
				sname := fmt.Sprintf("%s-%d", name, rng.Intn(2))
				if rng.Intn(4) == 0 {
					delete(sliceSet, ns+"/"+sname)
				} else {
					var eps []discoveryv1.Endpoint
					for i := range rng.Intn(3) {
						host := ""
						if rng.Intn(2) == 0 {
							host = fmt.Sprintf("h%d", i)
						}
						eps = append(eps, endpoint(fmt.Sprintf("10.244.0.%d", rng.Intn(4)+1), rng.Intn(3) != 0, host))
					}
					sliceSet[ns+"/"+sname] = slice(ns, name, sname, []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080))}}, eps...)
				}
				z.SetService(key, services[key], slicesOf(key))
			case 2: // a pod
				if rng.Intn(4) == 0 {
					delete(pods, key)
				} else {
					p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
						Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.244.0.%d", rng.Intn(4)+1)}}
					if rng.Intn(5) == 0 {
						p.Status.Phase = corev1.PodSucceeded
					}
					pods[key] = p
				}
				z.SetPod(key, pods[key])
			}

			in := Inputs{Domain: "cluster.local", Nameserver: "10.96.0.10"}
			for _, s := range services {
				in.Services = append(in.Services, s)
			}
			for _, s := range sliceSet {
				in.Slices = append(in.Slices, s)
			}
			for _, p := range pods {
				in.Pods = append(in.Pods, p)
			}
			want := Build(in)
			if got, full := dump(z), dump(want); got != full {
				t.Fatalf("seed %d step %d: incremental zone\n%s\n\nwhole build\n%s", seed, step, got, full)
			}
			for _, q := range []string{"a.default.svc.cluster.local.", "h0.b.data.svc.cluster.local.", "data.svc.cluster.local.",
				"10-244-0-1.default.pod.cluster.local.", "1.0.96.10.in-addr.arpa.", "_http._tcp.c.default.svc.cluster.local."} {
				for _, qt := range []uint16{dns.TypeA, dns.TypeSRV, dns.TypePTR, dns.TypeTXT} {
					question := dns.Question{Name: q, Qtype: qt, Qclass: dns.ClassINET}
					a, b := z.Lookup(question), want.Lookup(question)
					if a.Rcode != b.Rcode || a.Ours != b.Ours || len(a.Answer) != len(b.Answer) || len(a.Extra) != len(b.Extra) {
						t.Fatalf("seed %d step %d: %s %s answered %+v, a whole build %+v", seed, step, q, dns.TypeToString[qt], a, b)
					}
				}
			}
		}
	}
}
