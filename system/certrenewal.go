package system

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/internal/supervisor"
	"github.com/skiff-sh/skiff/system/bootstrap"
)

// renewalInterval is how often a running server looks for certificates due for renewal: hourly
// (a year's certificate is due 90 days before it expires), or a twentieth of a shorter
// --certificate-lifetime, so a certificate of minutes is renewed in its last quarter too.
func renewalInterval(lifetime time.Duration) time.Duration {
	if lifetime <= 0 {
		return time.Hour
	}
	return min(time.Hour, max(lifetime/20, time.Second))
}

// certRenewal is the part that renews the server's certificates while it runs, as the start
// does: bootstrap.PrepareServer issues again what is due and keeps the rest. Nothing restarts
// for it: the API server reloads its serving pair, the front-proxy and kubelet-client pairs
// and etcd's from their files at the next handshake, and the control plane's clients reload
// the client pairs their kubeconfigs name (clientConfig).
func certRenewal(plan bootstrap.Server, every time.Duration, log *slog.Logger) supervisor.Part {
	return supervisor.Part{Name: "cert-renewal", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
			if _, err := bootstrap.PrepareServer(plan, time.Now()); err != nil {
				return fmt.Errorf("renewing the server's certificates: %w", err)
			}
		}
	}}
}

// clientConfig is the client configuration of a part of the server from its kubeconfig. The
// kubeconfig names its client pair's files (bootstrap), which client-go loads again at each
// new connection and, when they changed, closes its connections for: it looks every
// transport.CertCallbackRefreshDuration, which RunServer sets to the renewal interval.
func clientConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	// The parts of a server talk to its own API server: gzip would only cost them CPU, and
	// a decompressor (some 40 KiB) for each of their hundred-odd watches (the API server's own
	// loopback client goes without too: see apiserver.newServer).
	cfg.DisableCompression = true
	return cfg, nil
}
