// Package netnsdial opens connections from inside a network namespace. A socket belongs to the
// namespace it was created in, so a connection dialled on a thread switched into the node's
// namespace keeps working from any thread afterwards. The agent uses it to reach pods and
// containerd's streaming server when the node's runtime runs in its own namespace (the lab).
package netnsdial

import (
	"context"
	"net"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// Dialer returns a DialContext that dials inside the namespace at path ("" dials here).
func Dialer(path string, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if path == "" {
		return d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		ch := make(chan result, 1)
		go func() {
			// containernetworking's ns switches the thread back afterwards (it is discarded
			// only if that fails): threads must not end routinely, since a child started
			// with Pdeathsig dies with the thread that forked it.
			var c net.Conn
			err := ns.WithNetNSPath(path, func(ns.NetNS) error {
				var err error
				c, err = d.DialContext(ctx, network, addr)
				return err
			})
			ch <- result{c, err}
		}()
		select {
		case r := <-ch:
			return r.c, r.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
