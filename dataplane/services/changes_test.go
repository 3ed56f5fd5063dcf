package services

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// world is a random cluster for the proxy's change path: Services of every kind the
// compiler reads, their EndpointSlices and the node's pods with hostPorts, changed one object
// at a time, each change naming the key it dirties (as the informers' handlers do).
type world struct {
	rng      *rand.Rand
	node     Node
	services map[string]*corev1.Service
	slices   map[string][]*discoveryv1.EndpointSlice
	pods     map[string]*corev1.Pod
	version  int
}

func newWorld(seed uint64) *world {
	return &world{rng: rand.New(rand.NewPCG(seed, 41)), node: Node{Name: "n1", IP: netip.MustParseAddr("192.0.2.1")},
		services: map[string]*corev1.Service{}, slices: map[string][]*discoveryv1.EndpointSlice{}, pods: map[string]*corev1.Pod{}}
}

func (w *world) rv() string { w.version++; return strconv.Itoa(w.version) }

// change makes one random change and returns the key it dirties.
func (w *world) change() string {
	i := w.rng.IntN(12)
	key := "default/s" + strconv.Itoa(i)
	switch op := w.rng.IntN(10); {
	case op < 3: // a Service created or changed
		s := svc("s"+strconv.Itoa(i), fmt.Sprintf("10.96.0.%d", i+1), port("http", 80, corev1.ProtocolTCP))
		s.ResourceVersion = w.rv()
		switch w.rng.IntN(5) {
		case 0:
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = int32(30000 + i)
		case 1:
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.Ports[0].NodePort = int32(30000 + i)
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: fmt.Sprintf("198.51.100.%d", i+1)}}
		case 2:
			s.Spec.Ports = append(s.Spec.Ports, port("dns", 53, corev1.ProtocolUDP))
			s.Annotations = map[string]string{AnnotationLBAlgorithm: "maglev"}
		case 3:
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		}
		w.services[key] = s
	case op < 4: // a Service deleted
		delete(w.services, key)
	case op < 8: // its slice rewritten with 0–4 endpoints, some on this node, some not ready
		var eps []ep
		for j := range w.rng.IntN(5) {
			e := ep{addr: fmt.Sprintf("10.244.%d.%d", i, j+1)}
			if w.rng.IntN(2) == 0 {
				e.node = w.node.Name
			}
			if w.rng.IntN(4) == 0 {
				e.ready = ptr.To(false)
			}
			eps = append(eps, e)
		}
		sl := slice("s"+strconv.Itoa(i), "http", 8080, corev1.ProtocolTCP, eps...)
		sl.Ports = append(sl.Ports, discoveryv1.EndpointPort{Name: ptr.To("dns"), Port: ptr.To[int32](5353), Protocol: ptr.To(corev1.ProtocolUDP)})
		sl.ResourceVersion = w.rv()
		w.slices[key] = []*discoveryv1.EndpointSlice{sl}
	case op < 9:
		delete(w.slices, key)
	default: // a pod of the node with a hostPort started or gone
		name := "p" + strconv.Itoa(i%4)
		if w.pods[name] != nil {
			delete(w.pods, name)
		} else {
			w.pods[name] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, ResourceVersion: w.rv()},
				Spec: corev1.PodSpec{NodeName: w.node.Name, Containers: []corev1.Container{{Name: "c",
					Ports: []corev1.ContainerPort{{HostPort: int32(8000 + i%4), ContainerPort: 80}}}}},
				Status: corev1.PodStatus{PodIP: fmt.Sprintf("10.244.99.%d", i%4+1)}}
		}
		return HostPortsKey
	}
	return key
}

// changes makes one to three random changes and returns the keys they dirty, sorted, once each.
func (w *world) changes() []string {
	var keys []string
	for range 1 + w.rng.IntN(3) {
		keys = append(keys, w.change())
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

func (w *world) all() ([]*corev1.Service, []*discoveryv1.EndpointSlice, []*corev1.Pod) {
	var svcs []*corev1.Service
	var eps []*discoveryv1.EndpointSlice
	var pods []*corev1.Pod
	for _, s := range w.services {
		svcs = append(svcs, s)
	}
	for _, s := range w.slices {
		eps = append(eps, s...)
	}
	for _, p := range w.pods {
		pods = append(pods, p)
	}
	return svcs, eps, pods
}

// recompile applies the dirty keys to c as the proxy does.
func (w *world) recompile(c *Compiler, keys []string) []ServiceChange {
	var out []ServiceChange
	for _, key := range keys {
		if key == HostPortsKey {
			_, _, pods := w.all()
			out = append(out, c.RecompileHostPorts(pods))
			continue
		}
		out = append(out, c.Recompile(key, w.services[key], w.slices[key]))
	}
	return out
}

// groupsOf is every frontend c's groups hold, by name.
func groupsOf(c *Compiler) []Service {
	var out []Service
	for _, g := range c.groups {
		out = append(out, g...)
	}
	slices.SortFunc(out, func(a, b Service) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// Recompiling the changed Services one by one leaves the compiler where compiling the whole
// state would: the same frontends and backends, each with the id the compiler's table gives
// its name, no two alike, and the Old of each change what the previous state had.
func TestRecompileAgreesWithCompile(t *testing.T) {
	for seed := range uint64(20) {
		w := newWorld(seed)
		inc := &Compiler{Node: w.node, IDs: map[string]uint32{}}
		inc.Compile(w.all())
		prev := map[string][]Service{}
		for step := range 60 {
			keys := w.changes()
			for _, ch := range w.recompile(inc, keys) {
				if show(ch.Old) != show(prev[ch.Key]) {
					t.Fatalf("seed %d step %d: %s's old frontends\n%s\nwant what the last step made\n%s", seed, step, ch.Key, show(ch.Old), show(prev[ch.Key]))
				}
			}
			svcs, eps, pods := w.all()
			whole := Compile(svcs, eps, pods, map[string]uint32{}, w.node)
			if got, want := show(groupsOf(inc)), show(whole); got != want {
				t.Fatalf("seed %d step %d (changed %v):\nrecompiled\n%s\nwhole\n%s", seed, step, keys, got, want)
			}
			ids := map[uint32]string{}
			for _, s := range groupsOf(inc) {
				if s.ID == 0 || inc.IDs[s.Name] != s.ID {
					t.Fatalf("seed %d step %d: %s has id %d, the table %d", seed, step, s.Name, s.ID, inc.IDs[s.Name])
				}
				if other, dup := ids[s.ID]; dup {
					t.Fatalf("seed %d step %d: %s and %s share id %d", seed, step, s.Name, other, s.ID)
				}
				ids[s.ID] = s.Name
			}
			if len(inc.IDs) != len(ids) || len(inc.used) != len(ids) {
				t.Fatalf("seed %d step %d: %d ids in the table, %d used, %d frontends", seed, step, len(inc.IDs), len(inc.used), len(ids))
			}
			prev = map[string][]Service{}
			for k, g := range inc.groups {
				prev[k] = g
			}
			// Now and then a whole compilation (the proxy's resync) in between.
			if w.rng.IntN(10) == 0 {
				inc.Compile(svcs, eps, pods)
			}
		}
	}
}
