package clusterdns

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"

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

// Zone is the cluster's records, read by every query and changed one source at a time: a
// Service (with its EndpointSlices) or a pod contributes its records, and a change to one
// replaces only that source's records, so an agent's work per change is the size of the
// change, not of the cluster (a whole rebuild per change cost an idle agent 0.4 of a core in
// a 10,000-pod cluster, issue 41). Owner names are lower case and fully qualified. A record
// two sources contribute (two Services with one address, say) is held once and counted.
type Zone struct {
	mu     sync.RWMutex
	domain string
	names  map[string]map[uint16][]dns.RR
	// under counts, for each name in the zone, the owner names at or below it: a name
	// under which something exists without records of the type asked is NODATA, any other
	// NXDOMAIN.
	under map[string]int
	// ptr holds the reverse names (in-addr.arpa, ip6.arpa) the cluster answers for.
	ptr map[string][]dns.RR
	soa dns.RR
	// held counts each record (by its text) over the sources that contribute it, with its
	// place in its name's list, so that it leaves the list in constant time.
	held map[string]*holding
	// sources are each source's records, by source key.
	sources map[string][]dns.RR
}

// NewZone is the zone of a cluster with no Services and no pods: its SOA, dns-version and,
// with a nameserver address, its NS.
func NewZone(domain, nameserver string) *Zone {
	domain = dns.Fqdn(strings.ToLower(strings.Trim(domain, ".")))
	z := &Zone{domain: domain, names: map[string]map[uint16][]dns.RR{}, under: map[string]int{}, ptr: map[string][]dns.RR{},
		held: map[string]*holding{}, sources: map[string][]dns.RR{}}
	z.soa = &dns.SOA{Hdr: dns.RR_Header{Name: domain, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: TTL},
		Ns: "ns.dns." + domain, Mbox: "hostmaster." + domain, Serial: 1, Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: TTL}
	var c collector
	c.add(z.soa)
	c.add(&dns.TXT{Hdr: hdr("dns-version."+domain, dns.TypeTXT), Txt: []string{SchemaVersion}})
	if a, err := netip.ParseAddr(nameserver); err == nil {
		c.add(&dns.NS{Hdr: hdr(domain, dns.TypeNS), Ns: "ns.dns." + domain})
		c.add(addrRR("ns.dns."+domain, a))
	}
	z.set("zone", c.rrs)
	return z
}

// Build makes the zone of in at once.
func Build(in Inputs) *Zone {
	z := NewZone(in.Domain, in.Nameserver)
	slices := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range in.Slices {
		if svc := s.Labels[discoveryv1.LabelServiceName]; svc != "" {
			slices[s.Namespace+"/"+svc] = append(slices[s.Namespace+"/"+svc], s)
		}
	}
	for _, svc := range in.Services {
		z.SetService(svc.Namespace+"/"+svc.Name, svc, slices[svc.Namespace+"/"+svc.Name])
	}
	for _, p := range in.Pods {
		z.SetPod(p.Namespace+"/"+p.Name, p)
	}
	return z
}

// SetService replaces the records of the Service key ("namespace/name") with those of svc
// and its slices; a nil svc removes them.
func (z *Zone) SetService(key string, svc *corev1.Service, slices []*discoveryv1.EndpointSlice) {
	var c collector
	if svc != nil {
		c.service(z.domain, svc, slices)
	}
	z.set("service/"+key, c.rrs)
}

// SetPod replaces the records of the pod key ("namespace/name") with those of p: a-b-c-d.
// <namespace>.pod.<zone> for each of its addresses (CoreDNS's "pods verified"), none once it
// has finished; a nil p removes them.
func (z *Zone) SetPod(key string, p *corev1.Pod) {
	var c collector
	if p != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		for _, ip := range podIPs(p) {
			c.add(addrRR(dashed(ip)+"."+p.Namespace+".pod."+z.domain, ip))
		}
	}
	z.set("pod/"+key, c.rrs)
}

// set makes rrs the records of source: what it no longer contributes is released, what it
// newly does is held.
func (z *Zone) set(source string, rrs []dns.RR) {
	z.mu.Lock()
	defer z.mu.Unlock()
	old := z.sources[source]
	if len(old) == 0 && len(rrs) == 0 {
		return
	}
	keep := make(map[string]bool, len(rrs))
	for _, rr := range rrs {
		keep[rr.String()] = true
	}
	had := make(map[string]bool, len(old))
	for _, rr := range old {
		k := rr.String()
		had[k] = true
		if !keep[k] {
			z.release(k, rr)
		}
	}
	for _, rr := range rrs {
		if k := rr.String(); !had[k] {
			z.hold(k, rr)
		}
	}
	if len(rrs) == 0 {
		delete(z.sources, source)
	} else {
		z.sources[source] = rrs
	}
}

// holding is one record held: by how many sources, and where in its list.
type holding struct {
	sources int
	at      int
}

func (z *Zone) hold(k string, rr dns.RR) {
	if h, ok := z.held[k]; ok {
		h.sources++
		return
	}
	h := rr.Header()
	if h.Rrtype == dns.TypePTR {
		z.held[k] = &holding{sources: 1, at: len(z.ptr[h.Name])}
		z.ptr[h.Name] = append(z.ptr[h.Name], rr)
		return
	}
	byType := z.names[h.Name]
	if byType == nil {
		byType = map[uint16][]dns.RR{}
		z.names[h.Name] = byType
		z.count(h.Name, 1)
	}
	z.held[k] = &holding{sources: 1, at: len(byType[h.Rrtype])}
	byType[h.Rrtype] = append(byType[h.Rrtype], rr)
}

func (z *Zone) release(k string, rr dns.RR) {
	held := z.held[k]
	if held.sources--; held.sources > 0 {
		return
	}
	delete(z.held, k)
	h := rr.Header()
	if h.Rrtype == dns.TypePTR {
		if z.ptr[h.Name] = z.cut(z.ptr[h.Name], held.at); len(z.ptr[h.Name]) == 0 {
			delete(z.ptr, h.Name)
		}
		return
	}
	byType := z.names[h.Name]
	if byType[h.Rrtype] = z.cut(byType[h.Rrtype], held.at); len(byType[h.Rrtype]) == 0 {
		delete(byType, h.Rrtype)
	}
	if len(byType) == 0 {
		delete(z.names, h.Name)
		z.count(h.Name, -1)
	}
}

// cut removes rrs[at], moving the last record into its place (queries read the lists only
// under the read lock and copy what they answer, so the list changes in place).
func (z *Zone) cut(rrs []dns.RR, at int) []dns.RR {
	last := len(rrs) - 1
	if at != last {
		rrs[at] = rrs[last]
		z.held[rrs[at].String()].at = at
	}
	rrs[last] = nil
	return rrs[:last]
}

// count adds d to the owner-name count of name and of each of its ancestors in the zone.
func (z *Zone) count(name string, d int) {
	for n := name; strings.HasSuffix(n, z.domain); n = parent(n) {
		if z.under[n] += d; z.under[n] == 0 {
			delete(z.under, n)
		}
		if n == z.domain {
			break
		}
	}
}

// collector gathers one source's records, each once.
type collector struct {
	rrs  []dns.RR
	seen map[string]bool
}

func (c *collector) add(rr dns.RR) {
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	if k := rr.String(); !c.seen[k] {
		c.seen[k] = true
		c.rrs = append(c.rrs, rr)
	}
}

func (c *collector) service(domain string, svc *corev1.Service, slices []*discoveryv1.EndpointSlice) {
	base := svc.Name + "." + svc.Namespace + ".svc." + domain
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		if svc.Spec.ExternalName != "" {
			c.add(&dns.CNAME{Hdr: hdr(base, dns.TypeCNAME), Target: dns.Fqdn(strings.ToLower(svc.Spec.ExternalName))})
		}
	case svc.Spec.ClusterIP == corev1.ClusterIPNone:
		c.headless(svc, base, slices)
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
			c.add(addrRR(base, ip))
			c.addPTR(ip, base)
		}
		for _, p := range svc.Spec.Ports {
			if p.Name != "" {
				c.add(srv(p.Name, p.Protocol, base, uint16(p.Port), base))
			}
		}
	}
}

// headless: the Service's name has every ready endpoint's address; each endpoint has a name
// of its own under it (its hostname, or its address dashed) with its SRV records; a Service
// with no ready endpoint has no name at all (NXDOMAIN).
func (c *collector) headless(svc *corev1.Service, base string, slices []*discoveryv1.EndpointSlice) {
	// Slices of a Service may repeat an endpoint while it moves between them: once each.
	seen := map[string]bool{}
	slices = append([]*discoveryv1.EndpointSlice(nil), slices...)
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
				c.add(addrRR(base, ip))
				c.add(addrRR(target, ip))
				if ep.Hostname != nil && *ep.Hostname != "" {
					c.addPTR(ip, target)
				}
				for _, p := range s.Ports {
					if p.Name != nil && *p.Name != "" && p.Port != nil {
						proto := corev1.ProtocolTCP
						if p.Protocol != nil {
							proto = *p.Protocol
						}
						c.add(srv(*p.Name, proto, base, uint16(*p.Port), target))
					}
				}
			}
		}
	}
}

func (c *collector) addPTR(ip netip.Addr, target string) {
	if name, err := dns.ReverseAddr(ip.String()); err == nil {
		c.add(&dns.PTR{Hdr: hdr(name, dns.TypePTR), Ptr: target})
	}
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
	z.mu.RLock()
	defer z.mu.RUnlock()
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
		if z.under[name] == 0 {
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
func (z *Zone) Names() int {
	z.mu.RLock()
	defer z.mu.RUnlock()
	return len(z.names) + len(z.ptr)
}

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
