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

// Held reports whether key is reserved, from this member's copy of the data (a serializable
// read, no quorum round). It is for reservations nothing makes any more — the ClusterIP
// allocator's legacy keys, which can only be released — where an older copy can only say
// "held" of a key since released (an address skipped, never one handed out twice); under a
// burst of writes a linearizable read waits for them to apply, on every Service created.
func (s EtcdStore) Held(ctx context.Context, key string) (bool, error) {
	resp, err := s.Client.Get(ctx, key, clientv3.WithCountOnly(), clientv3.WithSerializable())
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
