package clusterdns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Forwarder resolves names outside the cluster through the node's resolvers, over UDP (TCP
// when the answer is truncated), trying each in turn, with a cache.
type Forwarder struct {
	Upstreams []string // host:port
	Timeout   time.Duration
	cache     *Cache
}

// NewForwarder returns a forwarder to upstreams (none: it refuses) with a cache of size entries.
func NewForwarder(upstreams []string, size int) *Forwarder {
	return &Forwarder{Upstreams: upstreams, Timeout: 2 * time.Second, cache: NewCache(size)}
}

// ErrNoUpstream is returned when the node has no resolver to forward to.
var ErrNoUpstream = errors.New("no upstream resolver")

// Exchange answers q from the cache or the upstreams. The reply is the caller's to change.
func (f *Forwarder) Exchange(ctx context.Context, q dns.Question, do bool) (*dns.Msg, bool, error) {
	key := cacheKey(q, do)
	if m, ok := f.cache.Get(key, time.Now()); ok {
		return m, true, nil
	}
	if len(f.Upstreams) == 0 {
		return nil, false, ErrNoUpstream
	}
	req := new(dns.Msg)
	req.SetQuestion(q.Name, q.Qtype)
	req.Question[0].Qclass = q.Qclass
	req.RecursionDesired = true
	req.SetEdns0(dns.DefaultMsgSize, do)
	var errs []error
	for _, up := range f.Upstreams {
		m, err := f.exchange(ctx, req, up)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", up, err))
			continue
		}
		if m.Rcode == dns.RcodeServerFailure || m.Rcode == dns.RcodeRefused {
			errs = append(errs, fmt.Errorf("%s: %s", up, dns.RcodeToString[m.Rcode]))
			continue
		}
		f.cache.Put(key, m, time.Now())
		return m.Copy(), false, nil
	}
	return nil, false, errors.Join(errs...)
}

func (f *Forwarder) exchange(ctx context.Context, req *dns.Msg, upstream string) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	c := &dns.Client{Net: "udp", UDPSize: dns.DefaultMsgSize}
	m, _, err := c.ExchangeContext(ctx, req, upstream)
	if err == nil && m.Truncated {
		c.Net = "tcp"
		m, _, err = c.ExchangeContext(ctx, req, upstream)
	}
	return m, err
}

// Upstreams reads the nameservers of a resolv.conf as host:port, leaving out addresses
// this server itself listens on (a node whose resolv.conf names the cluster DNS must not
// forward to itself).
func Upstreams(resolvConf string, self ...string) ([]string, error) {
	cfg, err := dns.ClientConfigFromFile(resolvConf)
	if err != nil {
		return nil, err
	}
	skip := map[string]bool{}
	for _, s := range self {
		skip[s] = true
	}
	var out []string
	for _, s := range cfg.Servers {
		hp := net.JoinHostPort(strings.TrimSpace(s), cfg.Port)
		if !skip[hp] {
			out = append(out, hp)
		}
	}
	return out, nil
}

// Cache holds forwarded answers until their TTL ends (the SOA's minimum for a negative
// one), at most 5 minutes, evicting the soonest to expire when full.
type Cache struct {
	mu      sync.Mutex
	size    int
	entries map[string]cacheEntry
}

type cacheEntry struct {
	msg     *dns.Msg
	stored  time.Time
	expires time.Time
}

// MaxCacheTTL bounds how long any forwarded answer is kept.
const MaxCacheTTL = 5 * time.Minute

// NewCache returns a cache of at most size entries.
func NewCache(size int) *Cache { return &Cache{size: size, entries: map[string]cacheEntry{}} }

func cacheKey(q dns.Question, do bool) string {
	return fmt.Sprintf("%s|%d|%d|%t", strings.ToLower(q.Name), q.Qtype, q.Qclass, do)
}

// Put stores m under key for its TTL (nothing for a TTL of 0).
func (c *Cache) Put(key string, m *dns.Msg, now time.Time) {
	ttl := msgTTL(m)
	if ttl <= 0 || c.size <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.size {
		c.evict(now)
	}
	c.entries[key] = cacheEntry{msg: m.Copy(), stored: now, expires: now.Add(ttl)}
}

// evict drops what has expired, and if nothing had, the entry closest to expiring.
func (c *Cache) evict(now time.Time) {
	var soonest string
	var at time.Time
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, k)
			continue
		}
		if soonest == "" || e.expires.Before(at) {
			soonest, at = k, e.expires
		}
	}
	if len(c.entries) >= c.size && soonest != "" {
		delete(c.entries, soonest)
	}
}

// Get returns a copy of the entry with its TTLs lowered by the time it has been kept.
func (c *Cache) Get(key string, now time.Time) (*dns.Msg, bool) {
	c.mu.Lock()
	e, ok := c.entries[key]
	if ok && !now.Before(e.expires) {
		delete(c.entries, key)
		ok = false
	}
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	m := e.msg.Copy()
	aged := uint32(now.Sub(e.stored) / time.Second)
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			if h := rr.Header(); h.Rrtype != dns.TypeOPT {
				if h.Ttl > aged {
					h.Ttl -= aged
				} else {
					h.Ttl = 0
				}
			}
		}
	}
	return m, true
}

// Len is the number of entries.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// msgTTL is how long m may be kept: its records' smallest TTL, or for a negative answer the
// SOA's (the smaller of its TTL and minimum, RFC 2308); never more than MaxCacheTTL.
func msgTTL(m *dns.Msg) time.Duration {
	if m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError {
		return 0
	}
	var ttl uint32
	found := false
	low := func(t uint32) {
		if !found || t < ttl {
			ttl, found = t, true
		}
	}
	if len(m.Answer) > 0 && m.Rcode == dns.RcodeSuccess {
		for _, rr := range m.Answer {
			low(rr.Header().Ttl)
		}
	} else {
		for _, rr := range m.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				low(soa.Hdr.Ttl)
				low(soa.Minttl)
			}
		}
	}
	if !found {
		return 0
	}
	d := time.Duration(ttl) * time.Second
	if d > MaxCacheTTL {
		d = MaxCacheTTL
	}
	return d
}
