// Package api is the node agent's HTTPS API (port 10250), which the API server calls as its
// kubelet client to stream container logs (kubectl logs), run commands (kubectl exec) and read
// resource usage (metrics.k8s.io), and which `skiff observe` reads the node's flows from
// (/flows, through the API server's nodes/proxy). Only clients with a certificate of
// the cluster CA are served: the API server's apiserver-kubelet-client and administrators.
package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/agent/stats"
	"github.com/skiff-sh/skiff/internal/certfile"
)

// Server serves the agent API.
type Server struct {
	Runtime runtimeapi.RuntimeServiceClient
	// Netns is the runtime's network namespace, if it has its own (the lab's nodes).
	Netns string
	// Stats is the node's resource usage (/stats/summary, /metrics/resource).
	Stats *stats.Source
	// Flows serves the node's flow events (/flows, dataplane/flows), if set.
	Flows http.Handler
}

// Handler routes the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.containerLogs)
	mux.HandleFunc("/exec/{namespace}/{pod}/{container}", s.exec)
	mux.HandleFunc("/attach/{namespace}/{pod}/{container}", s.attach)
	mux.HandleFunc("/portForward/{namespace}/{pod}", s.portForward)
	mux.HandleFunc("GET /stats/summary", s.summary)
	mux.HandleFunc("GET /metrics/resource", s.resourceMetrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	if s.Flows != nil {
		mux.Handle("GET /flows", s.Flows)
	}
	return mux
}

// Serve listens on addr with the serving pair, requiring client certificates of caFile.
func Serve(ctx context.Context, addr, certFile, keyFile, caFile string, h http.Handler) error {
	// The pair is renewed in place (agent/join.Renewer): each handshake presents the current one.
	pair, err := certfile.NewPair(certFile, keyFile)
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("%s: no certificates", caFile)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, TLSConfig: &tls.Config{
		GetCertificate: pair.GetCertificate, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// summary serves the kubelet's Summary API.
func (s *Server) summary(w http.ResponseWriter, r *http.Request) {
	sum, err := s.Stats.Summary(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(sum)
}

// resourceMetrics serves the kubelet's /metrics/resource. A failure to read the runtime is
// reported in resource_scrape_error, as the kubelet does, not as an HTTP error.
func (s *Server) resourceMetrics(w http.ResponseWriter, r *http.Request) {
	sum, err := s.Stats.Summary(r.Context())
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(stats.Resource(sum, err != nil))
}
