package dataplane

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

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// HealthCheck is what one healthCheckNodePort answers: a LoadBalancer Service with
// externalTrafficPolicy Local and how many of its ready endpoints run on this node.
type HealthCheck struct {
	Namespace, Name string
	Port            uint16
	LocalEndpoints  int
}

// HealthChecks lists the health checks this node serves, without I/O.
func HealthChecks(services []*corev1.Service, epSlices []*discoveryv1.EndpointSlice, node string) []HealthCheck {
	// Only LoadBalancer Services with externalTrafficPolicy Local have one; most clusters
	// have few or none, so their endpoints are the only ones counted.
	var out []HealthCheck
	index := map[string]int{}
	for _, svc := range services {
		p := svc.Spec.HealthCheckNodePort
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal || p <= 0 || p > 65535 {
			continue
		}
		index[svc.Namespace+"/"+svc.Name] = len(out)
		out = append(out, HealthCheck{Namespace: svc.Namespace, Name: svc.Name, Port: uint16(p)})
	}
	if len(out) == 0 {
		return nil
	}
	for _, s := range epSlices {
		i, ok := index[s.Namespace+"/"+s.Labels[discoveryv1.LabelServiceName]]
		if !ok {
			continue
		}
		seen := map[string]bool{}
		for _, ep := range s.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			if ready && ep.NodeName != nil && *ep.NodeName == node && len(ep.Addresses) > 0 && !seen[ep.Addresses[0]] {
				seen[ep.Addresses[0]] = true
				out[i].LocalEndpoints++
			}
		}
	}
	return out
}

// healthServer serves the health checks on the node's address, as kube-proxy does: 200 with
// the count when the node has local endpoints, 503 when it has none, so a load balancer
// sends traffic only to nodes that keep the client address and can answer.
type healthServer struct {
	addr netip.Addr
	log  *slog.Logger

	mu      sync.Mutex
	current map[uint16]HealthCheck
	servers map[uint16]*http.Server
}

func newHealthServer(addr netip.Addr, log *slog.Logger) *healthServer {
	return &healthServer{addr: addr, log: log, current: map[uint16]HealthCheck{}, servers: map[uint16]*http.Server{}}
}

// Sync opens listeners for new ports, closes those no longer wanted and updates the counts.
func (h *healthServer) Sync(checks []HealthCheck) {
	h.mu.Lock()
	defer h.mu.Unlock()
	want := map[uint16]HealthCheck{}
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
		l, err := net.Listen("tcp", net.JoinHostPort(h.addr.String(), fmt.Sprint(port)))
		if err != nil {
			h.log.Warn("healthCheckNodePort", "port", port, "err", err)
			continue
		}
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: h.handler(port)}
		h.servers[port] = srv
		go func() { _ = srv.Serve(l) }()
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
