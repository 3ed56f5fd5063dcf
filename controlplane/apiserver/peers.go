package apiserver

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// peerLeasePrefix is where API servers announce themselves in etcd, upstream's lease
// endpoint reconciler's key space: one key per advertise address, held by an etcd lease
// that expires when its server stops renewing it.
const peerLeasePrefix = "/registry/masterleases/"

// peerLeaseTTL is how long an API server that stopped stays listed in the kubernetes
// Service's endpoints, upstream's default (--endpoint-reconciler-type=lease); it is renewed
// by the bootstrap loop every 10 s.
const peerLeaseTTL = 15 * time.Second

// peerLeases announces this API server and lists the live ones: what the `kubernetes`
// Service's Endpoints and EndpointSlice hold when several servers share one etcd.
type peerLeases struct {
	client *clientv3.Client
	own    string

	mu sync.Mutex
}

// Renew (re)writes this server's key under a fresh lease of peerLeaseTTL and returns every
// address announced now, this one included.
func (p *peerLeases) Renew(ctx context.Context) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lease, err := p.client.Grant(ctx, int64(peerLeaseTTL/time.Second))
	if err != nil {
		return nil, err
	}
	// The key moves to the new lease; the old one expires with nothing under it.
	if _, err := p.client.Put(ctx, peerLeasePrefix+p.own, p.own, clientv3.WithLease(lease.ID)); err != nil {
		return nil, err
	}
	resp, err := p.client.Get(ctx, peerLeasePrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return PeerAddresses(p.own, keys), nil
}

// Remove withdraws this server's key (a clean shutdown: clients stop being sent here at
// once rather than when the lease expires).
func (p *peerLeases) Remove(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := p.client.Delete(ctx, peerLeasePrefix+p.own)
	return err
}

// PeerAddresses turns the announced keys into the sorted, de-duplicated addresses of the
// live API servers, always with own among them: a server that cannot see its own key yet
// still serves. Keys that are not an IP under the prefix are ignored.
func PeerAddresses(own string, keys []string) []string {
	seen := map[netip.Addr]bool{}
	var addrs []netip.Addr
	add := func(s string) {
		a, err := netip.ParseAddr(s)
		if err != nil || seen[a] {
			return
		}
		seen[a] = true
		addrs = append(addrs, a)
	}
	add(own)
	for _, k := range keys {
		if ip, ok := strings.CutPrefix(k, peerLeasePrefix); ok {
			add(ip)
		}
	}
	slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.String()
	}
	return out
}
