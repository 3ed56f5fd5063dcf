package clusterdns

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	sharedinformers "github.com/skiff-sh/skiff/internal/informers"
)

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// upstream is a resolver on loopback that answers every A query with 192.0.2.1 (TTL 60)
// and NXDOMAIN for names beginning with "nx", and counts what it is asked.
func upstream(t *testing.T) (addr string, asked *atomic.Int32) {
	t.Helper()
	return upstreamOn(t, "127.0.0.1:0")
}

// upstreamOn is upstream listening on listen.
func upstreamOn(t *testing.T, listen string) (addr string, asked *atomic.Int32) {
	t.Helper()
	pc, err := net.ListenPacket("udp", listen)
	if err != nil {
		t.Fatal(err)
	}
	asked = &atomic.Int32{}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		asked.Add(1)
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		if strings.HasPrefix(q.Name, "nx") {
			m.Rcode = dns.RcodeNameError
			m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: "example.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 30},
				Ns: "ns.example.", Mbox: "h.example.", Minttl: 10}}
		} else if q.Qtype == dns.TypeA {
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 1)}}
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String(), asked
}

func freeAddr(t *testing.T) string {
	t.Helper()
	// A port free for both UDP and TCP on loopback.
	for i := 0; i < 20; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		if pc, err := net.ListenPacket("udp", addr); err == nil {
			pc.Close()
			return addr
		}
	}
	t.Fatal("no free port")
	return ""
}

func query(t *testing.T, network, server, name string, qtype uint16, bufsize uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	if bufsize > 0 {
		m.SetEdns0(bufsize, false)
	}
	c := &dns.Client{Net: network, Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, server)
	if err != nil {
		t.Fatalf("%s %s over %s: %v", name, dns.TypeToString[qtype], network, err)
	}
	return r
}

func TestServer(t *testing.T) {
	up, asked := upstream(t)
	client := fake.NewSimpleClientset(
		service("default", "web", "10.96.0.20", corev1.ServicePort{Name: "http", Port: 80}),
		service("data", "big", corev1.ClusterIPNone))
	var eps []discoveryv1.Endpoint
	for i := 0; i < 100; i++ {
		eps = append(eps, endpoint(fmt.Sprintf("10.244.3.%d", i+1), true, ""))
	}
	if _, err := client.DiscoveryV1().EndpointSlices("data").Create(context.Background(), slice("data", "big", "big-a", nil, eps...), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, s := runServer(t, client, addr, up)

	for _, network := range []string{"udp", "tcp"} {
		r := query(t, network, addr, "web.default.svc.cluster.local.", dns.TypeA, 0)
		if r.Rcode != dns.RcodeSuccess || !r.Authoritative || rdata(r.Answer) != "A 10.96.0.20" {
			t.Errorf("%s: web: %v", network, r)
		}
		if r := query(t, network, addr, "nope.default.svc.cluster.local.", dns.TypeA, 0); r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 {
			t.Errorf("%s: nope: %v", network, r)
		}
	}
	// 100 addresses do not fit 512 bytes: truncated over UDP, whole over TCP and with a
	// large EDNS0 buffer.
	if r := query(t, "udp", addr, "big.data.svc.cluster.local.", dns.TypeA, 0); !r.Truncated || len(r.Answer) >= 100 {
		t.Errorf("a 100-address answer over UDP: truncated %v, %d answers", r.Truncated, len(r.Answer))
	}
	if r := query(t, "tcp", addr, "big.data.svc.cluster.local.", dns.TypeA, 0); r.Truncated || len(r.Answer) != 100 {
		t.Errorf("over TCP: truncated %v, %d answers", r.Truncated, len(r.Answer))
	}
	if r := query(t, "udp", addr, "big.data.svc.cluster.local.", dns.TypeA, 4096); r.Truncated || len(r.Answer) != 100 {
		t.Errorf("over UDP with EDNS0 4096: truncated %v, %d answers", r.Truncated, len(r.Answer))
	}

	// Outside the cluster: forwarded once, then from the cache with its TTL running down.
	r := query(t, "udp", addr, "www.example.com.", dns.TypeA, 0)
	if r.Rcode != dns.RcodeSuccess || rdata(r.Answer) != "A 192.0.2.1" || r.Authoritative || !r.RecursionAvailable {
		t.Errorf("forwarded: %v", r)
	}
	query(t, "tcp", addr, "WWW.example.com.", dns.TypeA, 0)
	if n := asked.Load(); n != 1 {
		t.Errorf("upstream asked %d times for one name, want 1 (cached)", n)
	}
	if r := query(t, "udp", addr, "nx.example.com.", dns.TypeA, 0); r.Rcode != dns.RcodeNameError {
		t.Errorf("forwarded NXDOMAIN: %v", r)
	}
	query(t, "udp", addr, "nx.example.com.", dns.TypeA, 0)
	if n := asked.Load(); n != 2 {
		t.Errorf("upstream asked %d times, want 2 (the NXDOMAIN cached by its SOA)", n)
	}

	// A new Service resolves as soon as the informer has it.
	created := time.Now()
	if _, err := client.CoreV1().Services("default").Create(ctx, service("default", "late", "10.96.0.30"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		r := query(t, "udp", addr, "late.default.svc.cluster.local.", dns.TypeA, 0)
		if rdata(r.Answer) == "A 10.96.0.30" {
			t.Logf("a new Service resolved %s after its creation", time.Since(created).Round(time.Millisecond))
			break
		}
		if time.Since(created) > 5*time.Second {
			t.Fatalf("a new Service not resolvable after 5 s: %v", r)
		}
		time.Sleep(5 * time.Millisecond)
	}

	// Malformed and unsupported requests get a precise code, never silence.
	m := new(dns.Msg)
	m.SetQuestion("web.default.svc.cluster.local.", dns.TypeA)
	m.Question = append(m.Question, m.Question[0])
	if r, _ := s.Answer(ctx, m); r.Rcode != dns.RcodeFormatError {
		t.Errorf("two questions: %s", dns.RcodeToString[r.Rcode])
	}
	m.Question = m.Question[:1]
	m.Opcode = dns.OpcodeUpdate
	if r, _ := s.Answer(ctx, m); r.Rcode != dns.RcodeNotImplemented {
		t.Errorf("an UPDATE: %s", dns.RcodeToString[r.Rcode])
	}
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = conn.Write([]byte{0x12, 0x34, 0x01}) // three bytes: no header
	conn.Close()
	if r := query(t, "udp", addr, "web.default.svc.cluster.local.", dns.TypeA, 0); len(r.Answer) != 1 {
		t.Error("a garbage packet stopped the server")
	}
}

// runServer runs a cluster DNS server on addr, forwarding to up, until the test ends (a
// failure of Run fails the test), and returns once it listens.
func runServer(t *testing.T, client *fake.Clientset, addr, up string) (context.Context, *Server) {
	t.Helper()
	listening := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	shared := sharedinformers.NewShared(ctx, client)
	s := New(Options{Domain: "cluster.local", Listen: addr, Forwarder: NewForwarder([]string{up}, 100),
		Informers: Informers{Services: shared.Core().V1().Services(), EndpointSlices: shared.Discovery().V1().EndpointSlices(),
			Pods: shared.Core().V1().Pods(), Start: shared.Start},
		Listening: func(a string) { listening <- a }}, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, client) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case a := <-listening:
		if a != addr {
			t.Errorf("published %s, want %s", a, addr)
		}
	case err := <-done:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("not listening")
	}
	return ctx, s
}

func TestServerWithoutUpstream(t *testing.T) {
	s := New(Options{Domain: "cluster.local"}, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	m := new(dns.Msg)
	m.SetQuestion("www.example.com.", dns.TypeA)
	if r, where := s.Answer(context.Background(), m); r.Rcode != dns.RcodeRefused || where != "refused" || r.RecursionAvailable {
		t.Errorf("no upstream: %s %s", dns.RcodeToString[r.Rcode], where)
	}
	m.SetQuestion("kubernetes.default.svc.cluster.local.", dns.TypeA)
	if r, _ := s.Answer(context.Background(), m); r.Rcode != dns.RcodeNameError || !r.Authoritative {
		t.Errorf("an empty zone: %s", dns.RcodeToString[r.Rcode])
	}
}

func TestCache(t *testing.T) {
	c := NewCache(2)
	now := time.Unix(1000, 0)
	msg := func(ttl uint32) *dns.Msg {
		m := new(dns.Msg)
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "a.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.IPv4(192, 0, 2, 1)}}
		return m
	}
	c.Put("a", msg(60), now)
	c.Put("zero", msg(0), now) // not kept
	if m, ok := c.Get("a", now.Add(20*time.Second)); !ok || m.Answer[0].Header().Ttl != 40 {
		t.Errorf("after 20 s: %v %v", ok, m)
	}
	if _, ok := c.Get("zero", now); ok {
		t.Error("a TTL-0 answer cached")
	}
	if _, ok := c.Get("a", now.Add(60*time.Second)); ok {
		t.Error("served after its TTL")
	}
	c.Put("b", msg(10), now)
	c.Put("c", msg(100), now)
	c.Put("d", msg(50), now) // full: b, the soonest to expire, goes
	if _, ok := c.Get("b", now); ok {
		t.Error("the soonest-expiring entry kept when full")
	}
	if _, ok := c.Get("c", now); !ok {
		t.Error("c evicted")
	}
	if c.Len() > 2 {
		t.Errorf("%d entries in a cache of 2", c.Len())
	}
	long := msg(86400)
	c.Put("long", long, now)
	if _, ok := c.Get("long", now.Add(MaxCacheTTL+time.Second)); ok {
		t.Error("kept past MaxCacheTTL")
	}
	servfail := msg(60)
	servfail.Rcode = dns.RcodeServerFailure
	c.Put("sf", servfail, now)
	if _, ok := c.Get("sf", now); ok {
		t.Error("a SERVFAIL cached")
	}
}

func TestUpstreams(t *testing.T) {
	f := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(f, []byte("search example.com\nnameserver 192.0.2.53\nnameserver 10.0.0.5\nnameserver 2001:db8::53\noptions ndots:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Upstreams(f, "10.0.0.5:53")
	if err != nil || strings.Join(got, ",") != "192.0.2.53:53,[2001:db8::53]:53" {
		t.Errorf("Upstreams: %v %v", got, err)
	}
	if _, err := Upstreams(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing resolv.conf read")
	}
}

// TestServerOverIPv6: an IPv6-only node's cluster DNS listens on its IPv6 address, answers AAAA
// for an IPv6 Service, and forwards other names to an IPv6 upstream resolver.
func TestServerOverIPv6(t *testing.T) {
	up, asked := upstreamOn(t, "[::1]:0")
	client := fake.NewSimpleClientset(service("default", "web", "fd00:10:96::20", corev1.ServicePort{Name: "http", Port: 80}))
	l, err := net.ListenPacket("udp", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.LocalAddr().String()
	l.Close()
	runServer(t, client, addr, up)
	for _, network := range []string{"udp", "tcp"} {
		deadline := time.Now().Add(5 * time.Second)
		for {
			r := query(t, network, addr, "web.default.svc.cluster.local.", dns.TypeAAAA, 0)
			if rdata(r.Answer) == "AAAA fd00:10:96::20" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: web AAAA: %v", network, r)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if r := query(t, "udp", addr, "www.example.com.", dns.TypeA, 0); rdata(r.Answer) != "A 192.0.2.1" || asked.Load() != 1 {
		t.Errorf("forwarded over IPv6: %v (upstream asked %d times)", r, asked.Load())
	}
}
