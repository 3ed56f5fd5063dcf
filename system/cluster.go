package system

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/skiff-sh/skiff/agent/join"
	"github.com/skiff-sh/skiff/controlplane/apiserver"
	"github.com/skiff-sh/skiff/controlplane/bootstrapdata"
	"github.com/skiff-sh/skiff/controlplane/etcd"
	"github.com/skiff-sh/skiff/controlplane/pki"
	"github.com/skiff-sh/skiff/controlplane/serverjoin"
	"github.com/skiff-sh/skiff/controlplane/storage"
	"github.com/skiff-sh/skiff/internal/bootstraptoken"
	"github.com/skiff-sh/skiff/internal/certfile"
	"github.com/skiff-sh/skiff/internal/layout"
	"github.com/skiff-sh/skiff/internal/supervisor"
	"github.com/skiff-sh/skiff/internal/version"
	"github.com/skiff-sh/skiff/system/bootstrap"
)

// clustered says whether this server's embedded member has peers: --cluster-init, joining with
// --server, or either of them on an earlier start (the recorded peer URL).
func (s Server) clustered() bool {
	if len(s.EtcdServers) > 0 {
		return false
	}
	if s.ClusterInit || s.JoinServer != "" {
		return true
	}
	_, err := os.Stat(layout.Server{Dir: s.DataDir}.EtcdPeerURL())
	return err == nil
}

// joinCluster admits this server into the cluster at --server, before any file is written:
// it receives the shared files (CAs, service-account keys, encryption configuration) and,
// with embedded etcd, its place as an etcd learner, which o then starts with. A server whose
// member already has data (a restart), or whose external-etcd PKI exists, has joined already.
func (s *Server) joinCluster(ctx context.Context, o *apiserver.Options, log *slog.Logger) error {
	dirs := layout.Server{Dir: s.DataDir}
	embedded := len(s.EtcdServers) == 0
	if embedded && etcd.HasData(dirs.Etcd()) {
		return nil
	}
	if _, err := os.Stat(dirs.PKI().CA().Key); !embedded && err == nil {
		return nil
	}
	if s.Token == "" {
		return fmt.Errorf("--server %s needs --token: the first server's join token (its <data-dir>/token)", s.JoinServer)
	}
	jt, err := bootstraptoken.ParseJoin(s.Token)
	if err != nil {
		return fmt.Errorf("--token: %w", err)
	}
	if jt.CAHash == "" {
		log.Warn("--token has no CA pin (K10<hash>::): the first CA the server shows is trusted")
	}
	req := serverjoin.Request{Name: o.EtcdCluster.Name}
	if embedded {
		req.PeerURL = o.EtcdCluster.PeerURL(o.EtcdPeerPort)
	}
	var resp serverjoin.Response
	// The first server may be starting too (an install of three at once): try for a while.
	// A refusal by the server (a wrong token) or a CA that is not the pinned one will not pass.
	retryable := func(err error) bool {
		var refused *serverjoin.RefusedError
		return !join.Permanent(err) && !(errors.As(err, &refused) && refused.Final())
	}
	failed := func(err error, _ time.Duration) {
		log.Warn("joining the cluster; retrying", "server", s.JoinServer, "err", err)
	}
	err = join.Retry(ctx, 2*time.Minute, retryable, failed, func() error {
		caPEM, err := join.FetchCA(ctx, s.JoinServer, jt.CAHash)
		if err != nil {
			return err
		}
		resp, err = serverjoin.Join(ctx, s.JoinServer, caPEM, jt.Token, req)
		return err
	})
	if err != nil {
		return fmt.Errorf("joining %s: %w", s.JoinServer, err)
	}
	if own := version.Kubernetes(); !version.Known(own) || !version.Known(resp.Version) {
		log.Warn("the version skew between this server and the cluster's cannot be judged: a build without a release version",
			"this", own, "cluster", resp.Version)
	} else if err := version.CheckServerSkew(resp.Version, own); err != nil {
		return err
	}
	if resp.ServiceCIDR != s.ServiceCIDR {
		return fmt.Errorf("--service-cidr %s differs from the cluster's %s: every server must serve the same ranges", s.ServiceCIDR, resp.ServiceCIDR)
	}
	if want := s.SecretsEncryption && s.EncryptionProviderConfig == ""; resp.SecretsEncryption != want {
		return fmt.Errorf("--secrets-encryption=%t differs from the cluster's (%t): every server must be started alike", want, resp.SecretsEncryption)
	}
	if err := serverjoin.WriteFiles(dirs, resp.Files); err != nil {
		return err
	}
	o.EtcdCluster.InitialCluster, o.EtcdCluster.Join = resp.InitialCluster, embedded
	log.Info("admitted into the cluster", "server", s.JoinServer, "etcd", resp.InitialCluster)
	return nil
}

// restoreSharedFiles writes the shared files from the sealed copy in a restored member's data,
// and the join token beside them.
func restoreSharedFiles(dirs layout.Server, token bootstraptoken.JoinToken, given string) error {
	sealed, found, err := etcd.ReadStopped(dirs.Etcd(), bootstrapdata.Key(token.Token))
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("the snapshot holds no copy of the cluster's files sealed with token %s: it was taken before skiff kept one, or the cluster's token is another", token.Token.ID)
	}
	files, err := bootstrapdata.Open(token.Token, sealed)
	if err != nil {
		return err
	}
	if err := serverjoin.WriteFiles(dirs, files); err != nil {
		return err
	}
	// The pin, if the token has one, must be the restored CA's.
	_, err = bootstrap.EnsureJoinToken(dirs.Token(), dirs.PKI().CA().Cert, given)
	return err
}

// sharedFilesKeeper keeps the shared files sealed with the join token in the embedded etcd
// (controlplane/bootstrapdata), from when the API server is ready, so snapshots carry them.
func (s Server) sharedFilesKeeper(o apiserver.Options, token bootstraptoken.Token, log *slog.Logger) supervisor.Part {
	dirs := layout.Server{Dir: s.DataDir}
	return supervisor.Part{Name: "shared-files-copy", Policy: supervisor.Restart, Run: func(ctx context.Context) error {
		if err := apiserver.WaitReady(ctx, dirs.Kubeconfig("admin")); err != nil {
			return err
		}
		// The API server's client: storage.Client hands back the connection it shares.
		client, release, err := storage.Client(o.EtcdTransport())
		if err != nil {
			return err
		}
		defer release()
		log := log.With("component", "shared-files-copy")
		err = bootstrapdata.Keeper{Token: token, Store: &etcd.KV{Client: client}, Log: log, Adopt: adoptRotatedCAs(dirs, client, log),
			Files: func() (map[string][]byte, error) { return serverjoin.ReadFiles(dirs) }}.Run(ctx)
		if errors.Is(err, bootstrapdata.ErrAdopted) {
			return fmt.Errorf("%w: %w", err, supervisor.ErrRestartProcess)
		}
		return err
	}}
}

// adoptRotatedCAs is the shared-files keeper's Adopt: when another server of the cluster has
// rotated the CAs (`skiff certificate rotate-ca` there, then its start stored them) and every
// CA of the stored copy that differs from this server's is the next step of its rotation
// (pki.Succeeds: its own CA vouches for the new one), this server takes them — one server at
// a time, so that the etcd members restarting never lose quorum — and starts again to load
// them, issuing its own certificates from them as the first did.
func adoptRotatedCAs(dirs layout.Server, client *clientv3.Client, log *slog.Logger) func(context.Context, map[string][]byte) (bool, error) {
	return func(ctx context.Context, stored map[string][]byte) (bool, error) {
		local, err := serverjoin.ReadFiles(dirs)
		if err != nil {
			return false, err
		}
		rel := func(path string) string {
			r, _ := filepath.Rel(dirs.Dir, path)
			return filepath.ToSlash(r)
		}
		certs := dirs.PKI()
		var take []layout.Pair
		for _, p := range pki.CAs(certs) {
			of := func(m map[string][]byte) pki.CAFiles {
				return pki.CAFiles{Cert: m[rel(p.Cert)], Key: m[rel(p.Key)], Cross: m[rel(p.CrossSigned())]}
			}
			cur, next := of(local), of(stored)
			if bytes.Equal(cur.Cert, next.Cert) && bytes.Equal(cur.Key, next.Key) && bytes.Equal(cur.Cross, next.Cross) {
				continue
			}
			if !pki.Succeeds(next, cur) {
				return false, nil
			}
			take = append(take, p)
		}
		if len(take) == 0 {
			return false, nil
		}
		// The lock is held until this process ends; its lease lapses caAdoptionTTL later and
		// the next server takes its turn, this one back by then.
		session, err := concurrency.NewSession(client, concurrency.WithTTL(caAdoptionTTL), concurrency.WithContext(ctx))
		if err != nil {
			return false, err
		}
		if err := concurrency.NewMutex(session, "/skiff/ca-adoption").Lock(ctx); err != nil {
			return false, err
		}
		var names []string
		for _, p := range take {
			cross := stored[rel(p.CrossSigned())]
			if len(cross) > 0 {
				if err := certfile.WriteWhole(p.CrossSigned(), cross, 0o644); err != nil {
					return false, err
				}
			}
			if err := certfile.WriteWhole(p.Key, stored[rel(p.Key)], 0o600); err != nil {
				return false, err
			}
			if err := certfile.WriteWhole(p.Cert, stored[rel(p.Cert)], 0o644); err != nil {
				return false, err
			}
			if len(cross) == 0 {
				if err := os.Remove(p.CrossSigned()); err != nil && !errors.Is(err, os.ErrNotExist) {
					return false, err
				}
			}
			names = append(names, rel(p.Cert))
		}
		log.Info("took the CAs another server rotated; starting again to load them", "cas", names)
		return true, nil
	}
}

// caAdoptionTTL (seconds) is how long after a server restarts to take rotated CAs the next
// server waits to do the same: a restart takes a few seconds.
const caAdoptionTTL = 20

// recordPeerURL keeps the member's peer URL beside its data: later starts stay clustered.
func recordPeerURL(dirs layout.Server, url string) error {
	if err := os.MkdirAll(filepath.Dir(dirs.EtcdPeerURL()), 0o700); err != nil {
		return err
	}
	return os.WriteFile(dirs.EtcdPeerURL(), []byte(url+"\n"), 0o600)
}

// ResetCluster is --cluster-reset: this server's member becomes the only member of a new
// cluster, keeping its keys (or, with restorePath, those of a snapshot), so a cluster that
// lost quorum comes back from one server, as k3s's flag does. The server then stops; it is
// started again without the flag, and the other servers join it again with emptied etcd
// directories.
func ResetCluster(ctx context.Context, s Server, restorePath string, log *slog.Logger) error {
	if len(s.EtcdServers) > 0 {
		return errors.New("--cluster-reset resets the embedded etcd; this server uses --etcd-servers")
	}
	_, o, err := s.Plan(false)
	if err != nil {
		return err
	}
	dirs := layout.Server{Dir: s.DataDir}
	clustered := s.clustered()
	peerURL := o.EtcdCluster.PeerURL(s.EtcdPeerPort)
	clientURL := fmt.Sprintf("https://127.0.0.1:%d", s.EtcdClientPort)
	if restorePath != "" {
		// On a new machine the snapshot's sealed copy of the cluster's files gives its CAs and
		// keys back (controlplane/bootstrapdata); opening it takes the cluster's token.
		_, err := os.Stat(dirs.PKI().CA().Key)
		newMachine := errors.Is(err, os.ErrNotExist)
		var token bootstraptoken.JoinToken
		if newMachine {
			if s.Token == "" {
				return fmt.Errorf("--cluster-reset-restore-path on a machine without the cluster's PKI (%s) needs --token, the cluster's join token (a server's <data-dir>/token): the snapshot holds the CAs and keys sealed with it", dirs.PKI().Dir)
			}
			if token, err = bootstraptoken.ParseJoin(s.Token); err != nil {
				return fmt.Errorf("--token: %w", err)
			}
		}
		old, err := etcd.Restore(restorePath, dirs.Etcd(), o.EtcdCluster.Name, peerURL, clientURL, time.Now())
		if err != nil {
			return err
		}
		if newMachine {
			if err := restoreSharedFiles(dirs, token, s.Token); err != nil {
				return err
			}
			log.Info("the cluster's CAs, keys and encryption configuration restored from the snapshot", "pki", dirs.PKI().Dir)
		}
		if clustered {
			if err := recordPeerURL(dirs, peerURL); err != nil {
				return err
			}
		}
		log.Info("etcd restored from the snapshot as a new one-member cluster; start the server again without --cluster-reset",
			"snapshot", restorePath, "previous data", old)
		return nil
	}
	if !etcd.HasData(dirs.Etcd()) {
		return fmt.Errorf("--cluster-reset: %s holds no etcd member to reset", dirs.Etcd())
	}
	e, err := etcd.Start(ctx, etcd.Options{
		DataDir: dirs.Etcd(), LogFile: dirs.EtcdLog(), Name: o.EtcdCluster.Name,
		ClientURL: clientURL, PeerURL: peerURL, PKI: dirs.PKI(), ForceNewCluster: true,
	}, log)
	if err != nil {
		return fmt.Errorf("--cluster-reset: %w", err)
	}
	e.Close()
	log.Info("etcd membership reset: this server is the only member; start it again without --cluster-reset, and join the others again after emptying their etcd directories",
		"etcd", dirs.Etcd())
	return nil
}
