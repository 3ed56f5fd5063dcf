package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/skiff-sh/skiff/dataplane/services"
)

// healthServer serves the health checks on the node's addresses (one per family), as
// kube-proxy does: 200 with the count when the node has local endpoints, 503 when it has
// none, so a load balancer sends traffic only to nodes that keep the client address and can
// answer.
type healthServer struct {
	addrs []netip.Addr
	log   *slog.Logger

	mu      sync.Mutex
	current map[uint16]services.HealthCheck
	servers map[uint16]*http.Server
}

func newHealthServer(addrs []netip.Addr, log *slog.Logger) *healthServer {
	return &healthServer{addrs: addrs, log: log, current: map[uint16]services.HealthCheck{}, servers: map[uint16]*http.Server{}}
}

// Sync opens listeners for new ports, closes those no longer wanted and updates the counts.
func (h *healthServer) Sync(checks []services.HealthCheck) {
	h.mu.Lock()
	defer h.mu.Unlock()
	want := map[uint16]services.HealthCheck{}
	for _, c := range checks {
		want[c.Port] = c
	}
	for port, srv := range h.servers {
		if _, ok := want[port]; !ok {
			_ = srv.Close()
			delete(h.servers, port)
		}
	}
	h.current = want
	for port := range want {
		if _, ok := h.servers[port]; ok {
			continue
		}
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: h.handler(port)}
		for _, addr := range h.addrs {
			l, err := net.Listen("tcp", net.JoinHostPort(addr.String(), fmt.Sprint(port)))
			if err != nil {
				h.log.Warn("healthCheckNodePort", "port", port, "addr", addr, "err", err)
				continue
			}
			h.servers[port] = srv
			go func() { _ = srv.Serve(l) }()
		}
	}
}

func (h *healthServer) handler(port uint16) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		c, ok := h.current[port]
		h.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if c.LocalEndpoints == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"service":             map[string]string{"namespace": c.Namespace, "name": c.Name},
			"localEndpoints":      c.LocalEndpoints,
			"serviceProxyHealthy": true,
		})
	})
}

// Close stops every listener.
func (h *healthServer) Close(context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for port, srv := range h.servers {
		_ = srv.Close()
		delete(h.servers, port)
	}
}
