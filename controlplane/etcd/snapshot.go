package etcd

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/skiff-sh/skiff/controlplane/pki"
)

// RevisionBump is how far a restore moves etcd's revision ahead, as upstream's restore
// guide says: every resourceVersion a client holds is then older than any the restored
// cluster hands out, and with the old revisions marked compacted, watchers re-list rather
// than miss what changed.
const RevisionBump = 1_000_000_000

// Save writes a consistent snapshot of the member at clientURL to path, through the API
// server's etcd client certificate, and returns the etcd version that made it.
func Save(ctx context.Context, clientURL string, certs pki.Layout, path string) (string, error) {
	tlsCfg, err := transport.TLSInfo{CertFile: certs.APIServerEtcdClient().Cert, KeyFile: certs.APIServerEtcdClient().Key,
		TrustedCAFile: certs.EtcdCA().Cert}.ClientConfig()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	return snapshot.NewV3(zap.NewNop()).Save(ctx, clientv3.Config{Endpoints: []string{clientURL}, TLS: tlsCfg, DialTimeout: 10 * time.Second}, path)
}

// Restore replaces the embedded member's data with a snapshot, as a one-member cluster of
// the given name and peer URL (the server's), keeping the old data beside it as
// <dataDir>.old-<time>. The member must not be running: Restore refuses when something
// answers at clientURL.
func Restore(snapshotPath, dataDir, name, peerURL, clientURL string, now time.Time) (string, error) {
	if u, err := url.Parse(clientURL); err == nil {
		if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
			c.Close()
			return "", fmt.Errorf("etcd answers at %s: stop skiff server before restoring", clientURL)
		}
	}
	if _, err := os.Stat(snapshotPath); err != nil {
		return "", err
	}
	if name == "" {
		name, _ = os.Hostname()
	}
	tmp := dataDir + ".restoring"
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath: snapshotPath, Name: name, OutputDataDir: tmp, PeerURLs: []string{peerURL},
		InitialCluster: name + "=" + peerURL, InitialClusterToken: "etcd-cluster",
		RevisionBump: RevisionBump, MarkCompacted: true,
	})
	if err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("restore %s: %w", snapshotPath, err)
	}
	old := ""
	if _, err := os.Stat(dataDir); err == nil {
		old = fmt.Sprintf("%s.old-%d", dataDir, now.Unix())
		if err := os.Rename(dataDir, old); err != nil {
			return "", err
		}
	}
	if err := os.Rename(tmp, dataDir); err != nil {
		return "", err
	}
	return old, nil
}
