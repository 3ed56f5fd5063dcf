// Package api is the node agent's HTTPS API (port 10250), which the API server calls as its
// kubelet client to stream container logs (kubectl logs), run commands (kubectl exec) and read
// resource usage (metrics.k8s.io). Only clients with a certificate of
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
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/agent/stats"
)

// Server serves the agent API.
type Server struct {
	Runtime runtimeapi.RuntimeServiceClient
	// Netns is the runtime's network namespace, if it has its own (the lab's nodes).
	Netns string
	// Stats is the node's resource usage (/stats/summary, /metrics/resource).
	Stats *stats.Source
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
	return mux
}

// Serve listens on addr with the serving pair, requiring client certificates of caFile.
func Serve(ctx context.Context, addr, certFile, keyFile, caFile string, h http.Handler) error {
	pair, err := newReloadingPair(certFile, keyFile)
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
		GetCertificate: pair.get, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}}
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

// reloadingPair serves a certificate pair that is rotated on disk (agent/join.Renewer): a
// handshake after the files changed loads them again; a pair that fails to load (caught
// between the key's and the certificate's replacement) leaves the current one in use.
type reloadingPair struct {
	certFile, keyFile string
	mu                sync.Mutex
	cert              *tls.Certificate
	certMod, keyMod   time.Time
}

func newReloadingPair(certFile, keyFile string) (*reloadingPair, error) {
	p := &reloadingPair{certFile: certFile, keyFile: keyFile}
	if _, err := p.get(nil); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *reloadingPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cm, err1 := os.Stat(p.certFile)
	km, err2 := os.Stat(p.keyFile)
	if err1 == nil && err2 == nil && p.cert != nil && cm.ModTime().Equal(p.certMod) && km.ModTime().Equal(p.keyMod) {
		return p.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(p.certFile, p.keyFile)
	if err != nil {
		if p.cert != nil {
			return p.cert, nil
		}
		return nil, err
	}
	p.cert = &cert
	if err1 == nil && err2 == nil {
		p.certMod, p.keyMod = cm.ModTime(), km.ModTime()
	}
	return p.cert, nil
}
