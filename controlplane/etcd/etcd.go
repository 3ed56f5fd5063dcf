// Package etcd runs the embedded etcd member that `skiff server` uses unless it is pointed at an
// external cluster. The member listens for clients on 127.0.0.1:2379 and for peers on 2380, both
// with TLS and client-certificate verification by the etcd CA, as kubeadm's stacked etcd does;
// metrics are served over plain HTTP on 127.0.0.1:2381 only.
package etcd

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/skiff-sh/skiff/controlplane/pki"
)

// Options configure the embedded member.
type Options struct {
	// DataDir holds the member's WAL and snapshots (<data-dir>/etcd); LogFile is etcd's log.
	DataDir, LogFile string
	// Name is the member name; the host name by default.
	Name string
	// ClientURL is where clients connect (https://127.0.0.1:2379).
	ClientURL string
	// PeerURL is where other members connect (https://127.0.0.1:2380).
	PeerURL string
	// MetricsURL serves /metrics and /health without TLS (http://127.0.0.1:2381).
	MetricsURL string
	// PKI supplies the etcd CA, server and peer certificates.
	PKI pki.Layout
	// StartTimeout bounds how long Start waits for the member to serve.
	StartTimeout time.Duration
}

// CatchUpEntries is how many applied raft entries the member keeps in memory.
const CatchUpEntries = 500

// Server is a running embedded etcd member.
type Server struct {
	etcd *embed.Etcd
}

// Start starts the member and waits until it serves clients.
func Start(ctx context.Context, o Options, log *slog.Logger) (*Server, error) {
	if o.Name == "" {
		o.Name, _ = os.Hostname()
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = time.Minute
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = o.Name
	cfg.Dir = o.DataDir
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{o.LogFile}
	cfg.SnapshotCount = 10000 // etcd's default: a snapshot on disk every 10000 entries
	// etcd keeps the raft log's last SnapshotCatchUpEntries entries in memory (5000 by
	// default) so a lagging follower can catch up without a snapshot. This member never has
	// a follower, and at an idle cluster's ~2 writes a second of leases the default grew the
	// heap by ~6 MB over the first 40 minutes and kept it (~1.3 KB an entry).
	cfg.SnapshotCatchUpEntries = CatchUpEntries
	var err error
	if cfg.ListenClientUrls, err = urls(o.ClientURL); err != nil {
		return nil, err
	}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	if cfg.ListenPeerUrls, err = urls(o.PeerURL); err != nil {
		return nil, err
	}
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	if o.MetricsURL != "" {
		if cfg.ListenMetricsUrls, err = urls(o.MetricsURL); err != nil {
			return nil, err
		}
	}
	cfg.InitialCluster = cfg.InitialClusterFromName(o.Name)
	ca := o.PKI.EtcdCA().Cert
	cfg.ClientTLSInfo = transport.TLSInfo{
		CertFile: o.PKI.EtcdServer().Cert, KeyFile: o.PKI.EtcdServer().Key,
		TrustedCAFile: ca, ClientCertAuth: true,
	}
	cfg.PeerTLSInfo = transport.TLSInfo{
		CertFile: o.PKI.EtcdPeer().Cert, KeyFile: o.PKI.EtcdPeer().Key,
		TrustedCAFile: ca, ClientCertAuth: true,
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd (log: %s): %w", cfg.LogOutputs[0], err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd: %w", err)
	case <-time.After(o.StartTimeout):
		e.Close()
		return nil, fmt.Errorf("embedded etcd not ready after %s (log: %s)", o.StartTimeout, cfg.LogOutputs[0])
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	log.Info("embedded etcd ready", "client", o.ClientURL, "dir", o.DataDir)
	return &Server{etcd: e}, nil
}

// Err reports a fatal error of the running member.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Close stops the member.
func (s *Server) Close() { s.etcd.Close() }

func urls(raw string) ([]url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("etcd url %q: %w", raw, err)
	}
	return []url.URL{*u}, nil
}
