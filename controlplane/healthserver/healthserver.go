// Package healthserver serves a component's /healthz, /livez, /readyz and /metrics over HTTPS
// on a loopback port with a self-signed certificate, as kube-scheduler (10259) and
// kube-controller-manager (10257) do.
package healthserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Check is a named health check.
type Check struct {
	Name string
	Fn   func() error
}

// Serve listens on addr and serves until ctx ends.
func Serve(ctx context.Context, addr string, checks []Check, log *slog.Logger) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, []net.IP{net.ParseIP(host)}, []string{"localhost"})
	if err != nil {
		return err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	health := func(w http.ResponseWriter, r *http.Request) {
		var out string
		failed := false
		for _, c := range checks {
			if err := c.Fn(); err != nil {
				failed = true
				out += fmt.Sprintf("[-]%s failed: %v\n", c.Name, err)
			} else {
				out += fmt.Sprintf("[+]%s ok\n", c.Name)
			}
		}
		if failed {
			http.Error(w, out+r.URL.Path[1:]+" check failed", http.StatusInternalServerError)
			return
		}
		if _, verbose := r.URL.Query()["verbose"]; verbose {
			fmt.Fprint(w, out+r.URL.Path[1:]+" check passed\n")
			return
		}
		fmt.Fprint(w, "ok")
	}
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		mux.HandleFunc(p, health)
	}
	mux.Handle("/metrics", legacyregistry.Handler())
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("serving health and metrics", "address", "https://"+addr)
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
