// Package clusterdns is the cluster's DNS, served by every agent for the pods of its node:
// the records of the Kubernetes DNS specification (Services, headless endpoints, pods,
// ExternalName, SRV, PTR, dns-version) built from the agent's informers, answered over UDP
// and TCP; names outside the cluster domain are forwarded to the node's resolvers, with a
// cache. The kube-system/kube-dns Service (10.96.0.10) reaches it: its endpoints are the
// nodes' resolvers and its internalTrafficPolicy is Local, so the socket-level balancer
// sends each pod's queries to its own node's.
package clusterdns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	sharedinformers "github.com/skiff-sh/skiff/internal/informers"
	"github.com/skiff-sh/skiff/internal/wellknown"
)

// AddressAnnotation is where an agent publishes its resolver's address (IP:port) on its
// Node; the cluster DNS controller makes it kube-dns's endpoint for that node.
const AddressAnnotation = wellknown.DNSAddressAnnotation

// Informers are the watches the server reads, each from the agent's shared factory (one
// watch per resource for the whole agent).
type Informers struct {
	Services       coreinformers.ServiceInformer
	EndpointSlices discoveryinformers.EndpointSliceInformer
	Pods           coreinformers.PodInformer
	// Start starts the informers asked for so far (sharedinformers.Shared.Start).
	Start func()
}

// Options configure the server.
type Options struct {
	// Domain is the cluster domain (cluster.local).
	Domain string
	// Listen is the address served over UDP and TCP (the node's address, port 53).
	Listen string
	// Forwarder resolves names outside the cluster (nil: they are refused).
	Forwarder *Forwarder
	// Nameserver is the cluster DNS Service's address, the zone's NS.
	Nameserver string
	// Informers are the watches the zone is built from, from the agent's shared factory.
	Informers Informers
	// Listening is called once both sockets are bound, with their address.
	Listening func(addr string)
}

// Server answers DNS queries.
type Server struct {
	o       Options
	log     *slog.Logger
	zone    atomic.Pointer[Zone]
	built   atomic.Int64 // unix ns of the last build
	metrics *Metrics
}

// New returns a server; Run runs it.
func New(o Options, log *slog.Logger) *Server {
	if o.Domain == "" {
		o.Domain = "cluster.local"
	}
	s := &Server{o: o, log: log, metrics: NewMetrics()}
	s.zone.Store(NewZone(o.Domain, o.Nameserver))
	return s
}

// Metrics are the server's Prometheus collectors.
func (s *Server) Metrics() *Metrics { return s.metrics }

// Zone is the zone queries are answered from now.
func (s *Server) Zone() *Zone { return s.zone.Load() }

// Run binds the sockets, then keeps the zone in line with the cluster until ctx ends.
func (s *Server) Run(ctx context.Context, client kubernetes.Interface) error {
	svcs, slices, pods := s.o.Informers.Services, s.o.Informers.EndpointSlices, s.o.Informers.Pods
	// Ask for the informers before starting the factory: it starts only those asked for.
	svcInf, sliceInf, podInf := svcs.Informer(), slices.Informer(), pods.Informer()
	s.o.Informers.Start()
	// Each event marks the one source it changes (a Service, with its slices, or a pod); the
	// loop below replaces only those sources' records.
	var dirty changes
	dirty.kick = make(chan struct{}, 1)
	release, err := sharedinformers.Watch(ctx, dirty.handler(serviceSource), svcInf)
	if err != nil {
		return err
	}
	defer release()
	releaseSlices, err := sharedinformers.Watch(ctx, dirty.handler(sliceSource), sliceInf)
	if err != nil {
		return err
	}
	defer releaseSlices()
	releasePods, err := sharedinformers.Watch(ctx, dirty.handler(podSource), podInf)
	if err != nil {
		return err
	}
	defer releasePods()
	slicesOf := func(namespace, name string) []*discoveryv1.EndpointSlice {
		list, _ := slices.Lister().EndpointSlices(namespace).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name}))
		return list
	}
	apply := func(batch map[string]bool) {
		began := time.Now()
		z := s.zone.Load()
		for key := range batch {
			kind, nsName, _ := strings.Cut(key, ":")
			ns, name, _ := strings.Cut(nsName, "/")
			switch kind {
			case "service":
				svc, err := svcs.Lister().Services(ns).Get(name)
				if err != nil {
					svc = nil // gone
				}
				z.SetService(nsName, svc, slicesOf(ns, name))
			case "pod":
				p, err := pods.Lister().Pods(ns).Get(name)
				if err != nil {
					p = nil
				}
				z.SetPod(nsName, p)
			}
		}
		s.built.Store(time.Now().UnixNano())
		s.metrics.build.Observe(time.Since(began).Seconds())
		s.metrics.names.Set(float64(z.Names()))
	}
	// The informers have synced and every object they hold is marked: the first batch is
	// the whole cluster, later ones what changed.
	apply(dirty.take())

	udp, err := net.ListenPacket("udp", s.o.Listen)
	if err != nil {
		return fmt.Errorf("cluster DNS on %s/udp: %w", s.o.Listen, err)
	}
	tcp, err := net.Listen("tcp", s.o.Listen)
	if err != nil {
		udp.Close()
		return fmt.Errorf("cluster DNS on %s/tcp: %w", s.o.Listen, err)
	}
	servers := []*dns.Server{{PacketConn: udp, Handler: s}, {Listener: tcp, Handler: s}}
	errc := make(chan error, len(servers))
	var started sync.WaitGroup
	for _, srv := range servers {
		started.Add(1)
		srv.NotifyStartedFunc = started.Done
		go func(srv *dns.Server) { errc <- srv.ActivateAndServe() }(srv)
	}
	started.Wait()
	s.log.Info("cluster DNS serving", "address", s.o.Listen, "domain", s.o.Domain, "forward", s.upstreams())
	if s.o.Listening != nil {
		s.o.Listening(s.o.Listen)
	}
	defer func() {
		for _, srv := range servers {
			_ = srv.Shutdown()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return fmt.Errorf("cluster DNS stopped serving: %w", err)
		case <-dirty.kick:
			// Coalesce a burst; a new Service still resolves within tens of milliseconds.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(10 * time.Millisecond):
			}
			apply(dirty.take())
		}
	}
}

func (s *Server) upstreams() []string {
	if s.o.Forwarder == nil {
		return nil
	}
	return s.o.Forwarder.Upstreams
}

// ServeDNS answers one query.
func (s *Server) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	began := time.Now()
	proto := "udp"
	if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		proto = "tcp"
	}
	m, where := s.Answer(context.Background(), r)
	if proto == "udp" {
		// What the client can take: 512 bytes, or what its EDNS0 record says; more sets TC
		// and the client asks again over TCP.
		size := dns.MinMsgSize
		if opt := r.IsEdns0(); opt != nil && int(opt.UDPSize()) > size {
			size = int(opt.UDPSize())
		}
		m.Truncate(size)
	}
	_ = w.WriteMsg(m)
	qtype := "none"
	if len(r.Question) == 1 {
		qtype = typeLabel(r.Question[0].Qtype)
	}
	s.metrics.requests.WithLabelValues(proto, qtype, where).Inc()
	s.metrics.responses.WithLabelValues(dns.RcodeToString[m.Rcode], where).Inc()
	s.metrics.duration.WithLabelValues(where).Observe(time.Since(began).Seconds())
}

// Answer builds the reply to r and says where it came from: "cluster" (the zone),
// "forward" (an upstream), "cache" (a cached upstream answer) or "refused".
func (s *Server) Answer(ctx context.Context, r *dns.Msg) (*dns.Msg, string) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.RecursionAvailable = s.o.Forwarder != nil && len(s.o.Forwarder.Upstreams) > 0
	if opt := r.IsEdns0(); opt != nil {
		m.SetEdns0(dns.DefaultMsgSize, opt.Do())
	}
	if r.Opcode != dns.OpcodeQuery {
		m.Rcode = dns.RcodeNotImplemented
		return m, "refused"
	}
	if len(r.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		return m, "refused"
	}
	q := r.Question[0]
	if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
		m.Rcode = dns.RcodeRefused
		return m, "refused"
	}
	a := s.zone.Load().Lookup(q)
	if a.Ours {
		m.Authoritative = true
		m.Rcode, m.Answer, m.Ns = a.Rcode, a.Answer, a.Ns
		m.Extra = append(m.Extra, a.Extra...)
		if a.External != "" && s.o.Forwarder != nil {
			// An ExternalName's target: the answer carries the CNAME and what it names.
			if up, _, err := s.o.Forwarder.Exchange(ctx, dns.Question{Name: a.External, Qtype: q.Qtype, Qclass: dns.ClassINET}, false); err == nil {
				m.Answer = append(m.Answer, up.Answer...)
			}
		}
		return m, "cluster"
	}
	if s.o.Forwarder == nil {
		m.Rcode = dns.RcodeRefused
		return m, "refused"
	}
	do := false
	if opt := r.IsEdns0(); opt != nil {
		do = opt.Do()
	}
	up, cached, err := s.o.Forwarder.Exchange(ctx, q, do)
	if err != nil {
		if !errors.Is(err, ErrNoUpstream) {
			s.log.Debug("forwarding", "name", q.Name, "err", err)
		}
		m.Rcode = dns.RcodeServerFailure
		if errors.Is(err, ErrNoUpstream) {
			m.Rcode = dns.RcodeRefused
		}
		return m, "refused"
	}
	m.Rcode, m.Answer, m.Ns = up.Rcode, up.Answer, up.Ns
	for _, rr := range up.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			m.Extra = append(m.Extra, rr)
		}
	}
	m.AuthenticatedData = up.AuthenticatedData
	if cached {
		return m, "cache"
	}
	return m, "forward"
}

// changes are the sources ("service:ns/name", "pod:ns/name") whose records are stale.
type changes struct {
	mu   sync.Mutex
	keys map[string]bool
	kick chan struct{}
}

func (c *changes) mark(key string) {
	c.mu.Lock()
	if c.keys == nil {
		c.keys = map[string]bool{}
	}
	c.keys[key] = true
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *changes) take() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := c.keys
	c.keys = nil
	return keys
}

// handler marks the source of each object an informer reports (source gives it, or "").
func (c *changes) handler(source func(obj any) string) cache.ResourceEventHandler {
	on := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if key := source(obj); key != "" {
			c.mark(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: on, DeleteFunc: on,
		// A slice that moves to another Service (its label changed) changes both.
		UpdateFunc: func(old, obj any) { on(old); on(obj) }}
}

func serviceSource(obj any) string {
	if svc, ok := obj.(*corev1.Service); ok {
		return "service:" + svc.Namespace + "/" + svc.Name
	}
	return ""
}

func sliceSource(obj any) string {
	if sl, ok := obj.(*discoveryv1.EndpointSlice); ok && sl.Labels[discoveryv1.LabelServiceName] != "" {
		return "service:" + sl.Namespace + "/" + sl.Labels[discoveryv1.LabelServiceName]
	}
	return ""
}

func podSource(obj any) string {
	if p, ok := obj.(*corev1.Pod); ok {
		return "pod:" + p.Namespace + "/" + p.Name
	}
	return ""
}

// LastBuild is when the zone was last changed (zero before the first).
func (s *Server) LastBuild() time.Time {
	if ns := s.built.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

func typeLabel(t uint16) string {
	switch t {
	case dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypePTR, dns.TypeCNAME, dns.TypeTXT, dns.TypeSOA, dns.TypeNS, dns.TypeMX, dns.TypeANY:
		return dns.TypeToString[t]
	}
	return "other" // bounded label values
}

// Metrics are the server's Prometheus collectors.
type Metrics struct {
	requests  *prometheus.CounterVec
	responses *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	build     prometheus.Histogram
	names     prometheus.Gauge
}

// NewMetrics makes the collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skiff_dns_requests_total",
			Help: "DNS queries received, by transport, query type and where the answer came from (cluster, forward, cache, refused)."},
			[]string{"proto", "type", "source"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skiff_dns_responses_total",
			Help: "DNS answers sent, by response code (NXDOMAIN, NOERROR …) and source."}, []string{"rcode", "source"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "skiff_dns_request_duration_seconds",
			Help:    "Time to answer a DNS query, by source.",
			Buckets: []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}},
			[]string{"source"}),
		build: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "skiff_dns_zone_build_seconds",
			Help: "Time to apply a batch of changes to the cluster zone.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}),
		names: prometheus.NewGauge(prometheus.GaugeOpts{Name: "skiff_dns_zone_names", Help: "Owner names in the cluster zone."}),
	}
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.responses, m.duration, m.build, m.names}
}

// FormatAnswer prints the answer sections of m as dig does (one record per line).
func FormatAnswer(m *dns.Msg) string {
	var b strings.Builder
	fmt.Fprintf(&b, ";; status: %s, answers: %d\n", dns.RcodeToString[m.Rcode], len(m.Answer))
	for _, rr := range m.Answer {
		b.WriteString(rr.String() + "\n")
	}
	for _, rr := range m.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			b.WriteString(rr.String() + "\n")
		}
	}
	return b.String()
}
