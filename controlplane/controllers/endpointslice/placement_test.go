package endpointslice

import (
	"fmt"
	"math/rand"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// TestPlaceProperties drives Place through random histories of a Service (pods coming and
// going, changing readiness, port mappings appearing and vanishing, slices deleted behind the
// controller's back) with a slice size of 3, applying each plan write by write, and holds:
//   - after a plan, the slices list exactly the desired endpoints, each once, in a slice of
//     its port mapping, none over the size, and no slice empty unless it is the Service's one
//     empty slice;
//   - between any two writes, no endpoint is listed in two slices of one port mapping;
//   - an endpoint whose mapping is unchanged stays in the slice that listed it;
//   - a second plan over the result writes nothing.
func TestPlaceProperties(t *testing.T) {
	const max = 3
	mappings := [][]discoveryv1.EndpointPort{
		{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		{{Name: ptr.To("http"), Port: ptr.To[int32](8081), Protocol: ptr.To(corev1.ProtocolTCP)}},
		{{Name: ptr.To("http"), Port: ptr.To[int32](9000), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	// The third mapping is of another address type: its slices are never reused for the others.
	families := []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6}
	for seed := int64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewSource(seed))
		slices := map[string]*discoveryv1.EndpointSlice{}
		made := 0
		newSlice := func(g Group) *discoveryv1.EndpointSlice {
			return &discoveryv1.EndpointSlice{AddressType: g.AddressType, Endpoints: g.Endpoints, Ports: g.Ports}
		}
		for step := 0; step < 25; step++ {
			// A random desired state: up to 12 pods, each with a mapping and readiness.
			byMapping := map[int][]discoveryv1.Endpoint{}
			for pod := 0; pod < 12; pod++ {
				if rng.Intn(3) == 0 {
					continue
				}
				m := pod % len(mappings)
				if rng.Intn(8) == 0 { // the Service's ports changed for this pod
					m = rng.Intn(len(mappings))
				}
				byMapping[m] = append(byMapping[m], discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.0.%d", pod)},
					Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(rng.Intn(4) != 0)}})
			}
			var want []Group
			for m := range mappings {
				if eps := byMapping[m]; len(eps) > 0 {
					want = append(want, Group{AddressType: families[m], Ports: mappings[m], Endpoints: eps})
				}
			}
			if len(want) == 0 {
				want = []Group{{AddressType: families[0], Ports: mappings[0]}}
			}
			if len(slices) > 0 && rng.Intn(6) == 0 { // someone deletes a slice
				for name := range slices {
					delete(slices, name)
					break
				}
			}
			before := map[string]string{} // endpoint -> slice, for endpoints whose mapping stayed
			for name, s := range slices {
				for _, e := range s.Endpoints {
					before[portsKey(s.Ports)+"|"+endpointKey(e)] = name
				}
			}
			plan := Place(list(slices), want, max, newSlice)
			check := func(when string) {
				seen := map[string]string{}
				for name, s := range slices {
					for _, e := range s.Endpoints {
						k := mappingKey(s.AddressType, s.Ports) + "|" + endpointKey(e)
						if prev, ok := seen[k]; ok {
							t.Fatalf("seed %d step %d %s: %s in %s and %s", seed, step, when, endpointKey(e), prev, name)
						}
						seen[k] = name
					}
				}
			}
			for _, c := range plan.Create {
				made++
				c.Name = fmt.Sprintf("s-%03d", rng.Intn(1000)) + fmt.Sprint(made) // names sort at random
				slices[c.Name] = c
				check("after create")
			}
			for _, u := range plan.Update {
				if cur, ok := slices[u.Name]; !ok || cur.AddressType != u.AddressType {
					t.Fatalf("seed %d step %d: update of unknown slice %s or of its address type", seed, step, u.Name)
				}
				slices[u.Name] = u
				check("after update of " + u.Name)
			}
			for _, d := range plan.Delete {
				delete(slices, d.Name)
			}

			// The result is the desired state.
			got := map[string]string{}
			empty := 0
			for name, s := range slices {
				if len(s.Endpoints) > max {
					t.Fatalf("seed %d step %d: slice %s holds %d", seed, step, name, len(s.Endpoints))
				}
				if len(s.Endpoints) == 0 {
					empty++
				}
				for _, e := range s.Endpoints {
					got[endpointKey(e)] = portsKey(s.Ports) + fmt.Sprint(*e.Conditions.Ready)
					if prev, ok := before[portsKey(s.Ports)+"|"+endpointKey(e)]; ok && prev != name {
						if _, still := slices[prev]; still {
							t.Fatalf("seed %d step %d: %s moved from %s to %s", seed, step, endpointKey(e), prev, name)
						}
					}
				}
			}
			wantMap := map[string]string{}
			total := 0
			for _, g := range want {
				for _, e := range g.Endpoints {
					wantMap[endpointKey(e)] = portsKey(g.Ports) + fmt.Sprint(*e.Conditions.Ready)
					total++
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(wantMap) {
				t.Fatalf("seed %d step %d: slices hold %v, want %v", seed, step, got, wantMap)
			}
			if (total == 0 && (empty != 1 || len(slices) != 1)) || (total > 0 && empty != 0) {
				t.Fatalf("seed %d step %d: %d empty slices of %d with %d endpoints", seed, step, empty, len(slices), total)
			}
			if again := Place(list(slices), want, max, newSlice); len(again.Update)+len(again.Create)+len(again.Delete) != 0 {
				t.Fatalf("seed %d step %d: a converged Service is planned %+v", seed, step, again)
			}
		}
	}
}

func list(m map[string]*discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
	out := make([]*discoveryv1.EndpointSlice, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	return out
}

// When a Service's ports change, every slice is rewritten in place with the endpoints it
// listed: nothing is created or deleted, and no pod is ever listed twice or missing.
func TestPlacePortChangeRewritesInPlace(t *testing.T) {
	old := []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}}
	now := []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](9090), Protocol: ptr.To(corev1.ProtocolTCP)}}
	ep := func(i int) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.0.%d", i)}}
	}
	// Slices whose names sort against the order of their endpoints.
	existing := []*discoveryv1.EndpointSlice{
		{ObjectMeta: metav1.ObjectMeta{Name: "web-b"}, Ports: old, Endpoints: []discoveryv1.Endpoint{ep(1), ep(2), ep(3)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web-a"}, Ports: old, Endpoints: []discoveryv1.Endpoint{ep(4), ep(5)}},
	}
	want := []Group{{Ports: now, Endpoints: []discoveryv1.Endpoint{ep(1), ep(2), ep(3), ep(4), ep(5)}}}
	plan := Place(existing, want, 3, func(g Group) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{AddressType: g.AddressType, Endpoints: g.Endpoints, Ports: g.Ports}
	})
	if len(plan.Create)+len(plan.Delete) != 0 || len(plan.Update) != 2 {
		t.Fatalf("plan %+v, want two updates", plan)
	}
	for _, u := range plan.Update {
		var orig *discoveryv1.EndpointSlice
		for _, e := range existing {
			if e.Name == u.Name {
				orig = e
			}
		}
		if !apiequality.Semantic.DeepEqual(u.Endpoints, orig.Endpoints) || *u.Ports[0].Port != 9090 {
			t.Errorf("%s rewritten as %v on %d, want its own endpoints on 9090", u.Name, u.Endpoints, *u.Ports[0].Port)
		}
	}
}

// Groups of one mapping share slices, and an address listed twice is placed once (the
// mirroring controller passes one group per Endpoints subset).
func TestPlaceMergesGroupsOfOneMapping(t *testing.T) {
	ports := []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}}
	ep := func(ip string) discoveryv1.Endpoint { return discoveryv1.Endpoint{Addresses: []string{ip}} }
	newSlice := func(g Group) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{AddressType: g.AddressType, Endpoints: g.Endpoints, Ports: g.Ports}
	}
	want := []Group{
		{AddressType: discoveryv1.AddressTypeIPv4, Ports: ports, Endpoints: []discoveryv1.Endpoint{ep("10.0.0.1"), ep("10.0.0.2")}},
		{AddressType: discoveryv1.AddressTypeIPv4, Ports: ports, Endpoints: []discoveryv1.Endpoint{ep("10.0.0.2"), ep("10.0.0.3")}},
		{AddressType: discoveryv1.AddressTypeIPv6, Ports: ports, Endpoints: []discoveryv1.Endpoint{ep("fd00::1")}},
	}
	plan := Place(nil, want, 100, newSlice)
	var got []string
	for _, c := range plan.Create {
		got = append(got, fmt.Sprintf("%s %d", c.AddressType, len(c.Endpoints)))
	}
	if fmt.Sprint(got) != "[IPv4 3 IPv6 1]" {
		t.Fatalf("created %v, want one IPv4 slice of 3 and one IPv6 slice of 1", got)
	}
	plan.Create[0].Name, plan.Create[1].Name = "a", "b"
	if again := Place(plan.Create, want, 100, newSlice); len(again.Create)+len(again.Update)+len(again.Delete) != 0 {
		t.Fatalf("converged slices planned %+v", again)
	}
}
