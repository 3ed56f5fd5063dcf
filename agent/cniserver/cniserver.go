// Package cniserver is the node agent's side of skiff-cni: an HTTP server on a Unix socket
// that allocates and releases pod addresses through the agent's IPAM.
package cniserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/skiff-sh/skiff/agent/ipam"
	"github.com/skiff-sh/skiff/cni/protocol"
)

// The link-local next hops every pod routes through, per family; the plugin pins their
// neighbour entries to the host side of the pod's veth, so neither is ever resolved.
const (
	DefaultGateway     = "169.254.1.1"
	DefaultGatewayIPv6 = "fe80::1"
)

// Server answers skiff-cni.
type Server struct {
	IPAM *ipam.Node
	MTU  int
	Log  *slog.Logger
	// Policy, if set, puts network policy on each pod's veth (netpol.Enforcer).
	Policy PolicyAttacher
}

// PolicyAttacher enforces network policy on pod veths.
type PolicyAttacher interface {
	AttachPod(ctx context.Context, hostIf string) error
	DetachPod(hostIf string)
}

// Handler serves the CNI endpoints.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+protocol.AddPath, func(w http.ResponseWriter, r *http.Request) {
		var req protocol.AddRequest
		if err := decode(r, &req); err != nil {
			fail(w, http.StatusBadRequest, err)
			return
		}
		if req.ContainerID == "" {
			fail(w, http.StatusBadRequest, errors.New("containerID is required"))
			return
		}
		als, err := s.IPAM.Allocate(req.ContainerID, req.PodNamespace, req.PodName)
		if errors.Is(err, ipam.ErrExhausted) {
			fail(w, http.StatusConflict, err)
			return
		}
		if err != nil {
			fail(w, http.StatusInternalServerError, err)
			return
		}
		resp := protocol.AddResponse{Gateway: DefaultGateway, GatewayIPv6: DefaultGatewayIPv6, MTU: s.MTU}
		for _, al := range als {
			resp.IPs = append(resp.IPs, al.IP.String())
		}
		resp.IP = resp.IPs[0]
		if s.Log != nil {
			s.Log.Info("pod address allocated", "pod", req.PodNamespace+"/"+req.PodName, "ips", resp.IPs, "container", req.ContainerID)
		}
		reply(w, resp)
	})
	mux.HandleFunc("POST "+protocol.AttachPath, func(w http.ResponseWriter, r *http.Request) {
		var req protocol.AttachRequest
		if err := decode(r, &req); err != nil {
			fail(w, http.StatusBadRequest, err)
			return
		}
		if _, ok := s.IPAM.Get(req.ContainerID); !ok || req.HostIf == "" {
			fail(w, http.StatusBadRequest, fmt.Errorf("no address allocated to container %q, or no hostIf", req.ContainerID))
			return
		}
		if s.Policy != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
			defer cancel()
			if err := s.Policy.AttachPod(ctx, req.HostIf); err != nil {
				fail(w, http.StatusServiceUnavailable, fmt.Errorf("network policy on %s: %w", req.HostIf, err))
				return
			}
		}
		reply(w, struct{}{})
	})
	mux.HandleFunc("POST "+protocol.DelPath, func(w http.ResponseWriter, r *http.Request) {
		var req protocol.DelRequest
		if err := decode(r, &req); err != nil {
			fail(w, http.StatusBadRequest, err)
			return
		}
		if s.Policy != nil && req.HostIf != "" {
			s.Policy.DetachPod(req.HostIf)
		}
		if err := s.IPAM.Release(req.ContainerID); err != nil {
			fail(w, http.StatusInternalServerError, err)
			return
		}
		reply(w, struct{}{})
	})
	return mux
}

func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad request body: %w", err)
	}
	return nil
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(protocol.Error{Message: err.Error()})
}

// Serve listens on the Unix socket (mode 0600: only root may allocate) until ctx ends.
func Serve(ctx context.Context, socket string, h http.Handler) error {
	if err := os.MkdirAll(filepath.Dir(socket), 0o700); err != nil {
		return err
	}
	_ = os.Remove(socket)
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
