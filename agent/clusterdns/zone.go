package clusterdns

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// SchemaVersion is the version of the Kubernetes DNS specification the zone follows
// (github.com/kubernetes/dns docs/specification.md), answered at dns-version.<zone>.
const SchemaVersion = "1.1.0"

// TTL of every record, as CoreDNS's kubernetes plugin defaults: short, because the cluster
// changes under it.
const TTL = 5

// Inputs are the objects the zone is built from.
type Inputs struct {
	// Domain is the cluster domain ("cluster.local").
	Domain   string
	Services []*corev1.Service
	Slices   []*discoveryv1.EndpointSlice
	Pods     []*corev1.Pod
	// Nameserver is the cluster DNS Service's address, the zone's NS (none: no NS record).
	Nameserver string
}

// Zone is the cluster's records, built once per change and read by every query: owner
// names (lower case, fully qualified) to their records by type.
type Zone struct {
	domain string
	names  map[string]map[uint16][]dns.RR
	// exists holds every owner name and each of its ancestors in the zone: a name that
	// exists without records of the type asked is NODATA, any other NXDOMAIN.
	exists map[string]bool
	// ptr holds the reverse names (in-addr.arpa, ip6.arpa) the cluster answers for.
	ptr map[string][]dns.RR
	soa dns.RR
}

// Build makes the zone.
func Build(in Inputs) *Zone {
	domain := dns.Fqdn(strings.ToLower(strings.Trim(in.Domain, ".")))
	z := &Zone{domain: domain, names: map[string]map[uint16][]dns.RR{}, exists: map[string]bool{}, ptr: map[string][]dns.RR{}}
	z.soa = &dns.SOA{Hdr: dns.RR_Header{Name: domain, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: TTL},
		Ns: "ns.dns." + domain, Mbox: "hostmaster." + domain, Serial: 1, Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: TTL}
	z.add(z.soa)
	z.add(&dns.TXT{Hdr: hdr("dns-version."+domain, dns.TypeTXT), Txt: []string{SchemaVersion}})
	if a, err := netip.ParseAddr(in.Nameserver); err == nil {
		z.add(&dns.NS{Hdr: hdr(domain, dns.TypeNS), Ns: "ns.dns." + domain})
		z.add(addrRR("ns.dns."+domain, a))
	}

	slices := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range in.Slices {
		if svc := s.Labels[discoveryv1.LabelServiceName]; svc != "" {
			slices[s.Namespace+"/"+svc] = append(slices[s.Namespace+"/"+svc], s)
		}
	}
	for _, svc := range in.Services {
		z.service(svc, slices[svc.Namespace+"/"+svc.Name])
	}
	for _, p := range in.Pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, ip := range podIPs(p) {
			// a-b-c-d.<namespace>.pod.<zone>, for a pod in that namespace with that address
			// (CoreDNS's "pods verified").
			z.add(addrRR(dashed(ip)+"."+p.Namespace+".pod."+domain, ip))
		}
	}
	for name := range z.names {
		for n := name; strings.HasSuffix(n, domain); n = parent(n) {
			z.exists[n] = true
			if n == domain {
				break
			}
		}
	}
	return z
}

func (z *Zone) service(svc *corev1.Service, slices []*discoveryv1.EndpointSlice) {
	base := svc.Name + "." + svc.Namespace + ".svc." + z.domain
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		if svc.Spec.ExternalName != "" {
			z.add(&dns.CNAME{Hdr: hdr(base, dns.TypeCNAME), Target: dns.Fqdn(strings.ToLower(svc.Spec.ExternalName))})
		}
	case svc.Spec.ClusterIP == corev1.ClusterIPNone:
		z.headless(svc, base, slices)
	case svc.Spec.ClusterIP != "":
		ips := svc.Spec.ClusterIPs
		if len(ips) == 0 {
			ips = []string{svc.Spec.ClusterIP}
		}
		for _, s := range ips {
			ip, err := netip.ParseAddr(s)
			if err != nil {
				continue
			}
			z.add(addrRR(base, ip))
			z.addPTR(ip, base)
		}
		for _, p := range svc.Spec.Ports {
			if p.Name != "" {
				z.add(srv(p.Name, p.Protocol, base, uint16(p.Port), base))
			}
		}
	}
}

// headless: the Service's name has every ready endpoint's address; each endpoint has a name
// of its own under it (its hostname, or its address dashed) with its SRV records; a Service
// with no ready endpoint has no name at all (NXDOMAIN).
func (z *Zone) headless(svc *corev1.Service, base string, slices []*discoveryv1.EndpointSlice) {
	// Slices of a Service may repeat an endpoint while it moves between them: once each.
	seen := map[string]bool{}
	sort.Slice(slices, func(i, j int) bool { return slices[i].Name < slices[j].Name })
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready && !svc.Spec.PublishNotReadyAddresses {
				continue
			}
			for _, a := range ep.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil {
					continue
				}
				label := dashed(ip)
				if ep.Hostname != nil && *ep.Hostname != "" {
					label = strings.ToLower(*ep.Hostname)
				}
				target := label + "." + base
				if seen[target+"|"+a] {
					continue
				}
				seen[target+"|"+a] = true
				z.add(addrRR(base, ip))
				z.add(addrRR(target, ip))
				if ep.Hostname != nil && *ep.Hostname != "" {
					z.addPTR(ip, target)
				}
				for _, p := range s.Ports {
					if p.Name != nil && *p.Name != "" && p.Port != nil {
						proto := corev1.ProtocolTCP
						if p.Protocol != nil {
							proto = *p.Protocol
						}
						z.add(srv(*p.Name, proto, base, uint16(*p.Port), target))
					}
				}
			}
		}
	}
}

func (z *Zone) add(rr dns.RR) {
	h := rr.Header()
	byType := z.names[h.Name]
	if byType == nil {
		byType = map[uint16][]dns.RR{}
		z.names[h.Name] = byType
	}
	for _, have := range byType[h.Rrtype] {
		if dns.IsDuplicate(have, rr) {
			return
		}
	}
	byType[h.Rrtype] = append(byType[h.Rrtype], rr)
}

func (z *Zone) addPTR(ip netip.Addr, target string) {
	name, err := dns.ReverseAddr(ip.String())
	if err != nil {
		return
	}
	for _, have := range z.ptr[name] {
		if have.(*dns.PTR).Ptr == target {
			return
		}
	}
	z.ptr[name] = append(z.ptr[name], &dns.PTR{Hdr: hdr(name, dns.TypePTR), Ptr: target})
}

// Answer is the zone's reply to one question.
type Answer struct {
	// Ours is false for a name the cluster does not answer for (forward it).
	Ours   bool
	Rcode  int
	Answer []dns.RR
	// Ns holds the SOA of a negative answer.
	Ns    []dns.RR
	Extra []dns.RR
	// External is the target of a CNAME that leaves the zone, to resolve elsewhere.
	External string
}

// Lookup answers q from the zone. Owner names in the answer are written as q spells them.
func (z *Zone) Lookup(q dns.Question) Answer {
	name := strings.ToLower(dns.Fqdn(q.Name))
	if isReverse(name) {
		rrs, ok := z.ptr[name]
		if !ok {
			return Answer{} // not a cluster address: the world's reverse zones say
		}
		if q.Qtype != dns.TypePTR && q.Qtype != dns.TypeANY {
			return Answer{Ours: true, Rcode: dns.RcodeSuccess}
		}
		return Answer{Ours: true, Rcode: dns.RcodeSuccess, Answer: spelled(rrs, q.Name)}
	}
	if name != z.domain && !strings.HasSuffix(name, "."+z.domain) {
		return Answer{}
	}
	a := Answer{Ours: true, Rcode: dns.RcodeSuccess}
	byType, ok := z.names[name]
	if !ok {
		a.Ns = []dns.RR{z.soa}
		if !z.exists[name] {
			a.Rcode = dns.RcodeNameError
		}
		return a
	}
	var rrs []dns.RR
	switch {
	case q.Qtype == dns.TypeANY:
		for _, t := range sortedTypes(byType) {
			rrs = append(rrs, byType[t]...)
		}
	case len(byType[dns.TypeCNAME]) > 0 && q.Qtype != dns.TypeCNAME:
		cname := byType[dns.TypeCNAME][0].(*dns.CNAME)
		rrs = []dns.RR{cname}
		// A target in the zone is answered here; one outside is the resolver's to follow.
		if t, ok := z.names[cname.Target]; ok {
			a.Answer = append(spelled(rrs, q.Name), t[q.Qtype]...)
			return a
		}
		if cname.Target != z.domain && !strings.HasSuffix(cname.Target, "."+z.domain) {
			a.External = cname.Target
		}
	default:
		rrs = byType[q.Qtype]
	}
	if len(rrs) == 0 {
		a.Ns = []dns.RR{z.soa}
		return a
	}
	a.Answer = spelled(rrs, q.Name)
	if q.Qtype == dns.TypeSRV {
		for _, rr := range rrs {
			if s, ok := rr.(*dns.SRV); ok {
				if t, ok := z.names[s.Target]; ok {
					a.Extra = append(a.Extra, t[dns.TypeA]...)
					a.Extra = append(a.Extra, t[dns.TypeAAAA]...)
				}
			}
		}
	}
	return a
}

// Names is how many owner names the zone holds.
func (z *Zone) Names() int { return len(z.names) + len(z.ptr) }

// spelled copies rrs with the owner name as the question spelled it (resolvers that
// randomize the case of their questions compare it).
func spelled(rrs []dns.RR, name string) []dns.RR {
	out := make([]dns.RR, len(rrs))
	for i, rr := range rrs {
		c := dns.Copy(rr)
		if strings.EqualFold(c.Header().Name, name) {
			c.Header().Name = name
		}
		out[i] = c
	}
	return out
}

func sortedTypes(m map[uint16][]dns.RR) []uint16 {
	var ts []uint16
	for t := range m {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return ts
}

func hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: TTL}
}

func addrRR(name string, ip netip.Addr) dns.RR {
	if ip.Is4() {
		return &dns.A{Hdr: hdr(name, dns.TypeA), A: ip.AsSlice()}
	}
	return &dns.AAAA{Hdr: hdr(name, dns.TypeAAAA), AAAA: ip.AsSlice()}
}

// srv is _<port>._<proto>.<base> SRV 0 <weight> <port> <target>; weights are equal
// (the specification leaves them to the implementation).
func srv(port string, proto corev1.Protocol, base string, number uint16, target string) dns.RR {
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	name := fmt.Sprintf("_%s._%s.%s", strings.ToLower(port), strings.ToLower(string(proto)), base)
	return &dns.SRV{Hdr: hdr(name, dns.TypeSRV), Priority: 0, Weight: 100, Port: number, Target: target}
}

// dashed writes an address as a DNS label: 10.244.1.5 → 10-244-1-5, fd00::5 → fd00--5.
func dashed(ip netip.Addr) string {
	if ip.Is4() {
		return strings.ReplaceAll(ip.String(), ".", "-")
	}
	return strings.ReplaceAll(ip.String(), ":", "-")
}

func podIPs(p *corev1.Pod) []netip.Addr {
	var out []netip.Addr
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		if a, err := netip.ParseAddr(p.Status.PodIP); err == nil {
			out = append(out, a)
		}
	}
	return out
}

func parent(name string) string {
	if i := strings.IndexByte(name, '.'); i >= 0 && i+1 < len(name) {
		return name[i+1:]
	}
	return "."
}

func isReverse(name string) bool {
	return strings.HasSuffix(name, ".in-addr.arpa.") || strings.HasSuffix(name, ".ip6.arpa.")
}
