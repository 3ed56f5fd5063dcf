package services

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/dataplane/programs"
)

func svc(name, ip string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}, Ports: ports, Type: corev1.ServiceTypeClusterIP}}
}

func port(name string, p int32, proto corev1.Protocol) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: p, Protocol: proto}
}

type ep struct {
	addr                        string
	ready, serving, terminating *bool
	node                        string
}

func slice(svcName string, portName string, target int32, proto corev1.Protocol, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: svcName + "-x",
		Labels: map[string]string{discoveryv1.LabelServiceName: svcName}}, AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(target), Protocol: ptr.To(proto)}}}
	for _, e := range eps {
		d := discoveryv1.Endpoint{Addresses: []string{e.addr},
			Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating}}
		if e.node != "" {
			d.NodeName = ptr.To(e.node)
		}
		s.Endpoints = append(s.Endpoints, d)
	}
	return s
}

func show(out []Service) string {
	s := ""
	for _, x := range out {
		var bs []string
		for _, b := range x.Backends {
			t := fmt.Sprintf("%s:%d", b.Addr, b.Port)
			if b.Local {
				t += "(local)"
			}
			bs = append(bs, t)
		}
		local := ""
		if x.ExternalLocal {
			local = " etp=Local"
		}
		if x.Maglev {
			local += " maglev"
		}
		if x.HostNetnsOnly {
			local += " hostns"
		}
		s += fmt.Sprintf("%s %s:%d/%s %v aff=%s%s; ", x.Name, x.Frontend.Addr, x.Frontend.Port, x.Frontend.Proto, bs, x.Affinity, local)
	}
	return s
}

func TestCompile(t *testing.T) {
	yes, no := ptr.To(true), ptr.To(false)
	web := svc("web", "10.96.0.10", port("http", 80, corev1.ProtocolTCP))
	for _, tc := range []struct {
		name   string
		svcs   []*corev1.Service
		slices []*discoveryv1.EndpointSlice
		want   string
	}{
		{"no endpoints: a frontend with no backends (refuses)", []*corev1.Service{web}, nil,
			"default/web:http/TCP 10.96.0.10:80/TCP [] aff=0s; "},
		{"ready endpoints, sorted and deduplicated, nil ready counts as ready", []*corev1.Service{web},
			[]*discoveryv1.EndpointSlice{slice("web", "http", 8080, corev1.ProtocolTCP, ep{addr: "10.244.2.1", ready: yes}, ep{addr: "10.244.1.1"}, ep{addr: "10.244.2.1", ready: yes})},
			"default/web:http/TCP 10.96.0.10:80/TCP [10.244.1.1:8080 10.244.2.1:8080] aff=0s; "},
		{"not ready left out", []*corev1.Service{web},
			[]*discoveryv1.EndpointSlice{slice("web", "http", 8080, corev1.ProtocolTCP, ep{addr: "10.244.1.1", ready: yes}, ep{addr: "10.244.1.2", ready: no})},
			"default/web:http/TCP 10.96.0.10:80/TCP [10.244.1.1:8080] aff=0s; "},
		{"serving terminating only when nothing is ready", []*corev1.Service{web},
			[]*discoveryv1.EndpointSlice{slice("web", "http", 8080, corev1.ProtocolTCP, ep{addr: "10.244.1.2", ready: no, serving: yes, terminating: yes}, ep{addr: "10.244.1.3", ready: no, serving: no, terminating: yes})},
			"default/web:http/TCP 10.96.0.10:80/TCP [10.244.1.2:8080] aff=0s; "},
		{"terminating ignored while something is ready", []*corev1.Service{web},
			[]*discoveryv1.EndpointSlice{slice("web", "http", 8080, corev1.ProtocolTCP, ep{addr: "10.244.1.1", ready: yes}, ep{addr: "10.244.1.2", ready: no, serving: yes, terminating: yes})},
			"default/web:http/TCP 10.96.0.10:80/TCP [10.244.1.1:8080] aff=0s; "},
		{"port matched by name and protocol", []*corev1.Service{svc("dns", "10.96.0.53", port("dns", 53, corev1.ProtocolUDP), port("dns-tcp", 53, corev1.ProtocolTCP))},
			[]*discoveryv1.EndpointSlice{slice("dns", "dns", 5353, corev1.ProtocolUDP, ep{addr: "10.244.1.5"})},
			"default/dns:dns-tcp/TCP 10.96.0.53:53/TCP [] aff=0s; default/dns:dns/UDP 10.96.0.53:53/UDP [10.244.1.5:5353] aff=0s; "},
		{"headless and ExternalName have no frontend", []*corev1.Service{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "h"}, Spec: corev1.ServiceSpec{ClusterIP: "None", Ports: []corev1.ServicePort{port("", 80, corev1.ProtocolTCP)}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "x"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.org"}}}, nil, ""},
		{"SCTP skipped, unnamed port named by number", []*corev1.Service{svc("m", "10.96.0.11", port("", 80, corev1.ProtocolTCP), port("s", 9, corev1.ProtocolSCTP))}, nil,
			"default/m:80/TCP 10.96.0.11:80/TCP [] aff=0s; "},
		{"ClientIP affinity with its default timeout", []*corev1.Service{func() *corev1.Service {
			s := svc("a", "10.96.0.12", port("", 80, corev1.ProtocolTCP))
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			return s
		}()}, nil, "default/a:80/TCP 10.96.0.12:80/TCP [] aff=3h0m0s; "},
		{"internalTrafficPolicy Local keeps this node's endpoints", []*corev1.Service{func() *corev1.Service {
			s := svc("local", "10.96.0.13", port("", 80, corev1.ProtocolTCP))
			s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
			return s
		}()}, []*discoveryv1.EndpointSlice{slice("local", "", 8080, corev1.ProtocolTCP, ep{addr: "10.244.1.1", node: "n1"}, ep{addr: "10.244.2.1", node: "n2"})},
			"default/local:80/TCP 10.96.0.13:80/TCP [10.244.1.1:8080(local)] aff=0s; "},
		{"internalTrafficPolicy Local without a local endpoint refuses", []*corev1.Service{func() *corev1.Service {
			s := svc("local", "10.96.0.13", port("", 80, corev1.ProtocolTCP))
			s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
			return s
		}()}, []*discoveryv1.EndpointSlice{slice("local", "", 8080, corev1.ProtocolTCP, ep{addr: "10.244.2.1", node: "n2"})},
			"default/local:80/TCP 10.96.0.13:80/TCP [] aff=0s; "},
		{"NodePort: a frontend on the node's address, local backends marked", []*corev1.Service{func() *corev1.Service {
			s := svc("np", "10.96.0.14", corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP})
			s.Spec.Type = corev1.ServiceTypeNodePort
			return s
		}()}, []*discoveryv1.EndpointSlice{slice("np", "http", 8080, corev1.ProtocolTCP, ep{addr: "10.244.1.1", node: "n1"}, ep{addr: "10.244.2.1", node: "n2"})},
			"default/np:30080/TCP@nodeport 198.18.0.2:30080/TCP [10.244.1.1:8080(local) 10.244.2.1:8080] aff=0s; default/np:http/TCP 10.96.0.14:80/TCP [10.244.1.1:8080(local) 10.244.2.1:8080] aff=0s; "},
		{"NodePort with externalTrafficPolicy Local: this node's backends only", []*corev1.Service{func() *corev1.Service {
			s := svc("np", "10.96.0.14", corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP})
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			return s
		}()}, []*discoveryv1.EndpointSlice{slice("np", "http", 8080, corev1.ProtocolTCP, ep{addr: "10.244.1.1", node: "n1"}, ep{addr: "10.244.2.1", node: "n2"})},
			"default/np:30080/TCP@nodeport 198.18.0.2:30080/TCP [10.244.1.1:8080(local)] aff=0s etp=Local; default/np:http/TCP 10.96.0.14:80/TCP [10.244.1.1:8080(local) 10.244.2.1:8080] aff=0s; "},
		{"NodePort with ClientIP affinity: both frontends keep the timeout", []*corev1.Service{func() *corev1.Service {
			s := svc("np", "10.96.0.14", corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP})
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
			return s
		}()}, nil, "default/np:30080/TCP@nodeport 198.18.0.2:30080/TCP [] aff=1m0s; default/np:http/TCP 10.96.0.14:80/TCP [] aff=1m0s; "},
		{"LoadBalancer: its address and an externalIP served on the Service's port; eTP Local keeps this node's", []*corev1.Service{func() *corev1.Service {
			s := svc("lb", "10.96.0.16", corev1.ServicePort{Name: "http", Port: 80, NodePort: 30081, Protocol: corev1.ProtocolTCP})
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.ExternalIPs = []string{"192.0.2.7", "198.18.200.1", "fd00::1"}
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.18.200.1"}, {Hostname: "lb.example.com"}}
			return s
		}()}, []*discoveryv1.EndpointSlice{slice("lb", "http", 8080, corev1.ProtocolTCP, ep{addr: "10.244.1.1", node: "n1"}, ep{addr: "10.244.2.1", node: "n2"})},
			"default/lb:30081/TCP@nodeport 198.18.0.2:30081/TCP [10.244.1.1:8080(local)] aff=0s etp=Local; " +
				"default/lb:80/TCP@192.0.2.7 192.0.2.7:80/TCP [10.244.1.1:8080(local)] aff=0s etp=Local; " +
				"default/lb:80/TCP@198.18.200.1 198.18.200.1:80/TCP [10.244.1.1:8080(local)] aff=0s etp=Local; " +
				"default/lb:http/TCP 10.96.0.16:80/TCP [10.244.1.1:8080(local) 10.244.2.1:8080] aff=0s; "},
		{"a ClusterIP Service's stale load-balancer status is not served", []*corev1.Service{func() *corev1.Service {
			s := svc("was-lb", "10.96.0.17", port("", 80, corev1.ProtocolTCP))
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.18.200.2"}}
			return s
		}()}, nil, "default/was-lb:80/TCP 10.96.0.17:80/TCP [] aff=0s; "},
		{"Maglev by annotation", []*corev1.Service{func() *corev1.Service {
			s := svc("mg", "10.96.0.15", port("", 80, corev1.ProtocolTCP))
			s.Annotations = map[string]string{AnnotationLBAlgorithm: "maglev"}
			return s
		}()}, nil, "default/mg:80/TCP 10.96.0.15:80/TCP [] aff=0s maglev; "},
		{"another namespace's slice is not ours", []*corev1.Service{web}, []*discoveryv1.EndpointSlice{func() *discoveryv1.EndpointSlice {
			s := slice("web", "http", 8080, corev1.ProtocolTCP, ep{addr: "10.244.1.1"})
			s.Namespace = "other"
			return s
		}()}, "default/web:http/TCP 10.96.0.10:80/TCP [] aff=0s; "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := show(Compile(tc.svcs, tc.slices, nil, map[string]uint32{}, Node{Name: "n1", IP: netip.MustParseAddr("198.18.0.2")})); got != tc.want {
				t.Errorf("Compile =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestCompileIDsStable(t *testing.T) {
	ids := map[string]uint32{}
	a := svc("a", "10.96.0.1", port("", 80, corev1.ProtocolTCP))
	b := svc("b", "10.96.0.2", port("", 80, corev1.ProtocolTCP))
	first := Compile([]*corev1.Service{a, b}, nil, nil, ids, Node{})
	second := Compile([]*corev1.Service{b, a}, nil, nil, ids, Node{})
	if first[0].ID != second[0].ID || first[1].ID != second[1].ID || first[0].ID == first[1].ID || first[0].ID == 0 {
		t.Errorf("ids %v then %v", first, second)
	}
	Compile([]*corev1.Service{a}, nil, nil, ids, Node{})
	if _, ok := ids["default/b:80/TCP"]; ok || len(ids) != 1 {
		t.Errorf("a deleted service keeps its id: %v", ids)
	}
	// A collision probes to the next free id.
	used := map[uint32]bool{}
	id := newID("x", used)
	used[id] = true
	if newID("x", used) != id+1 {
		t.Error("no probing on collision")
	}
}

func TestEncodeByteOrder(t *testing.T) {
	e := encode([]Service{{Name: "default/web:80/TCP", ID: 7, Affinity: 30 * time.Second,
		Frontend: Frontend{Addr: netip.MustParseAddr("10.96.0.10"), Port: 80, Proto: corev1.ProtocolTCP},
		Backends: []Backend{{Addr: netip.MustParseAddr("10.244.1.2"), Port: 8080}}}})
	for k, v := range e.services {
		if programs.FromAddr4(k.Addr).String() != "10.96.0.10" || programs.FromPort(k.Port) != 80 || k.Proto != protoTCP ||
			v.Id != 7 || v.Count != 1 || v.Flags != svcFlagAffinity || v.AffinityTimeout != 30 {
			t.Errorf("service entry %+v %+v", k, v)
		}
		// The kernel sees the address's bytes in network order.
		if b := netip.MustParseAddr("10.96.0.10").As4(); byte(k.Addr) != b[0] {
			t.Errorf("address byte order: %#x", k.Addr)
		}
	}
	if v := e.backends[programs.SockBackendKey{Id: 7, Slot: 1}]; programs.FromAddr4(v.Addr).String() != "10.244.1.2" || programs.FromPort(v.Port) != 8080 {
		t.Errorf("backend %+v", v)
	}
}

// TestCompilerMemo checks that a Compiler's remembered results always equal a fresh Compile,
// through a sequence of changes: an endpoint added (new slice version), a Service deleted,
// one added, one changed, objects without versions.
func TestCompilerMemo(t *testing.T) {
	versioned := func(o metav1.Object, rv string) { o.SetResourceVersion(rv) }
	web, api, db := svc("web", "10.96.0.10", port("http", 80, corev1.ProtocolTCP)), svc("api", "10.96.0.11", port("", 8080, corev1.ProtocolTCP)),
		svc("db", "10.96.0.12", port("", 5432, corev1.ProtocolTCP))
	webEPs := slice("web", "http", 8080, corev1.ProtocolTCP, ep{addr: "10.244.1.1", node: "n1"})
	apiEPs := slice("api", "", 8080, corev1.ProtocolTCP, ep{addr: "10.244.2.1", node: "n2"})
	for i, o := range []metav1.Object{web, api, db, webEPs, apiEPs} {
		versioned(o, fmt.Sprint(i+1))
	}
	node := Node{Name: "n1", IP: netip.MustParseAddr("198.18.0.2")}
	memoIDs, freshIDs := map[string]uint32{}, map[string]uint32{}
	c := &Compiler{Node: node, IDs: memoIDs}
	step := func(what string, svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice) {
		t.Helper()
		got, want := show(c.Compile(svcs, eps, nil)), show(Compile(svcs, eps, nil, freshIDs, node))
		if got != want {
			t.Errorf("%s: remembered %q, fresh %q", what, got, want)
		}
		if fmt.Sprint(memoIDs) != fmt.Sprint(freshIDs) {
			t.Errorf("%s: ids %v, fresh %v", what, memoIDs, freshIDs)
		}
	}
	step("first", []*corev1.Service{web, api}, []*discoveryv1.EndpointSlice{webEPs, apiEPs})
	step("unchanged", []*corev1.Service{api, web}, []*discoveryv1.EndpointSlice{apiEPs, webEPs})

	webEPs2 := webEPs.DeepCopy()
	webEPs2.Endpoints = append(webEPs2.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.2.9"}})
	versioned(webEPs2, "6")
	step("an endpoint added", []*corev1.Service{web, api}, []*discoveryv1.EndpointSlice{webEPs2, apiEPs})
	step("a Service deleted, another added", []*corev1.Service{web, db}, []*discoveryv1.EndpointSlice{webEPs2, apiEPs})

	web2 := web.DeepCopy()
	web2.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	versioned(web2, "7")
	step("a Service changed", []*corev1.Service{web2, db}, []*discoveryv1.EndpointSlice{webEPs2})
	unversioned := svc("web", "10.96.0.10", port("http", 80, corev1.ProtocolUDP))
	step("no resourceVersion: compiled afresh", []*corev1.Service{unversioned, db}, []*discoveryv1.EndpointSlice{webEPs2})
	if len(c.memo) != 1 {
		t.Errorf("remembered %d Services, want only db (versioned)", len(c.memo))
	}
}

// hpPod is a pod on node with one container's ports, created at minute created.
func hpPod(name, node, ip string, created int, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, created, 0, 0, time.UTC))},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Ports: ports}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip},
	}
}

func hp(hostIP string, hostPort, containerPort int32, proto corev1.Protocol) corev1.ContainerPort {
	return corev1.ContainerPort{HostIP: hostIP, HostPort: hostPort, ContainerPort: containerPort, Protocol: proto}
}

func TestHostPorts(t *testing.T) {
	node := Node{Name: "n1", IP: netip.MustParseAddr("198.18.0.2")}
	with := func(p *corev1.Pod, f func(*corev1.Pod)) *corev1.Pod { f(p); return p }
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		want string
	}{
		{"no hostIP: the node's address and loopback, the pod the one local backend",
			[]*corev1.Pod{hpPod("a", "n1", "10.0.0.5", 0, hp("", 8080, 80, corev1.ProtocolTCP))},
			"ns/a:8080/TCP@hostport@198.18.0.2 198.18.0.2:8080/TCP [10.0.0.5:80(local)] aff=0s etp=Local; " +
				"ns/a:8080/TCP@hostport@127.0.0.1 127.0.0.1:8080/TCP [10.0.0.5:80(local)] aff=0s etp=Local hostns; "},
		{"0.0.0.0 is no hostIP; an empty protocol is TCP",
			[]*corev1.Pod{hpPod("a", "n1", "10.0.0.5", 0, hp("0.0.0.0", 8080, 80, ""))},
			"ns/a:8080/TCP@hostport@198.18.0.2 198.18.0.2:8080/TCP [10.0.0.5:80(local)] aff=0s etp=Local; " +
				"ns/a:8080/TCP@hostport@127.0.0.1 127.0.0.1:8080/TCP [10.0.0.5:80(local)] aff=0s etp=Local hostns; "},
		{"the conformance spec: one port, 127.0.0.1/TCP, the node's address/TCP and /UDP, three pods",
			[]*corev1.Pod{
				hpPod("pod1", "n1", "10.0.0.1", 0, hp("127.0.0.1", 54323, 8080, corev1.ProtocolTCP)),
				hpPod("pod2", "n1", "10.0.0.2", 1, hp("198.18.0.2", 54323, 8080, corev1.ProtocolTCP)),
				hpPod("pod3", "n1", "10.0.0.3", 2, hp("198.18.0.2", 54323, 8080, corev1.ProtocolUDP)),
			},
			"ns/pod1:54323/TCP@hostport@127.0.0.1 127.0.0.1:54323/TCP [10.0.0.1:8080(local)] aff=0s etp=Local hostns; " +
				"ns/pod2:54323/TCP@hostport@198.18.0.2 198.18.0.2:54323/TCP [10.0.0.2:8080(local)] aff=0s etp=Local; " +
				"ns/pod3:54323/UDP@hostport@198.18.0.2 198.18.0.2:54323/UDP [10.0.0.3:8080(local)] aff=0s etp=Local; "},
		{"another address of the node's is served as named",
			[]*corev1.Pod{hpPod("a", "n1", "10.0.0.5", 0, hp("192.0.2.7", 53, 5353, corev1.ProtocolUDP))},
			"ns/a:53/UDP@hostport@192.0.2.7 192.0.2.7:53/UDP [10.0.0.5:5353(local)] aff=0s etp=Local; "},
		{"pods without a hostPort, on other nodes, sharing the node's network, finished or without an address have none",
			[]*corev1.Pod{
				hpPod("plain", "n1", "10.0.0.1", 0, corev1.ContainerPort{ContainerPort: 80}),
				hpPod("elsewhere", "n2", "10.0.1.1", 0, hp("", 80, 80, corev1.ProtocolTCP)),
				with(hpPod("hostnet", "n1", "198.18.0.2", 0, hp("", 81, 81, corev1.ProtocolTCP)), func(p *corev1.Pod) { p.Spec.HostNetwork = true }),
				with(hpPod("done", "n1", "10.0.0.2", 0, hp("", 82, 80, corev1.ProtocolTCP)), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
				with(hpPod("failed", "n1", "10.0.0.3", 0, hp("", 83, 80, corev1.ProtocolTCP)), func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
				hpPod("pending", "n1", "", 0, hp("", 84, 80, corev1.ProtocolTCP)),
			}, ""},
		{"SCTP is not served (the programs are TCP/UDP), nor an IPv6 host address for a pod without an IPv6 address",
			[]*corev1.Pod{hpPod("a", "n1", "10.0.0.5", 0, hp("", 90, 90, corev1.ProtocolSCTP), hp("fd00::1", 91, 91, corev1.ProtocolTCP))}, ""},
		{"a dual-stack pod: a hostIP-less port in both families, :: and an IPv6 address in IPv6 only",
			[]*corev1.Pod{with(hpPod("dual", "n1", "10.0.0.9", 0, hp("", 80, 8080, corev1.ProtocolTCP), hp("::", 81, 8081, corev1.ProtocolUDP), hp("2001:2::2", 82, 8082, corev1.ProtocolTCP)), func(p *corev1.Pod) {
				p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.9"}, {IP: "fd00:10:244::9"}}
			})},
			"ns/dual:80/TCP@hostport@198.18.0.2 198.18.0.2:80/TCP [10.0.0.9:8080(local)] aff=0s etp=Local; " +
				"ns/dual:80/TCP@hostport@127.0.0.1 127.0.0.1:80/TCP [10.0.0.9:8080(local)] aff=0s etp=Local hostns; " +
				"ns/dual:80/TCP@hostport@::1 ::1:80/TCP [fd00:10:244::9:8080(local)] aff=0s etp=Local hostns; " +
				"ns/dual:81/UDP@hostport@::1 ::1:81/UDP [fd00:10:244::9:8081(local)] aff=0s etp=Local hostns; " +
				"ns/dual:82/TCP@hostport@2001:2::2 2001:2::2:82/TCP [fd00:10:244::9:8082(local)] aff=0s etp=Local; "},
		{"the pod's IPv4 address is found among podIPs",
			[]*corev1.Pod{with(hpPod("dual", "n1", "fd00::5", 0, hp("127.0.0.1", 9000, 90, corev1.ProtocolTCP)), func(p *corev1.Pod) {
				p.Status.PodIPs = []corev1.PodIP{{IP: "fd00::5"}, {IP: "10.0.0.9"}}
			})},
			"ns/dual:9000/TCP@hostport@127.0.0.1 127.0.0.1:9000/TCP [10.0.0.9:90(local)] aff=0s etp=Local hostns; "},
		{"a sidecar's ports are mapped, a plain init container's are not",
			[]*corev1.Pod{with(hpPod("a", "n1", "10.0.0.5", 0), func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{
					{Name: "side", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Ports: []corev1.ContainerPort{hp("127.0.0.1", 7000, 70, corev1.ProtocolTCP)}},
					{Name: "init", Ports: []corev1.ContainerPort{hp("127.0.0.1", 7001, 71, corev1.ProtocolTCP)}},
				}
			})},
			"ns/a:7000/TCP@hostport@127.0.0.1 127.0.0.1:7000/TCP [10.0.0.5:70(local)] aff=0s etp=Local hostns; "},
		{"two pods on one frontend (one being replaced): the older keeps it, whatever the order given",
			[]*corev1.Pod{
				hpPod("new", "n1", "10.0.0.2", 5, hp("127.0.0.1", 8080, 80, corev1.ProtocolTCP)),
				hpPod("old", "n1", "10.0.0.1", 1, hp("127.0.0.1", 8080, 80, corev1.ProtocolTCP)),
			},
			"ns/old:8080/TCP@hostport@127.0.0.1 127.0.0.1:8080/TCP [10.0.0.1:80(local)] aff=0s etp=Local hostns; "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := show(HostPorts(tc.pods, node)); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	t.Run("a node without an address serves a hostIP-less port on loopback only", func(t *testing.T) {
		got := show(HostPorts([]*corev1.Pod{hpPod("a", "n1", "10.0.0.5", 0, hp("", 8080, 80, corev1.ProtocolTCP))}, Node{Name: "n1"}))
		if want := "ns/a:8080/TCP@hostport@127.0.0.1 127.0.0.1:8080/TCP [10.0.0.5:80(local)] aff=0s etp=Local hostns; "; got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})
}

// dualSlice is slice with another address type and name.
func dualSlice(s *discoveryv1.EndpointSlice, typ discoveryv1.AddressType) *discoveryv1.EndpointSlice {
	s.AddressType = typ
	s.Name += "-" + strings.ToLower(string(typ))
	return s
}

// A dual-stack node compiles each Service's frontends in the families it has, each with the
// endpoints of its family; NodePorts and hostPorts are served on the node's address of each.
func TestCompileDualStack(t *testing.T) {
	node := Node{Name: "n1", IP: netip.MustParseAddr("198.18.0.2"), IP6: netip.MustParseAddr("2001:2::2")}
	dual := svc("dual", "10.96.0.20", corev1.ServicePort{Name: "http", Port: 80, NodePort: 30090, Protocol: corev1.ProtocolTCP})
	dual.Spec.Type = corev1.ServiceTypeNodePort
	dual.Spec.ClusterIPs = []string{"10.96.0.20", "fd00:10:96::20"}
	dual.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	six := svc("six", "fd00:10:96::21", corev1.ServicePort{Name: "dns", Port: 53, NodePort: 30053, Protocol: corev1.ProtocolUDP})
	six.Spec.Type = corev1.ServiceTypeLoadBalancer
	six.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	six.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	six.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "2001:2:0:100::1"}, {IP: "198.18.200.9"}}
	slices := []*discoveryv1.EndpointSlice{
		slice("dual", "http", 8080, corev1.ProtocolTCP, ep{addr: "10.244.1.1", node: "n1"}, ep{addr: "10.244.2.1", node: "n2"}),
		dualSlice(slice("dual", "http", 8080, corev1.ProtocolTCP, ep{addr: "fd00:10:244:1::1", node: "n1"}, ep{addr: "fd00:10:244:2::1", node: "n2"}), discoveryv1.AddressTypeIPv6),
		dualSlice(slice("six", "dns", 5353, corev1.ProtocolUDP, ep{addr: "fd00:10:244:1::7", node: "n1"}, ep{addr: "fd00:10:244:2::7", node: "n2"}), discoveryv1.AddressTypeIPv6),
		// An IPv4 address in an IPv6 slice (a broken writer) is no IPv6 backend.
		dualSlice(slice("six", "dns", 5353, corev1.ProtocolUDP, ep{addr: "10.244.1.9", node: "n1"}), discoveryv1.AddressTypeIPv6),
	}
	got := show(Compile([]*corev1.Service{dual, six}, slices, nil, map[string]uint32{}, node))
	want := "default/dual:30090/TCP@nodeport 198.18.0.2:30090/TCP [10.244.1.1:8080(local) 10.244.2.1:8080] aff=0s; " +
		"default/dual:30090/TCP@nodeport6 2001:2::2:30090/TCP [fd00:10:244:1::1:8080(local) fd00:10:244:2::1:8080] aff=0s; " +
		"default/dual:http/TCP@10.96.0.20 10.96.0.20:80/TCP [10.244.1.1:8080(local) 10.244.2.1:8080] aff=0s; " +
		"default/dual:http/TCP@fd00:10:96::20 fd00:10:96::20:80/TCP [fd00:10:244:1::1:8080(local) fd00:10:244:2::1:8080] aff=0s; " +
		"default/six:30053/UDP@nodeport6 2001:2::2:30053/UDP [fd00:10:244:1::7:5353(local)] aff=0s etp=Local; " +
		"default/six:53/UDP@2001:2:0:100::1 2001:2:0:100::1:53/UDP [fd00:10:244:1::7:5353(local)] aff=0s etp=Local; " +
		"default/six:dns/UDP fd00:10:96::21:53/UDP [fd00:10:244:1::7:5353(local) fd00:10:244:2::7:5353] aff=0s; "
	if got != want {
		t.Errorf("Compile =\n%s\nwant\n%s", strings.ReplaceAll(got, "; ", ";\n"), strings.ReplaceAll(want, "; ", ";\n"))
	}
	// The maps: IPv6 frontends and backends in their own maps, ids from one space.
	m := encode(Compile([]*corev1.Service{dual, six}, slices, nil, map[string]uint32{}, node))
	if len(m.services) != 2 || len(m.services6) != 5 || len(m.backends) != 4 || len(m.backends6) != 8 || len(m.names) != 7 {
		t.Errorf("encoded %v", m.counts())
	}
	for k, v := range m.services6 {
		for slot := uint32(1); slot <= uint32(v.Count); slot++ {
			if _, ok := m.backends6[programs.SockBackendKey{Id: v.Id, Slot: slot}]; !ok {
				t.Errorf("%s: slot %d has no IPv6 backend", k.Frontend(), slot)
			}
		}
	}
}

// A Service that holds an address and port keeps it against a pod's hostPort; the pod's other
// frontends stay, and each frontend gets an id.
func TestCompileHostPortYieldsToService(t *testing.T) {
	node := Node{Name: "n1", IP: netip.MustParseAddr("198.18.0.2")}
	lb := svc("web", "10.96.0.10", port("http", 80, corev1.ProtocolTCP))
	lb.Spec.ExternalIPs = []string{"198.18.0.2"}
	pods := []*corev1.Pod{hpPod("a", "n1", "10.0.0.5", 0, hp("", 80, 8080, corev1.ProtocolTCP))}
	out := Compile([]*corev1.Service{lb}, nil, pods, map[string]uint32{}, node)
	got := map[string]string{}
	for _, s := range out {
		if s.ID == 0 {
			t.Errorf("%s has no id", s.Name)
		}
		got[netip.AddrPortFrom(s.Frontend.Addr, s.Frontend.Port).String()] = s.Name
	}
	want := map[string]string{
		"198.18.0.2:80": "default/web:80/TCP@198.18.0.2",
		"10.96.0.10:80": "default/web:http/TCP",
		"127.0.0.1:80":  "ns/a:80/TCP@hostport@127.0.0.1",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("frontends: got %v, want %v", got, want)
	}
}

// The proxy resyncs on a pod change only for this node's pods with host ports.
func TestHasHostPorts(t *testing.T) {
	withPort := hpPod("a", "n1", "10.0.0.5", 0, hp("", 8080, 80, corev1.ProtocolTCP))
	for _, tc := range []struct {
		name string
		obj  any
		want bool
	}{
		{"this node's, with a host port", withPort, true},
		{"another node's", hpPod("b", "n2", "10.0.1.5", 0, hp("", 8080, 80, corev1.ProtocolTCP)), false},
		{"no host port", hpPod("c", "n1", "10.0.0.6", 0, corev1.ContainerPort{ContainerPort: 80}), false},
		{"not scheduled yet", hpPod("d", "", "", 0, hp("", 8080, 80, corev1.ProtocolTCP)), false},
		{"a tombstone (its last state unknown)", cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: withPort}, true},
	} {
		if got := HasHostPorts(tc.obj, "n1"); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
