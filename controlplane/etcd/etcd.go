// Package etcd runs the embedded etcd member that `skiff server` uses unless it is pointed at an
// external cluster. The member listens for clients on 127.0.0.1:2379 and for peers on 2380, both
// with TLS and client-certificate verification by the etcd CA, as kubeadm's stacked etcd does;
// metrics are served over plain HTTP on 127.0.0.1:2381 only. A server started with
// --cluster-init listens for peers on its advertised address, so further servers join its
// member as learners (members.go) and are promoted once they have caught up, as k3s's
// embedded etcd does.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
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
	// PeerURL is where other members connect (https://127.0.0.1:2380 for a server alone;
	// its advertised address with --cluster-init and when joining).
	PeerURL string
	// InitialCluster ("name=peerURL,...") and Join start a member that an existing cluster
	// has just added (AddLearner); both are ignored once the member has data.
	InitialCluster string
	Join           bool
	// ForceNewCluster makes a member with data the only member of a new cluster, keeping
	// its keys (--cluster-reset after quorum is lost).
	ForceNewCluster bool
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
	etcd    *embed.Etcd
	dataDir string
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
	// default) so a lagging follower can catch up without a snapshot. A server alone has no
	// follower, and at an idle cluster's ~2 writes a second of leases the default grew the
	// heap by ~6 MB over the first 40 minutes and kept it (~1.3 KB an entry); a follower of
	// an HA cluster that falls further behind than this gets a snapshot instead.
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
	if o.InitialCluster != "" {
		cfg.InitialCluster = o.InitialCluster
	}
	if o.Join {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	cfg.ForceNewCluster = o.ForceNewCluster
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
	// A learner answers no client but with serializable reads: the API server waits until a
	// running server's member controller promotes it, once it has caught up.
	for first := true; e.Server.IsLearner(); first = false {
		if first {
			log.Info("embedded etcd is a learner; waiting to be promoted", "dir", o.DataDir)
		}
		select {
		case err := <-e.Err():
			e.Close()
			return nil, fmt.Errorf("embedded etcd: %w", err)
		case <-ctx.Done():
			e.Close()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	log.Info("embedded etcd ready", "client", o.ClientURL, "peer", o.PeerURL, "dir", o.DataDir)
	return &Server{etcd: e, dataDir: o.DataDir}, nil
}

// HasData says whether dir holds a member's data (a restart, not a first start or a join).
func HasData(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "member", "wal"))
	return err == nil
}

// Err reports a fatal error of the running member: one of its listeners failed, or it stopped
// by itself — removed from its cluster, when its server's Node was deleted.
func (s *Server) Err() <-chan error {
	out := make(chan error, 1)
	go func() {
		select {
		case err := <-s.etcd.Err():
			out <- err
		case <-s.etcd.Server.StopNotify():
			if s.etcd.Server.IsIDRemoved(uint64(s.etcd.Server.MemberID())) {
				out <- fmt.Errorf("this server's member was removed from the etcd cluster: to join again, empty %s and start the server with --server and --token", s.dataDir)
				return
			}
			out <- errors.New("the member stopped (see its log)")
		}
	}()
	return out
}

// Close stops the member.
func (s *Server) Close() { s.etcd.Close() }

func urls(raw string) ([]url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("etcd url %q: %w", raw, err)
	}
	return []url.URL{*u}, nil
}
