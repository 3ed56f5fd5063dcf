// Package apiservers is how a node agent reaches a highly available control plane: given
// several API servers' URLs, every connection goes to whichever of them answers, starting at
// the one that last did, so an agent rides out the loss of a server without a load balancer
// in front (k3s's agents carry a client-side balancer for the same reason).
//
// Failover happens at dial time: an established connection to a server that dies breaks
// (its requests fail and client-go retries them, as watches and Lease renewals do anyway),
// and the next dial goes to a live server. Every server's certificate is issued for the
// kubernetes.default.svc name, which is what the agent verifies instead of one server's IP.
package apiservers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// ServerName is the name every skiff API server's certificate holds.
const ServerName = "kubernetes.default.svc"

// dialTimeout is how long one server may take to accept before the next is tried.
const dialTimeout = 3 * time.Second

// Dialer dials the first of its servers that accepts.
type Dialer struct {
	addrs []string // host:port
	log   *slog.Logger

	mu      sync.Mutex
	current int
}

// ParseURLs splits a comma-separated --server value into the servers' URLs.
func ParseURLs(list string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSuffix(strings.TrimSpace(s), "/")
		if s == "" {
			continue
		}
		u, err := url.Parse(s)
		if err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("--server: %q is not an API server URL (https://HOST:PORT)", s)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, errors.New("--server: no API server URL")
	}
	return out, nil
}

// NewDialer returns a dialer over the servers' URLs (https://HOST:PORT).
func NewDialer(urls []string, log *slog.Logger) (*Dialer, error) {
	d := &Dialer{log: log}
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("%q is not an API server URL", s)
		}
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "443")
		}
		d.addrs = append(d.addrs, host)
	}
	if len(d.addrs) == 0 {
		return nil, errors.New("no API servers")
	}
	return d, nil
}

// DialContext ignores the address asked for: it tries the server that last answered, then
// the others in order, and returns the first connection made.
func (d *Dialer) DialContext(ctx context.Context, network, _ string) (net.Conn, error) {
	d.mu.Lock()
	start := d.current
	d.mu.Unlock()
	var errs []error
	for i := range d.addrs {
		n := (start + i) % len(d.addrs)
		conn, err := (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext(ctx, network, d.addrs[n])
		if err == nil {
			d.connected(start, n)
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("no API server answers: %w", errors.Join(errs...))
}

// connected records that a dial which began at server start reached server n. A dial that
// reached the server it began at changes nothing, and neither does one that began before
// another dial moved current: several dials run at once (HTTP/2 and HTTP/1 connections are
// made concurrently), and one that connected to a server just before it died must not undo
// a later dial's failover away from it.
func (d *Dialer) connected(start, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n == start || d.current != start {
		return
	}
	d.log.Info("API server failover", "from", d.addrs[d.current], "to", d.addrs[n])
	d.current = n
}

// Current is the server connections go to now.
func (d *Dialer) Current() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.addrs[d.current]
}

// Config returns a copy of cfg whose connections go through a Dialer over urls, verifying
// the servers as ServerName. With one URL, cfg is returned unchanged.
func Config(cfg *rest.Config, urls []string, log *slog.Logger) (*rest.Config, *Dialer, error) {
	if len(urls) < 2 {
		return cfg, nil, nil
	}
	d, err := NewDialer(urls, log)
	if err != nil {
		return nil, nil, err
	}
	out := rest.CopyConfig(cfg)
	out.Host = urls[0]
	out.Dial = d.DialContext
	out.TLSClientConfig.ServerName = ServerName
	return out, d, nil
}
