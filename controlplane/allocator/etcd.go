package allocator

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// EtcdStore keeps one key per reserved value; Reserve is a create-if-absent transaction.
type EtcdStore struct {
	Client *clientv3.Client
}

// Reserve implements Store.
func (s EtcdStore) Reserve(ctx context.Context, key, owner string) (bool, error) {
	resp, err := s.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, owner)).
		Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// Release implements Store.
func (s EtcdStore) Release(ctx context.Context, key string) error {
	_, err := s.Client.Delete(ctx, key)
	return err
}

// Held reports whether key is reserved.
func (s EtcdStore) Held(ctx context.Context, key string) (bool, error) {
	resp, err := s.Client.Get(ctx, key, clientv3.WithCountOnly())
	if err != nil {
		return false, err
	}
	return resp.Count > 0, nil
}

// Keys lists the reserved keys under prefix.
func (s EtcdStore) Keys(ctx context.Context, prefix string) ([]string, error) {
	resp, err := s.Client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys, nil
}
