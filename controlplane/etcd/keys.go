package etcd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/traceutil"
	"go.etcd.io/etcd/server/v3/lease"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"
)

// KV reads and writes single keys of etcd outside the API server's key space, on a client
// the caller owns (in a server, the API server's shared one: storage.Client), so
// controlplane/bootstrapdata keeps its copy without a connection of its own.
type KV struct{ Client *clientv3.Client }

// Get reads key.
func (k *KV) Get(ctx context.Context, key string) ([]byte, bool, error) {
	resp, err := k.Client.Get(ctx, key)
	if err != nil || len(resp.Kvs) == 0 {
		return nil, false, err
	}
	return resp.Kvs[0].Value, true, nil
}

// Put writes key.
func (k *KV) Put(ctx context.Context, key string, value []byte) error {
	_, err := k.Client.Put(ctx, key, string(value))
	return err
}

// ReadStopped reads key from the data of a member that is not running (a restored snapshot's,
// before the server starts), through etcd's own storage layer on a copy of its database, so
// the member's files stay as they are.
func ReadStopped(dataDir, key string) ([]byte, bool, error) {
	db := filepath.Join(dataDir, "member", "snap", "db")
	tmp, err := os.MkdirTemp("", "skiff-etcd-read-")
	if err != nil {
		return nil, false, err
	}
	defer os.RemoveAll(tmp)
	cp := filepath.Join(tmp, "db")
	if err := copyFile(db, cp); err != nil {
		return nil, false, fmt.Errorf("copying %s: %w", db, err)
	}
	lg := zap.NewNop()
	be := backend.NewDefaultBackend(lg, cp)
	defer be.Close()
	store := mvcc.NewStore(lg, be, &lease.FakeLessor{}, mvcc.StoreConfig{})
	defer store.Close()
	txn := store.Read(mvcc.ConcurrentReadTxMode, traceutil.TODO())
	defer txn.End()
	r, err := txn.Range(context.Background(), []byte(key), nil, mvcc.RangeOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("reading %s from %s: %w", key, db, err)
	}
	if len(r.KVs) == 0 {
		return nil, false, nil
	}
	return r.KVs[0].Value, true, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Watch tells of each change of key until ctx ends or the watch does (then the channel
// closes).
func (k *KV) Watch(ctx context.Context, key string) <-chan struct{} {
	out := make(chan struct{}, 1)
	events := k.Client.Watch(clientv3.WithRequireLeader(ctx), key)
	go func() {
		defer close(out)
		for resp := range events {
			if resp.Err() != nil {
				return
			}
			select {
			case out <- struct{}{}:
			default: // one pending change is enough: the keeper reads the key anew
			}
		}
	}()
	return out
}
