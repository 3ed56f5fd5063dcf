package clusterdns

import (
	"sort"
	"strings"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func service(ns, name, clusterIP string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: clusterIP, Ports: ports}}
}

func slice(ns, svc, name string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{discoveryv1.LabelServiceName: svc}}, AddressType: discoveryv1.AddressTypeIPv4, Ports: ports, Endpoints: eps}
}

func endpoint(ip string, ready bool, hostname string) discoveryv1.Endpoint {
	ep := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}
	if hostname != "" {
		ep.Hostname = ptr.To(hostname)
	}
	return ep
}

func testZone() *Zone {
	web := service("default", "web", "10.96.0.20", corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
		corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}, corev1.ServicePort{Port: 9000})
	dual := service("default", "dual", "10.96.0.21")
	dual.Spec.ClusterIPs = []string{"10.96.0.21", "fd00::21"}
	db := service("data", "db", corev1.ClusterIPNone)
	empty := service("data", "nobody", corev1.ClusterIPNone)
	notReady := service("data", "early", corev1.ClusterIPNone)
	notReady.Spec.PublishNotReadyAddresses = true
	ext := service("default", "search", "")
	ext.Spec.Type, ext.Spec.ExternalName = corev1.ServiceTypeExternalName, "www.Example.com"
	alias := service("default", "alias", "")
	alias.Spec.Type, alias.Spec.ExternalName = corev1.ServiceTypeExternalName, "web.default.svc.cluster.local"
	dbPorts := []discoveryv1.EndpointPort{{Name: ptr.To("pg"), Port: ptr.To(int32(5432)), Protocol: ptr.To(corev1.ProtocolTCP)}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.5", PodIPs: []corev1.PodIP{{IP: "10.244.1.5"}}}}
	done := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "done"},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded, PodIP: "10.244.1.6"}}
	return Build(Inputs{Domain: "cluster.local", Nameserver: "10.96.0.10",
		Services: []*corev1.Service{web, dual, db, empty, notReady, ext, alias},
		Slices: []*discoveryv1.EndpointSlice{
			slice("data", "db", "db-b", dbPorts, endpoint("10.244.2.8", true, ""), endpoint("10.244.2.9", false, "")),
			slice("data", "db", "db-a", dbPorts, endpoint("10.244.2.7", true, "db-0"), endpoint("10.244.2.7", true, "db-0")),
			slice("data", "nobody", "nobody-a", nil, endpoint("10.244.2.10", false, "")),
			slice("data", "early", "early-a", nil, endpoint("10.244.2.11", false, "e-0")),
		},
		Pods: []*corev1.Pod{pod, done}})
}

// rdata is each answer record without its owner, TTL and class: "A 10.96.0.20".
func rdata(rrs []dns.RR) string {
	var out []string
	for _, rr := range rrs {
		f := strings.Fields(rr.String())
		out = append(out, strings.Join(append([]string{f[3]}, f[4:]...), " "))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

func TestZoneLookup(t *testing.T) {
	z := testZone()
	for _, c := range []struct {
		name   string
		qtype  uint16
		rcode  int
		answer string
		extra  string
		ours   bool
	}{
		// Services with a ClusterIP.
		{"web.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, "A 10.96.0.20", "", true},
		{"WEB.Default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, "A 10.96.0.20", "", true},
		{"web.default.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, "", "", true}, // NODATA
		{"dual.default.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, "AAAA fd00::21", "", true},
		{"_http._tcp.web.default.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess, "SRV 0 100 80 web.default.svc.cluster.local.", "A 10.96.0.20", true},
		{"_dns._udp.web.default.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess, "SRV 0 100 53 web.default.svc.cluster.local.", "A 10.96.0.20", true},
		{"_http._udp.web.default.svc.cluster.local.", dns.TypeSRV, dns.RcodeNameError, "", "", true}, // a rule for one protocol is not another's
		{"20.0.96.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, "PTR web.default.svc.cluster.local.", "", true},
		{"missing.default.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, "", "", true},
		{"web.other.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, "", "", true},
		// What a search path tries first for "web.default": not a name, so the client goes on.
		{"web.default.default.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, "", "", true},
		// Headless: every ready endpoint, once; hostnames and dashed addresses under it.
		{"db.data.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, "A 10.244.2.7; A 10.244.2.8", "", true},
		{"db-0.db.data.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, "A 10.244.2.7", "", true},
		{"10-244-2-8.db.data.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, "A 10.244.2.8", "", true},
		{"10-244-2-9.db.data.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, "", "", true}, // not ready
		{"_pg._tcp.db.data.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess,
			"SRV 0 100 5432 10-244-2-8.db.data.svc.cluster.local.; SRV 0 100 5432 db-0.db.data.svc.cluster.local.", "A 10.244.2.7; A 10.244.2.8", true},
		{"7.2.244.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, "PTR db-0.db.data.svc.cluster.local.", "", true},
		{"nobody.data.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, "", "", true}, // no ready endpoint
		{"early.data.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, "A 10.244.2.11", "", true},
		{"e-0.early.data.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, "A 10.244.2.11", "", true},
		// ExternalName: a CNAME; a target in the zone is answered too.
		{"search.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, "CNAME www.example.com.", "", true},
		{"search.default.svc.cluster.local.", dns.TypeCNAME, dns.RcodeSuccess, "CNAME www.example.com.", "", true},
		{"alias.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, "A 10.96.0.20; CNAME web.default.svc.cluster.local.", "", true},
		// Pods: a-b-c-d.<namespace>.pod, for a pod with that address in that namespace.
		{"10-244-1-5.default.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, "A 10.244.1.5", "", true},
		{"10-244-1-5.data.pod.cluster.local.", dns.TypeA, dns.RcodeNameError, "", "", true},
		{"10-244-1-6.default.pod.cluster.local.", dns.TypeA, dns.RcodeNameError, "", "", true}, // finished
		// Empty non-terminals exist (NODATA); the zone's own records.
		{"default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, "", "", true},
		{"svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, "", "", true},
		{"dns-version.cluster.local.", dns.TypeTXT, dns.RcodeSuccess, `TXT "1.1.0"`, "", true},
		{"cluster.local.", dns.TypeNS, dns.RcodeSuccess, "NS ns.dns.cluster.local.", "", true},
		{"ns.dns.cluster.local.", dns.TypeA, dns.RcodeSuccess, "A 10.96.0.10", "", true},
		{"cluster.local.", dns.TypeSOA, dns.RcodeSuccess, "SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 5", "", true},
		// Not the cluster's: forwarded.
		{"www.example.com.", dns.TypeA, 0, "", "", false},
		{"notcluster.local.", dns.TypeA, 0, "", "", false},
		{"1.0.0.127.in-addr.arpa.", dns.TypePTR, 0, "", "", false},
	} {
		a := z.Lookup(dns.Question{Name: c.name, Qtype: c.qtype, Qclass: dns.ClassINET})
		if a.Ours != c.ours || (c.ours && a.Rcode != c.rcode) || rdata(a.Answer) != c.answer || rdata(a.Extra) != c.extra {
			t.Errorf("%s %s: ours %v rcode %s answer %q extra %q; want ours %v rcode %s answer %q extra %q", c.name, dns.TypeToString[c.qtype],
				a.Ours, dns.RcodeToString[a.Rcode], rdata(a.Answer), rdata(a.Extra), c.ours, dns.RcodeToString[c.rcode], c.answer, c.extra)
		}
		if c.ours && len(a.Answer) == 0 && (len(a.Ns) != 1 || a.Ns[0].Header().Rrtype != dns.TypeSOA) && !strings.HasSuffix(c.name, "in-addr.arpa.") {
			t.Errorf("%s %s: a negative answer without the zone's SOA: %v", c.name, dns.TypeToString[c.qtype], a.Ns)
		}
		for _, rr := range a.Answer {
			if strings.EqualFold(rr.Header().Name, c.name) && rr.Header().Name != c.name {
				t.Errorf("%s: answer owner %q not spelled as asked", c.name, rr.Header().Name)
			}
			if rr.Header().Ttl != TTL {
				t.Errorf("%s: TTL %d", c.name, rr.Header().Ttl)
			}
		}
	}
	if a := z.Lookup(dns.Question{Name: "search.default.svc.cluster.local.", Qtype: dns.TypeA}); a.External != "www.example.com." {
		t.Errorf("ExternalName outside the zone: External %q", a.External)
	}
}

func TestZoneOtherDomain(t *testing.T) {
	z := Build(Inputs{Domain: "Corp.Example.", Services: []*corev1.Service{service("a", "b", "10.96.0.5")}})
	a := z.Lookup(dns.Question{Name: "b.a.svc.corp.example.", Qtype: dns.TypeA})
	if rdata(a.Answer) != "A 10.96.0.5" {
		t.Errorf("domain Corp.Example.: %q", rdata(a.Answer))
	}
	if a := z.Lookup(dns.Question{Name: "b.a.svc.cluster.local.", Qtype: dns.TypeA}); a.Ours {
		t.Error("cluster.local answered by a zone for corp.example")
	}
	if a := z.Lookup(dns.Question{Name: "corp.example.", Qtype: dns.TypeNS}); len(a.Answer) != 0 {
		t.Errorf("an NS without a nameserver address: %v", a.Answer)
	}
}

func TestDashed(t *testing.T) {
	for in, want := range map[string]string{"10.244.1.5": "10-244-1-5", "fd00::5": "fd00--5"} {
		if got := dashed(mustAddr(in)); got != want {
			t.Errorf("dashed(%s) = %s, want %s", in, got, want)
		}
	}
}
